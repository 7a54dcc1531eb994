"""``poolgate scan``: manifests in files and directories, with the policy chosen for
them (``--config``, ``--policy-ref``), a baseline, and Helm charts and
Kustomizations rendered first.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import click

from scanner import __version__, console
from scanner.cli.options import color_option, rule_options, split_ids
from scanner.cli.reports import ReportOptions, report_options, write_reports
from scanner.errors import UsageError

if TYPE_CHECKING:
    from scanner.findings import baseline, drift
    from scanner.findings.report import Report
    from scanner.pipeline import Ruleset
    from scanner.policy import Policy

HELP = """Scan manifest files and directories (``-`` reads standard input).

Directories holding a Helm chart (Chart.yaml) or a Kustomization
(kustomization.yaml) are rendered with helm / kustomize when installed.
"""

PROGRESS_DELAY: Final = 1.0
"""Seconds a scan runs before progress shows on a terminal without ``--progress``:
a quick scan (pre-commit, one file) prints nothing but its report."""

LARGEST_FILE_SIZE_LIMIT = 1024**3
"""The most ``--max-file-size`` allows: each read asks for the limit's worth of memory
up front, and a gigabyte of YAML would take hundreds of gigabytes to compose."""


_SIZE: Final = re.compile(r"([0-9]{1,19}) *(?:([KMG])(i?B|i)?)?", re.IGNORECASE)
"""Digits (no more than a size can have: Python refuses to read 4,300), then K, M or
G, alone or as Ki, KiB (Kubernetes and IEC spellings) or KB (refused: ambiguous)."""
_SCALE: Final = {"k": 1024, "m": 1024**2, "g": 1024**3}


def file_size(text: str) -> int:
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


def exclude_patterns(values: Sequence[str]) -> tuple[str, ...]:
    """``--exclude`` patterns, each checked before any work (``scanner.config.excludes``)."""
    if not values:
        return ()
    from scanner.config import excludes

    for value in values:
        problem = excludes.check(value)
        if problem:
            raise click.BadParameter(f"{value!r}: {problem}", param_hint="'--exclude'")
    return tuple(values)


@click.command("scan", help=HELP)
@click.argument("paths", nargs=-1, required=True)
@report_options
@click.option(
    "--enable",
    multiple=True,
    help="Enable rule ids (repeatable, comma-separated); wins over the config.",
)
@click.option("--disable", multiple=True, help="Disable rule ids (repeatable, comma-separated).")
@click.option(
    "--exclude",
    multiple=True,
    metavar="GLOB",
    callback=lambda _ctx, _param, values: exclude_patterns(values),
    help="Leave out paths matching this gitignore-style glob, relative to the repository root "
    "(repeatable; ** spans directories); added to the config's spec.exclude.",
)
@click.option("--verbose", "-v", is_flag=True, help="Also report skipped documents.")
@click.option(
    "--progress",
    is_flag=True,
    help="Progress of each stage on stderr (on a terminal: by itself after a second).",
)
@color_option
@click.option(
    "--max-file-size",
    default="10MiB",
    show_default=True,
    callback=lambda _ctx, _param, value: file_size(value),
    help="Skip (and report) larger files: bytes, or a number with KiB, MiB or GiB (at most 1GiB).",
)
@click.option(
    "--config",
    "config_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Configuration file (default: .poolgate.yaml found upward from the first path).",
)
@click.option(
    "--context-path",
    "context_paths",
    multiple=True,
    help="File or directory of objects used for joins but not reported on (repeatable).",
)
@click.option(
    "--context",
    "old_context",
    multiple=True,
    hidden=True,
    help="Deprecated: --context-path (audit's --context is a kubeconfig context, as in kubectl).",
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
    "--policy-ref",
    metavar="REF",
    help="Read the config (discovered or --config), its ruleDirs, and --rules and --baseline "
    "inside the repository from git commit REF (a pull request's base), never from the "
    "work tree; warn when the work tree's differ.",
)
@click.option(
    "--compare",
    type=click.Path(dir_okay=False),
    help="A previous --format json report: mark findings new, unchanged or resolved.",
)
@click.option(
    "--compare-policy",
    metavar="REF",
    help="Use the work tree's config, rules and baseline, but warn when they differ from "
    "git commit REF's.",
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
@rule_options
def command(
    paths: tuple[str, ...],
    reports: ReportOptions,
    enable: tuple[str, ...],
    disable: tuple[str, ...],
    exclude: tuple[str, ...],
    verbose: bool,
    progress: bool,
    max_file_size: int,
    config_file: Path | None,
    context_paths: tuple[str, ...],
    old_context: tuple[str, ...],
    baseline_file: Path | None,
    write_baseline: Path | None,
    policy_ref: str | None,
    compare: str | None,
    compare_policy: str | None,
    helm_values: tuple[str, ...],
    helm_set: tuple[str, ...],
    helm_namespace: str,
    rule_dirs: tuple[Path, ...],
    cel_engine: str,
) -> int:
    from dataclasses import replace

    from scanner import pipeline, policy
    from scanner.findings import drift
    from scanner.reporters import output
    from scanner.sources.rendered import RenderOptions

    if old_context:
        console.warn("scan --context is deprecated: use --context-path (the same paths)")
    context = (*context_paths, *old_context)
    destinations = reports.destinations()
    output.check_apart(destinations, "--baseline", baseline_file)
    output.check_apart(destinations, "--write-baseline", write_baseline)
    previous = drift.load_previous(compare) if compare is not None else None
    chosen = policy.resolve(
        paths,
        config_file=config_file,
        baseline_file=baseline_file,
        rule_dirs=rule_dirs,
        policy_ref=policy_ref,
        compare_ref=compare_policy,
    )
    if write_baseline is not None:
        output.check_writable(write_baseline, "--write-baseline")
    render = RenderOptions(helm_values, _assignments(helm_set), helm_namespace)
    ruleset = _ruleset(chosen, enable, disable, cel_engine)
    report = _scan(
        paths,
        ruleset,
        progress,
        context=context,
        render=render,
        max_file_size=max_file_size,
        exclude=exclude,
    )
    report = replace(
        report,
        policy=chosen.record,
        notifications=[*chosen.notifications, *report.notifications],
    )
    report = pipeline.hide_below(report, reports.shown_from)  # before the baseline records
    known = chosen.recorded
    if write_baseline is not None:
        known = _write_baseline(report, write_baseline)
    if known is not None:
        report = pipeline.apply_baseline(report, known)
    changes = None
    if previous is not None and compare is not None:
        previous = drift.at_least(previous, reports.shown_from)  # out of view on both sides
        changes = _changes(report, previous, compare, {rule.id for rule in ruleset.rules})
    write_reports(report, destinations, reports.display(verbose), changes)
    return pipeline.exit_code(report, reports.fail_on)


def _ruleset(
    chosen: Policy, enable: tuple[str, ...], disable: tuple[str, ...], cel_engine: str
) -> Ruleset:
    """The rules of the run, from the policy ``chosen`` (its config, rule files) and
    ``--enable/--disable``; the policy's warnings are printed first."""
    from scanner import pipeline

    for warning in chosen.loaded.warnings:
        console.warn(warning)
    options = pipeline.ScanOptions(
        rule_dirs=chosen.rule_dirs,
        enable=split_ids(enable),
        disable=split_ids(disable),
        engine=cel_engine,
        config=chosen.loaded.config,
        rule_texts=chosen.rule_texts,
    )
    return pipeline.load_ruleset(options)


