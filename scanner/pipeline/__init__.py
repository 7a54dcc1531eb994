"""One scan, end to end: sources -> inventory -> model -> engine -> findings -> report.

This package and ``scanner.cli`` are the only ones that know every stage; ``cli``
owns the command line and exit codes, this package owns the order of the stages
so that ``poolgate scan`` and ``poolgate rules test`` (``fixtures``, beside it)
run exactly the same path.
"""

from __future__ import annotations

import datetime
import os
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from scanner import __version__
from scanner.cel import Engine, get_engine
from scanner.config import file as configfile
from scanner.config.gitref import relative
from scanner.config.values import Config
from scanner.console import ProgressPrinter
from scanner.errors import UsageError
from scanner.evaluate import preview
from scanner.evaluate.fast import evaluate
from scanner.evaluate.stamp import document_findings
from scanner.findings import baseline, fleet, suppress
from scanner.findings.records import (
    INCOMPLETE_RULES,
    Finding,
    Level,
    Notification,
    Outcome,
    sort_findings,
)
from scanner.findings.report import Report, RunStats, Scanned, report_time
from scanner.inventory import InvalidDocument, Inventory, KubeObject
from scanner.model import Model, build_model, duplicates
from scanner.model.cluster import ClusterScope
from scanner.model.pools import MAX_REACH
from scanner.ruleset.load import (
    DOCUMENT_RULES,
    Rule,
    RuleText,
    bundled_rules_dir,
    load_rules,
    select,
)
from scanner.ruleset.names import RuleNames
from scanner.runtime.deadline import Deadline
from scanner.sources.files import (
    DEFAULT_MAX_FILE_SIZE,
    NOTHING_EXCLUDED,
    Excluded,
    find_repo_root,
    load_paths,
)
from scanner.sources.rendered import RenderOptions, render_directories
from scanner.sources.yaml.document import collector_paused, parse_plain

if TYPE_CHECKING:
    from scanner.config.excludes import PathGlob


@dataclass(frozen=True, slots=True)
class ScanOptions:
    rule_dirs: Sequence[Path] = ()
    enable: Sequence[str] = ()
    disable: Sequence[str] = ()
    engine: str = "auto"
    config: Config = field(default_factory=Config)
    include_bundled: bool = True
    enable_all: bool = False
    """Run every rule, including those off by default (fixture tests)."""
    mode: str = "scan"
    """``scan`` or ``audit``: rules whose ``modes`` leave this one out do not run
    (``enable_all`` runs them anyway: fixture tests cover audit-only rules too)."""
    rule_texts: Sequence[RuleText] = ()
    """Rule files already read, from a git commit (``--policy-ref``, ``scanner.policy``)."""


@dataclass(frozen=True, slots=True)
class Ruleset:
    """Rules loaded and compiled once, with the engine that compiled them."""

    engine: Engine
    rules: Sequence[Rule]
    config: Config
    known: frozenset[str] = frozenset()
    """Ids of every loaded rule, selected or not (suppressions may name any of them)."""
    names: RuleNames | None = None
    """Ids and names of every loaded rule (``known`` with names), for suppressions."""


def load_ruleset(options: ScanOptions) -> Ruleset:
    """Load and compile the rules a run uses; unknown ``--enable/--disable`` rules (ids
    or names, ``scanner.ruleset.names``) and config rule keys fail here."""
    engine = get_engine(options.engine)
    directories = [bundled_rules_dir()] if options.include_bundled else []
    directories.extend(Path(directory) for directory in options.config.rule_dirs)
    directories.extend(options.rule_dirs)
    rules = load_rules(directories, engine, options.config, options.rule_texts)
    names = RuleNames.of(rule.doc for rule in rules)
    enable = names.require(options.enable, "--enable")
    disable = names.require(options.disable, "--disable")
    config = names.configured(options.config)
    configfile.check_rule_overrides(
        config, {rule.id: rule.defaults for rule in rules}, names.suggestion
    )
    selected = rules if options.enable_all else select(rules, enable, disable)
    if not options.enable_all:
        other_mode = {rule.id for rule in rules if options.mode not in rule.modes}
        elsewhere = sorted(set(enable) & other_mode)
        if elsewhere:
            raise UsageError(
                f"{', '.join(elsewhere)} cannot run in {options.mode}",
                hint="see the rule's modes in `poolgate rules show`",
            )
        selected = [rule for rule in selected if options.mode in rule.modes]
    return Ruleset(engine, selected, config, frozenset(names.ids), names)


