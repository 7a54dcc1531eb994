"""The command line: the one error boundary that maps errors to exit codes.

Exit codes (DESIGN.md): 0 nothing at or above ``--fail-on``; 1 findings;
2 usage, config or rule error; 3 incomplete (unreadable input, rule evaluation
errors) when nothing else failed; 4 internal error; 130 interrupted.
"""

from __future__ import annotations

import gc
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final, TextIO

import click

from scanner import __version__, lifetime
from scanner.cel import ENGINE_NAMES
from scanner.errors import PoolgateError, UsageError, printable
from scanner.findings import INCOMPLETE_RULES
from scanner.reporters import FORMATS

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE, EXIT_INCOMPLETE, EXIT_INTERNAL, EXIT_INTERRUPTED = (
    0,
    1,
    2,
    3,
    4,
    130,
)


LARGEST_FILE_SIZE_LIMIT = 1024**3
"""The most ``--max-file-size`` allows: each read asks for the limit's worth of memory
up front, and a gigabyte of YAML would take hundreds of gigabytes to compose."""


_SIZE: Final = re.compile(r"([0-9]{1,19}) *(?:([KMG])(i?B|i)?)?", re.IGNORECASE)
"""Digits (no more than a size can have: Python refuses to read 4,300), then K, M or
G, alone or as Ki, KiB (Kubernetes and IEC spellings) or KB (refused: ambiguous)."""
_SCALE: Final = {"k": 1024, "m": 1024**2, "g": 1024**3}


def _file_size(text: str) -> int:
    """``--max-file-size``: ``1048576``, ``512KiB``, ``10MiB``, ``1GiB`` (K, M, G and
    Ki, Mi, Gi alike). ``10MB`` is refused: decimal or binary, a reader cannot tell."""
    match = _SIZE.fullmatch(text.strip())
    if match is None or int(match[1]) < 1:
        raise click.BadParameter(f"{text!r} is not a size such as 10MiB, 512KiB or 1048576")
    digits, prefix, unit = match.groups()
    if unit is not None and unit.lower() == "b":
        raise click.BadParameter(
            f"{text!r} is ambiguous (decimal or binary): write {digits}{prefix.upper()}iB"
            " or a number of bytes"
        )
    scale = _SCALE[prefix.lower()] if prefix else 1
    if int(digits) * scale > LARGEST_FILE_SIZE_LIMIT:
        raise click.BadParameter(f"{text!r} is more than the largest limit, 1GiB")
    return int(digits) * scale


MAX_REQUEST_TIMEOUT: Final = 3600.0
"""An hour for one API response: past that, a list is better retried or failed."""


def _finite(_context: click.Context, parameter: click.Parameter, value: float) -> float:
    """Refuse ``nan``, which passes every range check (``inf`` does not: ``max``)."""
    if value != value:
        raise click.BadParameter(f"{value!r} is not a number of seconds", param=parameter)
    return value


def _split_ids(values: Sequence[str]) -> list[str]:
    """``--disable PG101,PG102 --disable PG103`` -> ids, upper-cased."""
    return [part.strip().upper() for value in values for part in value.split(",") if part.strip()]


def _default_format() -> str:
    return "github" if os.environ.get("GITHUB_ACTIONS") == "true" else "text"


rules_options = [
    click.option(
        "--rules",
        "rule_dirs",
        multiple=True,
        type=click.Path(file_okay=False, path_type=Path),
        help="Extra rule directory (repeatable).",
    ),
    click.option(
        "--cel-engine",
        type=click.Choice(ENGINE_NAMES),
        default="auto",
        show_default=True,
        help="CEL implementation: cpp (cel-expr-python) or python (cel-python).",
    ),
]


report_options = [
    click.option(
        "--format",
        "formats",
        multiple=True,
        type=click.Choice(FORMATS),
        help="Report format (repeatable, paired with --output). Default: github under "
        "GitHub Actions, else text.",
    ),
    click.option("--output", "-o", "outputs", multiple=True, help="Report file for each --format."),
    click.option(
        "--fail-on",
        type=click.Choice(["error", "warning", "note", "never"]),
        default="error",
        show_default=True,
        help="Lowest level that makes the exit code 1.",
    ),
    click.option(
        "--show-suppressed",
        is_flag=True,
        help="Show suppressed findings in text and HTML reports.",
    ),
]