def _scan(paths: Sequence[str], ruleset: Ruleset, progress: bool, **options: Any) -> Report:
    """``pipeline.scan_paths`` with progress on stderr (``--progress``, or by itself on a
    terminal after ``PROGRESS_DELAY``), ended before the report is written."""
    from scanner import pipeline
    from scanner.console import stderr_progress

    shown = stderr_progress(progress, delay=PROGRESS_DELAY)
    try:
        return pipeline.scan_paths(paths, ruleset, progress=shown, **options)
    finally:
        if shown is not None:
            shown.close()  # the live line is erased, and none comes later


def _changes(
    report: Report, previous: Sequence[Mapping[str, Any]], path: str, ran: set[str]
) -> drift.Drift:
    """What changed since the ``previous`` JSON report at ``path``: a finding of it is
    resolved only where this scan read its file again with its rule
    (``drift.scan_locator``)."""
    from scanner.findings import drift

    scanned = report.scanned.paths if report.scanned is not None else ()
    return drift.compare(
        report,
        previous,
        path,
        drift.checker(ran, ()),
        drift.scan_locator(scanned, drift.unread_uris(report)),
        since="the previous scan",
        unchecked="this scan did not read their files again, or their rules were off",
    )


def _write_baseline(report: Report, path: Path) -> baseline.Recorded:
    """Record the fingerprints of ``report``'s findings in ``path``; what it recorded."""
    from functools import partial

    from scanner.findings import baseline
    from scanner.findings.records import INCOMPLETE_RULES
    from scanner.reporters import output

    record = baseline.document(report.findings, __version__, INCOMPLETE_RULES)
    output.write(output.Destination("json", str(path)), partial(baseline.write, record))
    console.note(f"wrote {len(record['fingerprints'])} fingerprints to {path}")
    return baseline.recorded(report.findings, INCOMPLETE_RULES)


def _assignments(values: Sequence[str]) -> list[str]:
    """``--helm-set`` values, each checked to be ``KEY=VAL`` before any work."""
    for value in values:
        if "=" not in value or value.startswith("="):
            raise UsageError(f"--helm-set {value!r}: expected KEY=VAL", hint="e.g. image.tag=1.2")
    return list(values)