def scan_paths(
    paths: Sequence[str],
    ruleset: Ruleset,
    *,
    repo_root: Path | None = None,
    stdin: TextIO | None = None,
    context: Sequence[str] = (),
    render: RenderOptions | None = None,
    now: datetime.datetime | None = None,
    max_file_size: int = DEFAULT_MAX_FILE_SIZE,
    exclude: Sequence[str] = (),
    progress: ProgressPrinter | None = None,
) -> Report:
    """Scan manifest paths (``-`` is stdin) with ``ruleset``.

    ``context`` paths add objects the model joins with but no rule reports on.
    Helm charts and Kustomizations found under ``paths`` are rendered (``render``).
    ``exclude`` patterns (``--exclude``) leave out paths besides the config's.
    ``progress`` is told each stage as it starts and ends (``scan --progress``).
    """
    root = repo_root or find_repo_root(Path.cwd())
    check_context_paths(context)
    render_roots: list[Path] = []
    excluded = not_manifests(ruleset.config, exclude, root)
    _began(progress, "reading files")
    inventory = load_paths(
        paths,
        root,
        stdin=stdin or sys.stdin,
        render_roots=render_roots,
        max_file_size=max_file_size,
        excluded=excluded,
    )
    _ended(progress, "read", f"{inventory.files:,} files, {len(inventory.objects):,} objects")
    if render_roots:
        options = render or RenderOptions()
        _began(progress, f"rendering {len(render_roots):,} charts and kustomizations")
        rendered = render_directories(
            render_roots, root, options, max_file_size=max_file_size, excluded=excluded
        )
        inventory.extend(rendered)
        _ended(progress, "rendered", f"{len(rendered.objects):,} objects")
    notes: list[Notification] = []
    if context:
        _began(progress, "reading --context-path")
        objects, notes = load_context(context, root, inventory, excluded)
        inventory.objects.extend(objects)
        _ended(progress, "context", f"{len(objects):,} objects")
    _began(progress, f"evaluating {len(ruleset.rules):,} rules")
    report = evaluate_inventory(inventory, ruleset, root, notes, now=now)
    found = f"{report.stats.subjects:,} subjects, {len(report.findings):,} findings"
    _ended(progress, "evaluated", found)
    scanned = Scanned(
        paths=tuple(shown_path(path, root) for path in paths),
        context_paths=tuple(shown_path(path, root) for path in context),
    )
    return replace(report, scanned=scanned)


def _began(progress: ProgressPrinter | None, label: str) -> None:
    if progress is not None:
        progress.step(label)


def _ended(progress: ProgressPrinter | None, label: str, outcome: str) -> None:
    if progress is not None:
        progress.done(label, outcome)


def shown_path(path: str, root: Path) -> str:
    """A scanned path as reports name it: repository-relative inside the repository
    (``.`` for its root), as given outside it and for ``-`` (standard input)."""
    if path == "-":
        return path
    inside = relative(path, root)
    if inside is None:
        return path
    return inside or "."