def with_report_options(func: Any) -> Any:
    """The report options ``scan`` and ``audit`` share."""
    for option in reversed(report_options):
        func = option(func)
    return func


def with_rule_options(func: Any) -> Any:
    for option in reversed(rules_options):
        func = option(func)
    return func


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(
    __version__, "--version", prog_name="poolgate", message="%(prog)s %(version)s"
)
def cli() -> None:
    """poolgate: policy-as-code compliance scanner for GPU Kubernetes platforms."""


@cli.command()
@click.argument("paths", nargs=-1, required=True)
@with_report_options
@click.option(
    "--enable",
    multiple=True,
    help="Enable rule ids (repeatable, comma-separated); wins over the config.",
)
@click.option("--disable", multiple=True, help="Disable rule ids (repeatable, comma-separated).")
@click.option("--verbose", "-v", is_flag=True, help="Also report skipped documents.")
@click.option(
    "--max-file-size",
    default="10MiB",
    show_default=True,
    callback=lambda _ctx, _param, value: _file_size(value),
    help="Skip (and report) larger files: bytes, or a number with KiB, MiB or GiB (at most 1GiB).",
)
@click.option(
    "--config",
    "config_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Configuration file (default: .poolgate.yaml found upward from the first path).",
)
@click.option(
    "--context",
    multiple=True,
    help="File or directory of objects used for joins but not reported on (repeatable).",
)
@click.option(
    "--baseline",
    "baseline_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Leave out findings recorded in this file (see --write-baseline).",
)
@click.option(
    "--write-baseline",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Record the fingerprints of the current findings in this file (and leave them out).",
)
@click.option(
    "--helm-values",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False),
    help="Values file for every Helm chart rendered (repeatable, in order).",
)
@click.option(
    "--helm-set", multiple=True, metavar="KEY=VAL", help="helm --set for every chart (repeatable)."
)
@click.option(
    "--helm-namespace",
    default="default",
    show_default=True,
    help="Release namespace Helm charts are rendered for.",
)
@with_rule_options
def scan(
    paths: tuple[str, ...],
    formats: tuple[str, ...],
    outputs: tuple[str, ...],
    fail_on: str,
    enable: tuple[str, ...],
    disable: tuple[str, ...],
    show_suppressed: bool,
    verbose: bool,
    max_file_size: int,
    config_file: Path | None,
    context: tuple[str, ...],
    baseline_file: Path | None,
    write_baseline: Path | None,
    helm_values: tuple[str, ...],
    helm_set: tuple[str, ...],
    helm_namespace: str,
    rule_dirs: tuple[Path, ...],
    cel_engine: str,
) -> int:
    """Scan manifest files and directories (``-`` reads standard input).

    Directories holding a Helm chart (Chart.yaml) or a Kustomization
    (kustomization.yaml) are rendered with helm / kustomize when installed.
    """
    from dataclasses import replace
    from functools import partial

    from scanner import baseline, configfile, output, pipeline
    from scanner.reporters import writer_for
    from scanner.sources.rendered import RenderOptions

    destinations = output.pair(formats, outputs, _default_format())
    output.check_apart(destinations, "--baseline", baseline_file)
    output.check_apart(destinations, "--write-baseline", write_baseline)
    known = baseline.load(baseline_file) if baseline_file is not None else None
    if write_baseline is not None:
        output.check_writable(write_baseline, "--write-baseline")
    render = RenderOptions(helm_values, _assignments(helm_set), helm_namespace)
    loaded = configfile.resolve(paths, config_file)
    _warn_all(loaded.warnings)
    options = pipeline.ScanOptions(
        rule_dirs=rule_dirs,
        enable=_split_ids(enable),
        disable=_split_ids(disable),
        engine=cel_engine,
        config=loaded.config,
    )
    ruleset = pipeline.load_ruleset(options)
    report = pipeline.scan_paths(
        paths, ruleset, context=context, render=render, max_file_size=max_file_size
    )
    if write_baseline is not None:
        record = baseline.document(report.findings, __version__, INCOMPLETE_RULES)
        target = output.Destination("json", str(write_baseline))
        output.write(target, partial(baseline.write, record))
        _note(f"wrote {len(record['fingerprints'])} fingerprints to {write_baseline}")
        known = baseline.recorded(report.findings, INCOMPLETE_RULES)
    if known is not None:
        report = pipeline.apply_baseline(report, known)
    for destination in destinations:
        color = (
            destination.is_stdout
            and destination.format == "text"
            and sys.stdout is not None
            and sys.stdout.isatty()
            and "NO_COLOR" not in os.environ
        )
        shown = replace(report, show_suppressed=show_suppressed, color=color, verbose=verbose)
        output.write(destination, partial(writer_for(destination.format), shown))
    return pipeline.exit_code(report, fail_on)


cluster_options = [
    click.option(
        "--kubeconfig",
        type=click.Path(dir_okay=False),
        help="Kubeconfig file (default: KUBECONFIG, in-cluster config, ~/.kube/config).",
    ),
    click.option("--context", "kube_context", help="Kubeconfig context (default: current)."),
    click.option(
        "--progress", is_flag=True, help="Per-kind progress on stderr (always on a terminal)."
    ),
    click.option(
        "--page-size",
        type=click.IntRange(1, 10_000),
        default=500,
        show_default=True,
        help="Objects per list request (limit/continue pagination).",
    ),
    click.option(
        "--request-timeout",
        type=click.FloatRange(min=0.1, max=MAX_REQUEST_TIMEOUT),
        callback=_finite,
        default=60.0,
        show_default=True,
        help="Seconds to wait for one API response before retrying.",
    ),
    click.option(
        "--deadline",
        type=click.FloatRange(min=1.0),
        callback=_finite,
        default=2700.0,
        show_default=True,
        help="Seconds reading the cluster may take in all; kinds not read by then are "
        "reported as not read (exit code 3). Keep it under the Job's activeDeadlineSeconds.",
    ),
    click.option(
        "--enable",
        multiple=True,
        help="Enable rule ids (repeatable, comma-separated); wins over the config.",
    ),
    click.option(
        "--disable", multiple=True, help="Disable rule ids (repeatable, comma-separated)."
    ),
    click.option(
        "--config",
        "config_file",
        type=click.Path(dir_okay=False, path_type=Path),
        help="Configuration file (default: .poolgate.yaml found upward from here).",
    ),
]


def with_cluster_options(func: Any) -> Any:
    for option in reversed(cluster_options):
        func = option(func)
    return with_rule_options(func)


def _audit_ruleset(
    config_file: Path | None,
    enable: Sequence[str],
    disable: Sequence[str],
    rule_dirs: Sequence[Path],
    cel_engine: str,
) -> Any:
    from scanner import configfile, pipeline

    loaded = configfile.resolve([], config_file)
    _warn_all(loaded.warnings)
    options = pipeline.ScanOptions(
        rule_dirs=rule_dirs,
        enable=_split_ids(enable),
        disable=_split_ids(disable),
        engine=cel_engine,
        config=loaded.config,
        mode="audit",
    )
    return pipeline.load_ruleset(options)


def _read_live(
    ruleset: Any,
    kubeconfig: str | None,
    kube_context: str | None,
    page_size: int,
    request_timeout: float,
    deadline: float,
    progress: bool,
) -> Any:
    """The objects ``ruleset``'s rules read, listed from the cluster (a Capture)."""
    from scanner import audit as auditing
    from scanner.sources.cluster import Settings, Target

    return auditing.read_cluster(
        Target(kubeconfig, kube_context),
        Settings(page_size=page_size, request_timeout=request_timeout, deadline=deadline),
        ruleset.rules,
        ruleset.config.operator_namespaces,
        auditing.stderr_progress(progress),
    )