def not_manifests(
    config: Config, exclude: Sequence[str] = (), root: Path | None = None
) -> Excluded:
    """What a scan never reads as an object: configuration files, by their usual name
    wherever they are, and the one in use (``--config``) whatever its name; and the
    paths the config's ``exclude`` and ``exclude`` (``--exclude``) match under ``root``.
    The config's patterns were checked when it loaded; a bad ``--exclude`` is a usage
    error."""
    patterns: Sequence[PathGlob] = ()
    if config.exclude or exclude:
        from scanner.config import excludes  # only a run with patterns needs them

        try:
            patterns = excludes.compile_all([*config.exclude, *exclude])
        except excludes.PatternError as error:
            raise UsageError(f"--exclude {error}", hint="see docs/usage.md, --exclude") from None
    return Excluded.of(
        [configfile.CONFIG_FILE_NAME], [config.source] if config.source else [], patterns, root
    )


def check_context_paths(paths: Sequence[str]) -> None:
    """Fail before reading anything when a ``--context-path`` path is unusable."""
    for path in paths:
        if path == "-":
            raise UsageError("--context-path cannot read standard input", hint="name a file")
        if not os.path.exists(path):
            raise UsageError(
                f"--context-path {path}: no such file or directory", hint="check the path"
            )


def load_context(
    paths: Sequence[str],
    repo_root: Path,
    scanned: Inventory,
    excluded: Excluded = NOTHING_EXCLUDED,
) -> tuple[list[KubeObject], list[Notification]]:
    """Objects from ``--context-path`` paths (marked ``context_only``) and notes about them.

    Files that are also scanned are left out (their objects are reported on). A
    context document that does not parse makes the run incomplete; other invalid
    context documents are warnings. Neither is a finding: nothing in context is.
    """
    context = load_paths(paths, repo_root, excluded=excluded)
    taken = {obj.origin.uri for obj in scanned.objects}
    taken.update(document.origin.uri for document in scanned.invalid)
    objects = [
        replace(obj, context_only=True) for obj in context.objects if obj.origin.uri not in taken
    ]
    notes = [
        Notification(
            Level.ERROR if document.rule_id in INCOMPLETE_RULES else Level.WARNING,
            f"context: {document.message}",
            uri=document.origin.uri,
            line=document.line,
            column=document.column,
        )
        for document in context.invalid
        if document.origin.uri not in taken
    ]
    notes += [
        Notification(Level.ERROR, f"context: {error.message}", uri=error.uri)
        for error in context.read_errors
    ]
    return objects, notes


def evaluate_inventory(
    inventory: Inventory,
    ruleset: Ruleset,
    repo_root: Path,
    context_notes: Sequence[Notification] = (),
    *,
    now: datetime.datetime | None = None,
    scope: ClusterScope | None = None,
    deadline: Deadline | None = None,
) -> Report:
    """Model, rules, suppressions over ``inventory``. ``now`` is the time rules judge
    durations against (CEL ``cluster.now``, RFC 3339): the audit passes the time the
    cluster was read, fixture tests a fixed time; default the current time. ``scope``
    is the cluster an audit read (its context and the kinds listed to the end);
    default: a scan of manifests. ``deadline`` (an audit's): no subject is evaluated
    once it has passed, and an error notification names the rules that did not finish
    (``RunStats.unfinished``)."""
    # The model's facts and the findings live to the end of the run, like the
    # inventory: collecting cycles among them only rescans them.
    # Not frozen afterwards: `rules test` and library callers evaluate many times.
    with collector_paused(freeze=False):
        model = build_model(inventory, ruleset.config, scope, read_yaml=parse_plain)
        return _evaluate_model(inventory, model, ruleset, repo_root, context_notes, now, deadline)