@cli.command()
@click.option(
    "--snapshot",
    "snapshot_file",
    type=click.Path(dir_okay=False),
    help="Audit a snapshot (poolgate snapshot, or any kubectl get -o yaml|json List) "
    "instead of a live cluster.",
)
@click.option(
    "--compare",
    type=click.Path(dir_okay=False),
    help="A previous --format json report: mark findings new, unchanged or resolved.",
)
@click.option(
    "--now",
    "now_text",
    metavar="RFC3339",
    help="Judge durations (Pending for N minutes) as of this time "
    "(default: when the cluster was read).",
)
@click.option(
    "--publish-reports",
    is_flag=True,
    help="Also server-side apply the findings as PolicyReports (wgpolicyk8s.io/v1alpha2) "
    "in the audited cluster and delete poolgate's stale ones (RBAC: deploy/optional/).",
)
@with_report_options
@click.option("--verbose", "-v", is_flag=True, help="Also report skipped items.")
@with_cluster_options
def audit(
    snapshot_file: str | None,
    compare: str | None,
    now_text: str | None,
    publish_reports: bool,
    formats: tuple[str, ...],
    outputs: tuple[str, ...],
    fail_on: str,
    show_suppressed: bool,
    verbose: bool,
    kubeconfig: str | None,
    kube_context: str | None,
    progress: bool,
    page_size: int,
    request_timeout: float,
    deadline: float,
    enable: tuple[str, ...],
    disable: tuple[str, ...],
    config_file: Path | None,
    rule_dirs: tuple[Path, ...],
    cel_engine: str,
) -> int:
    """Audit a live cluster (or a snapshot of one) with the rules, live-only rules included.

    Needs read access (get/list) to the kinds the enabled rules read; deploy/ has a
    ClusterRole with exactly those. A kind that is forbidden is reported with the
    rules that could not run, and the exit code is 3 when nothing else failed.
    """
    from dataclasses import replace
    from functools import partial

    from scanner import audit as auditing
    from scanner import drift, output, pipeline
    from scanner.engine import start_helper
    from scanner.errors import UsageError
    from scanner.reporters import policyreport, writer_for
    from scanner.sources import snapshot

    destinations = output.pair(formats, outputs, _default_format())
    if snapshot_file is not None and kubeconfig is not None:
        raise UsageError("--snapshot and --kubeconfig exclude each other")
    if snapshot_file is not None and publish_reports:
        raise UsageError(
            "--publish-reports applies the reports in the audited cluster: it needs a "
            "live audit, not --snapshot",
            hint="write them with --format policyreport and kubectl apply --server-side -f",
        )
    previous = drift.load_previous(compare) if compare is not None else None
    now = None
    if now_text is not None:
        try:
            now = snapshot.parse_time(now_text)
        except ValueError:
            raise UsageError(
                f"--now {now_text!r} is not an RFC 3339 time", hint="e.g. 2025-06-01T02:00:00Z"
            ) from None
    ruleset = _audit_ruleset(config_file, enable, disable, rule_dirs, cel_engine)
    # Forked now, while this process is small: a large cluster's objects would make a
    # later fork's copied pages cost memory (scanner/forking.py, Helper).
    helper = start_helper(ruleset.rules, ruleset.engine) if _large(snapshot_file) else None
    try:
        if snapshot_file is not None:
            capture = snapshot.read(snapshot_file, kube_context)
        else:
            capture = _read_live(
                ruleset, kubeconfig, kube_context, page_size, request_timeout, deadline, progress
            )
        report, coverage = auditing.evaluate(capture, ruleset, now=now, helper=helper)
        lifetime.keep(capture)  # a cluster's objects, held to the end (scanner.lifetime)
    finally:
        if helper is not None:
            helper.close()
    changes = None
    if previous is not None and compare is not None:
        ran = {rule.id for rule in ruleset.rules} - coverage.blocked
        changes = drift.compare(report, previous, compare, drift.checker(ran, coverage.unseen))
    found = None
    if publish_reports or any(d.format == "policyreport" for d in destinations):
        uids = policyreport.object_uids(capture.objects, report.findings)
        found = policyreport.Found(capture.captured_at, uids)
        if publish_reports:
            report = _publish_reports(report, found, kubeconfig, kube_context, request_timeout)
    for destination in destinations:
        color = (
            destination.is_stdout
            and destination.format == "text"
            and sys.stdout is not None
            and sys.stdout.isatty()
            and "NO_COLOR" not in os.environ
        )
        shown = replace(report, show_suppressed=show_suppressed, color=color, verbose=verbose)
        write = writer_for(destination.format)
        if destination.format == "policyreport":
            write = policyreport.writer(found)  # with when and which uids (Found)
        if changes is not None:
            write = drift.wrap(destination.format, write, changes)
        output.write(destination, partial(write, shown))
    lifetime.keep(report)
    return pipeline.exit_code(report, fail_on)