def _evaluate_model(
    inventory: Inventory,
    model: Model,
    ruleset: Ruleset,
    repo_root: Path,
    context_notes: Sequence[Notification],
    now: datetime.datetime | None,
    deadline: Deadline | None = None,
) -> Report:
    by_id = {rule.id: rule for rule in ruleset.rules}
    document_rules = {key: by_id[key] for key in DOCUMENT_RULES if key in by_id}
    context_uris = {obj.origin.uri for obj in inventory.objects if obj.context_only}
    model_invalid = [doc for doc in model.invalid if doc.origin.uri not in context_uris]
    invalid = [*inventory.invalid, *model_invalid]
    if duplicates.RULE in document_rules:
        invalid.extend(duplicates.duplicate_objects(inventory.reportable()))
    findings: list[Finding] = list(document_findings(invalid, document_rules))
    evaluation = evaluate(
        ruleset.rules,
        model.subjects(),
        ruleset.engine,
        run_variables(ruleset, model, now),
        # Context objects are never reported on, so a ``ref`` may not point there.
        RefLookup(inventory),
        deadline=deadline,
    )
    findings.extend(evaluation.findings)
    previewed = _preview(inventory, ruleset, by_id, deadline)
    findings.extend(previewed.findings)
    ruleset.engine.save_cache()  # programs the evaluation compiled (bound rules, guards)
    notifications = [
        Notification(Level.ERROR, error.message, uri=error.uri, line=error.line)
        for error in inventory.read_errors
    ]
    notifications += [
        Notification(Level.WARNING, note.message, note.uri, note.line, note.column)
        for note in (*inventory.warnings, *model.unchecked)
    ]
    notifications.extend(context_notes)
    notifications.extend(previewed.notifications)
    if model.unfollowed:
        notifications.append(_unfollowed(model.unfollowed))
    if evaluation.unfinished and deadline is not None:
        notifications.append(_unfinished(evaluation.unfinished, deadline))
    invalid_rule = by_id.get(suppress.INVALID_RULE)
    applied = suppress.apply(
        findings,
        inventory.reportable(),
        ruleset.config,
        known_rules=ruleset.names or RuleNames.of_ids(ruleset.known or by_id),
        invalid_level=invalid_rule.doc.level if invalid_rule is not None else None,
        repo_root=repo_root,
    )
    notifications.extend(applied.notifications)
    notifications.extend(_unread_without_finding(invalid, applied.findings))
    return Report(
        findings=sort_findings(applied.findings),
        notifications=notifications,
        rules=[rule.doc for rule in ruleset.rules],
        tool_version=__version__,
        repo_root=str(repo_root),
        stats=RunStats(
            files=inventory.files,
            objects=sum(1 for _ in inventory.reportable()),
            skipped_documents=inventory.skipped,
            subjects=evaluation.subjects,
            unfinished=evaluation.unfinished,
            excluded=inventory.excluded,
        ),
        fleet=fleet.summarize(model.pools, model.namespaces),
        generated_at=report_time(os.environ),
    )


def _preview(
    inventory: Inventory, ruleset: Ruleset, by_id: Mapping[str, Rule], deadline: Deadline | None
) -> preview.Preview:
    """The admission preview (PG606) when its rule is enabled and the config keeps it on."""
    rule = by_id.get(preview.RULE)
    if rule is None or not ruleset.config.admission_preview:
        return preview.Preview()
    namespaces = {obj.name: obj.body for obj in inventory.objects if obj.kind == "Namespace"}
    return preview.run(rule, inventory.objects, ruleset.engine.name, namespaces, deadline)


def run_variables(ruleset: Ruleset, model: Model, now: datetime.datetime | None) -> dict[str, Any]:
    """The variables every subject of a run shares: ``config``, and ``cluster`` with
    the time rules judge durations against (``now``, default the current time)."""
    return {
        "config": ruleset.config.cel_view(),
        "cluster": {**model.cluster, "now": _rfc3339(now)},
    }


def _unfollowed(workloads: Sequence[str]) -> Notification:
    shown = ", ".join(workloads[:3]) + (
        f" and {len(workloads) - 3} more" if len(workloads) > 3 else ""
    )
    return Notification(
        Level.ERROR,
        f"the node selection of {len(workloads)} GPU workload(s) ({shown}) may reach more "
        f"than {MAX_REACH} GPU pools, more than poolgate follows: the rules about their "
        "pools did not judge them; select a label fewer pools carry (sku, pool)",
    )