def _publish_reports(
    report: Any,
    found: Any,
    kubeconfig: str | None,
    kube_context: str | None,
    request_timeout: float,
) -> Any:
    """``report`` with what publishing its PolicyReports could not do as notifications:
    an error each (exit code 3 when nothing else failed), never a crash (scanner.publish)."""
    from dataclasses import replace

    from scanner import publish
    from scanner.findings import Level, Notification
    from scanner.reporters import policyreport
    from scanner.sources.cluster import Settings, Target

    done = publish.publish(
        Target(kubeconfig, kube_context),
        Settings(request_timeout=request_timeout),
        policyreport.build(report, found),
    )
    if not done.problems:
        _note(
            f"published {len(done.applied)} policy reports"
            + (f", deleted {len(done.deleted)} stale ones" if done.deleted else "")
        )
    notes = [Notification(Level.ERROR, problem) for problem in done.problems]
    notes += [Notification(Level.WARNING, note) for note in done.notes]
    return replace(report, notifications=[*report.notifications, *notes])


HELPER_FROM_BYTES: Final = 64 * 1024 * 1024
"""Snapshot files from which an audit starts a helper process: decoded and modelled,
64 MiB of JSON take ~400 MiB, and the helper pays once poolgate holds 1 GiB (about
150 MiB of JSON). A live audit always starts one: its size is known only once read."""


def _large(snapshot_file: str | None) -> bool:
    """Whether an audit may grow past ``forking.FORK_BELOW``: a live one, or a
    snapshot of ``HELPER_FROM_BYTES`` or more."""
    if snapshot_file is None:
        return True
    try:
        return os.path.getsize(snapshot_file) >= HELPER_FROM_BYTES
    except OSError:
        return False  # snapshot.read reports it


@cli.command("snapshot")
@click.option(
    "--output", "-o", "output_file", required=True, help="File to write the snapshot to (JSON)."
)
@with_cluster_options
def snapshot_command(
    output_file: str,
    kubeconfig: str | None,
    kube_context: str | None,
    progress: bool,
    page_size: int,
    request_timeout: float,
    deadline: float,
    enable: tuple[str, ...],
    disable: tuple[str, ...],
    config_file: Path | None,
    rule_dirs: tuple[Path, ...],
    cel_engine: str,
) -> int:
    """Write the objects the enabled rules need (never Secrets) to one JSON List.

    `poolgate audit --snapshot FILE` audits it later, anywhere, with the same
    findings a live audit would have given at capture time.
    """
    from functools import partial

    from scanner import output
    from scanner.sources import snapshot

    destination = output.Destination("json", output_file)
    if not destination.is_stdout:
        output.check_writable(Path(output_file))
    ruleset = _audit_ruleset(config_file, enable, disable, rule_dirs, cel_engine)
    capture = _read_live(
        ruleset, kubeconfig, kube_context, page_size, request_timeout, deadline, progress
    )
    output.write(destination, partial(snapshot.write, capture))
    for item in capture.unavailable:
        where = f" in namespace {item.namespace}" if item.namespace else ""
        _warn(
            f"could not list {snapshot.kind_label(item.key)}{where}: {item.status}: {item.message}"
        )
    if not destination.is_stdout:
        count = len(capture.objects)
        _note(f"wrote {count:,} objects from context {capture.context} to {output_file}")
    return EXIT_INCOMPLETE if capture.unavailable else EXIT_OK


@cli.group()
def rules() -> None:
    """The rule catalog: list, show one, run the rule fixtures."""


@rules.command("list")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json", "markdown"]),
    default="text",
    show_default=True,
    help="markdown writes the rule reference (docs/rules.md).",
)
@with_rule_options
def rules_list(fmt: str, rule_dirs: tuple[Path, ...], cel_engine: str) -> int:
    """Every rule: id, level, name, summary."""
    from scanner import catalog

    click.echo(catalog.render_list(_all_rules(rule_dirs, cel_engine), fmt), nl=False)
    return EXIT_OK