def _unfinished(rule_ids: Iterable[str], deadline: Deadline) -> Notification:
    return Notification(
        Level.ERROR,
        f"the deadline ({deadline.seconds:g} s, --deadline) passed before these rules "
        f"finished: {', '.join(sorted(rule_ids))}; their findings are those of the "
        "subjects evaluated by then",
    )


def _unread_without_finding(
    invalid: Iterable[InvalidDocument], findings: Iterable[Finding]
) -> Iterator[Notification]:
    """An error notification for each document that was not read (PG001) and has no
    active PG001 finding, the rule being disabled or the finding suppressed: hiding the
    finding is the user's choice, calling the unread file clean is not (exit 3)."""
    reported = {
        (finding.location.uri, finding.location.line, finding.location.column)
        for finding in findings
        if finding.rule_id in INCOMPLETE_RULES and finding.suppression is None
    }
    for document in invalid:
        where = (document.origin.uri, document.line, document.column)
        if document.rule_id in INCOMPLETE_RULES and where not in reported:
            yield Notification(
                Level.ERROR,
                f"{document.message} (not read; its {document.rule_id} finding is disabled "
                "or suppressed, so the run is incomplete)",
                *where,
            )


class RefLookup(Mapping[str, KubeObject]):
    """``namespace/Kind/name`` -> reportable object, built on first use: only a
    violation with a ``ref`` reads it, and building it names every object."""

    def __init__(self, inventory: Inventory) -> None:
        self._inventory = inventory
        self._built: dict[str, KubeObject] | None = None

    def _table(self) -> dict[str, KubeObject]:
        if self._built is None:
            self._built = {obj.ref.logical_name: obj for obj in self._inventory.reportable()}
        return self._built

    def __getitem__(self, key: str) -> KubeObject:
        return self._table()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._table())

    def __len__(self) -> int:
        return len(self._table())


def _rfc3339(moment: datetime.datetime | None) -> str:
    moment = moment or datetime.datetime.now(datetime.UTC)
    return moment.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def apply_baseline(report: Report, known: baseline.Recorded) -> Report:
    """``report`` without the findings a baseline already holds (after suppressions).

    The count of dropped findings goes to ``stats.baselined`` so every summary says it.
    """
    kept, dropped = baseline.split(report.findings, known, INCOMPLETE_RULES)
    return replace(report, findings=kept, stats=replace(report.stats, baselined=dropped))


def hide_below(report: Report, level: Level) -> Report:
    """``report`` without the violations below ``level`` (``--min-level``), counted in
    ``stats.hidden``. Rule errors and unread documents (PG001) stay whatever their
    level: they say the run is incomplete, and hiding them would turn exit 3 into 0."""
    if level is Level.NOTE:
        return report
    kept = [
        finding
        for finding in report.findings
        if finding.level >= level
        or finding.outcome is Outcome.ERROR
        or finding.rule_id in INCOMPLETE_RULES
    ]
    hidden = len(report.findings) - len(kept)
    return replace(report, findings=kept, stats=replace(report.stats, hidden=hidden))


def exit_code(report: Report, fail_on: str) -> int:
    """0 clean, 1 findings at or above ``fail_on``, 3 incomplete when nothing else failed.

    Incomplete: unreadable inputs, documents that do not parse (PG001), rule
    evaluation errors. Suppressed findings never fail a run.
    """
    active = [finding for finding in report.findings if finding.suppression is None]
    if fail_on != "never":
        threshold = Level.parse(fail_on)
        if any(
            finding.outcome is Outcome.FAIL
            and finding.rule_id not in INCOMPLETE_RULES
            and finding.level >= threshold
            for finding in active
        ):
            return 1
    incomplete = any(
        finding.outcome is Outcome.ERROR or finding.rule_id in INCOMPLETE_RULES
        for finding in active
    ) or any(note.level is Level.ERROR for note in report.notifications)
    return 3 if incomplete else 0