@rules.command("show")
@click.argument("rule_id")
@with_rule_options
def rules_show(rule_id: str, rule_dirs: tuple[Path, ...], cel_engine: str) -> int:
    """The full documentation of one rule."""
    from scanner import catalog
    from scanner.errors import UsageError

    wanted = rule_id.strip().upper()
    for rule in _all_rules(rule_dirs, cel_engine):
        if rule.id == wanted:
            click.echo(catalog.render_rule(rule), nl=False)
            return EXIT_OK
    raise UsageError(f"no rule {rule_id}", hint="see `poolgate rules list`")


@rules.command("test")
@click.argument(
    "fixtures", required=False, type=click.Path(file_okay=False, exists=True, path_type=Path)
)
@click.option("--verbose", "-v", is_flag=True, help="Show every fixture file.")
@with_rule_options
def rules_test(
    fixtures: Path | None, verbose: bool, rule_dirs: tuple[Path, ...], cel_engine: str
) -> int:
    """Run every rule's fixtures (default: fixtures/rules) and compare with their markers.

    A fixture directory is named by rule id. Files named fire*.yaml mark each line a
    finding is expected on with "# expect: <ID>"; files named pass*.yaml must stay silent.
    """
    from scanner import pipeline, ruletest

    ruleset = pipeline.load_ruleset(
        pipeline.ScanOptions(rule_dirs=rule_dirs, engine=cel_engine, enable_all=True)
    )
    root = fixtures or Path("fixtures/rules")
    if not root.is_dir():  # the default, outside a checkout that has it
        raise UsageError(
            f"{root}: no such directory",
            hint="give the fixtures directory: poolgate rules test DIR",
        )
    results = ruletest.run(root, ruleset)
    click.echo(ruletest.render(results, verbose), nl=False)
    return EXIT_OK if results and all(result.ok for result in results) else EXIT_FINDINGS


@cli.group("config")
def config_group() -> None:
    """The configuration file (.poolgate.yaml): write a default one, check one."""


@config_group.command("init")
@click.argument("path", required=False, default=".", type=click.Path())
@click.option("--force", is_flag=True, help="Overwrite an existing file.")
def config_init(path: str, force: bool) -> int:
    """Write a commented .poolgate.yaml holding the defaults (PATH: file or directory)."""
    from scanner import configfile, output

    target = configfile.init_target(path, force)
    text = configfile.default_text()

    def render(stream: TextIO) -> None:
        stream.write(text)

    output.write(output.Destination("yaml", str(target)), render)
    click.echo(f"wrote {target}")
    return EXIT_OK


@config_group.command("validate")
@click.argument("file", required=False, type=click.Path(dir_okay=False, path_type=Path))
@with_rule_options
def config_validate(file: Path | None, rule_dirs: tuple[Path, ...], cel_engine: str) -> int:
    """Check a config file (default: .poolgate.yaml found upward from here).

    Prints "ok: FILE" when valid; problems exit with code 2. Rule ids must name
    bundled rules, rules in spec.ruleDirs or in --rules.
    """
    import datetime

    from scanner import configfile, pipeline, suppress
    from scanner.errors import ConfigError

    if file is None:
        found = configfile.discover(Path.cwd())
        if found is None:
            raise ConfigError(
                f"no {configfile.CONFIG_FILE_NAME} here or above (up to the repository root)",
                hint="`poolgate config init` writes one",
            )
        file = found
    loaded = configfile.resolve([], file)
    _warn_all(loaded.warnings)
    pipeline.load_ruleset(
        pipeline.ScanOptions(rule_dirs=rule_dirs, engine=cel_engine, config=loaded.config)
    )
    shown = configfile.display_path(file)
    today = datetime.date.today()
    for exemption in loaded.config.exemptions:
        problem = suppress.exemption_problem(exemption, today)
        if problem:
            _warn(f"{shown}:{exemption.line}: {problem}")
    click.echo(f"ok: {shown}")
    return EXIT_OK


def _warn_all(warnings: Sequence[str]) -> None:
    for warning in warnings:
        _warn(warning)


def _warn(message: str) -> None:
    """One line: a warning quotes keys and values from files (``errors.printable``)."""
    from scanner.errors import printable

    click.echo(f"poolgate: warning: {printable(message)}", err=True)


def _assignments(values: Sequence[str]) -> list[str]:
    """``--helm-set`` values, each checked to be ``KEY=VAL`` before any work."""
    from scanner.errors import UsageError

    for value in values:
        if "=" not in value or value.startswith("="):
            raise UsageError(f"--helm-set {value!r}: expected KEY=VAL", hint="e.g. image.tag=1.2")
    return list(values)


def _note(message: str) -> None:
    click.echo(f"poolgate: {message}", err=True)


def _all_rules(rule_dirs: Sequence[Path], cel_engine: str) -> list[Any]:
    from scanner.cel import get_engine
    from scanner.rules import bundled_rules_dir, load_rules

    return load_rules([bundled_rules_dir(), *rule_dirs], get_engine(cel_engine))


def _refuse_files_named_as_options(args: Sequence[str]) -> None:
    """Refuse a ``scan`` argument before ``--`` that starts with ``-`` and names an
    existing file.

    pre-commit appends the staged file names to the hook's command, and a pull request
    chooses them: a file called ``--fail-on=never.yaml`` or ``--config=x.yaml`` would
    be read as an option and make the hook pass. Reading it as a path instead would
    let a file named like the user's own option (``--fail-on=warning``) silently drop
    that option. Either way the run fails here, closed; ``./NAME`` or ``-- NAME``
    names such a file."""
    if not args or args[0] != "scan":
        return
    command = cli.commands["scan"]
    takes_value = {
        name
        for parameter in command.params
        if isinstance(parameter, click.Option) and not parameter.is_flag
        for name in parameter.opts
    }
    value_next = False
    for arg in args[1:]:
        if value_next:  # the value of the option before it (-o -report.json)
            value_next = False
            continue
        if arg == "--":
            return
        if arg in takes_value:
            value_next = True
            continue
        if arg.startswith("-") and arg != "-" and os.path.lexists(arg):
            raise UsageError(
                f"argument {printable(arg)!r} names a file but would be read as an option",
                hint=f"rename the file, or name it as ./{printable(arg)} or after --",
            )


def main(argv: Sequence[str] | None = None) -> None:
    """Console entry point: run the CLI and exit with its code, never with a traceback
    for a user mistake.

    The cyclic garbage collector stays off: one process runs one command, whose
    objects (inventory, model, findings) live to its end. The loaders and the
    evaluation pause it anyway (``collector_paused``); re-enabling it between them
    made the first collections after the evaluation traverse the whole model (the
    young generation, then the middle one) while the reports were written. What the
    stages are done with is held, not freed, and the process ends without the
    interpreter's teardown once its output is flushed (``scanner.lifetime``): freeing
    it all only gave memory back to a process about to end. Library callers (``run``)
    keep the collector as they set it, and their objects are freed as usual.
    """
    gc.disable()
    lifetime.keep_until_exit()
    lifetime.end(run(argv))


def run(argv: Sequence[str] | None = None) -> int:
    args = list(argv) if argv is not None else sys.argv[1:]
    try:
        _refuse_files_named_as_options(args)
        result = cli.main(args=args, standalone_mode=False)
    except PoolgateError as error:
        _error(str(error))
        return error.exit_code
    except click.exceptions.Exit as done:
        return int(done.exit_code)
    except click.ClickException as error:
        _error(error.format_message())
        return EXIT_USAGE
    except (KeyboardInterrupt, click.exceptions.Abort):
        _error("interrupted")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader went away (``poolgate scan . | head``); nothing more to say.
        sys.stderr.close()
        return EXIT_OK
    except Exception:
        _crash_report()
        return EXIT_INTERNAL
    return int(result) if isinstance(result, int) else EXIT_OK


def _error(message: str) -> None:
    click.echo(f"poolgate: error: {message}", err=True)


def _crash_report() -> None:
    """An unexpected error: a short report to file as a bug, with the last frames only."""
    import platform  # only here: ~10 ms of every start-up otherwise
    import traceback

    kind, value, _ = sys.exc_info()
    frames = traceback.format_exc().strip().splitlines()[-6:]
    click.echo(
        f"poolgate: internal error: {kind.__name__ if kind else 'error'}: {value}\n"
        f"  poolgate {__version__}, Python {platform.python_version()}, {platform.platform()}\n"
        "  please report this with the lines below at https://github.com/poolgate/poolgate/issues\n"
        + "\n".join(f"  {line}" for line in frames),
        err=True,
    )
