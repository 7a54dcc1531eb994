"""The nightly audit: read a cluster (or a snapshot of one), then run the same rules as ``scan``.

Stages, in order:

1. **Plan** (``plan``): the kinds the enabled rules read (``scanner.audit.reads``: one
   relation for the plan and for what stops a rule): the kinds each reports on
   (``match.kinds`` of an object rule, every kind when it names none; the kinds a
   derived subject is made from), its ``needs``, and the kinds of the model facts its
   expressions read (``workload.serviceAccount``: ServiceAccounts). Only kinds of
   ``scanner.kinds.resources``; Secrets never.
2. **Capture** (``capture_live``): discovery, then one paginated list per kind;
   ConfigMaps only in the operator namespaces that exist. A kind the server does
   not serve is complete with zero objects; a kind that is forbidden (403), keeps
   failing, or answers with something that is not a list is *unavailable*.
3. **Evaluate** (``evaluate``): the capture becomes an inventory of ``cluster://``
   objects and goes through ``pipeline.evaluate_inventory`` with the audit time as
   ``cluster.now``, until the run's deadline (``scanner.runtime.deadline``): rules that did
   not finish by then are named in an error notification (exit code 3). Every
   unavailable kind becomes an error notification naming the rules it stopped
   (exit code 3 when nothing else failed): a rule that joins the kind does not run
   at all, an object rule that only matches it does not run on those objects, so no
   finding ever rests on data the audit did not have, and drift never calls a
   finding resolved that the audit could not see again.

``poolgate snapshot`` stops after stage 2 and writes the capture; ``poolgate
audit --snapshot`` starts at stage 3 with a capture read from a file.
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Final

from scanner.audit import redaction
from scanner.audit.reads import ALL_KINDS, Reads, reads, reported_kinds
from scanner.console import ProgressPrinter
from scanner.evaluate.shipping import evaluation_helper
from scanner.findings.records import Level, Notification
from scanner.findings.report import Report, Scanned
from scanner.kinds.resources import Resource, by_kind
from scanner.model.cluster import ClusterScope
from scanner.pipeline import Ruleset, evaluate_inventory
from scanner.ruleset.load import PREVIEW_RULE, Rule
from scanner.runtime import teardown
from scanner.runtime.deadline import Deadline
from scanner.sources import snapshot
from scanner.sources.cluster import Cluster, Failure, ListError, Served, Settings, Target, connect
from scanner.sources.snapshot import (
    ANNOTATION_LISTED,
    Capture,
    KindKey,
    Unavailable,
    kind_label,
)

MODE = "audit"


def needed_kinds(rules: Iterable[Rule]) -> frozenset[str]:
    """Every kind the rules read (``reads``)."""
    return frozenset(kind for rule in rules for kind in reads(rule).kinds)


def plan(rules: Iterable[Rule]) -> list[Resource]:
    """The resources to list for ``rules``, in listing order (Namespaces first). A kind
    outside ``scanner.kinds.resources`` is never listed: ``coverage`` names it.

    ConfigMaps are listed only in the operator namespaces that exist, which the
    Namespace list says: without it every configured operator namespace is tried,
    and a namespace that does not exist answers 403 to a Role granted in another one
    (deploy/rbac.yaml grants ``gpu-operator``), so Namespaces come with them."""
    kinds = needed_kinds(rules)
    if any(resource.operator_namespaces_only for resource in by_kind(kinds)):
        kinds |= {"Namespace"}
    return by_kind(kinds)


# -- stage 2: capture ------------------------------------------------------------------


def capture_live(
    cluster: Cluster,
    resources: Sequence[Resource],
    operator_namespaces: Sequence[str],
    progress: ProgressPrinter | None = None,
    clock: Callable[[], datetime.datetime] = lambda: datetime.datetime.now(datetime.UTC),
) -> Capture:
    """List ``resources`` from a connected cluster."""
    capture = Capture(cluster.context, clock())
    listed: set[KindKey] = set()
    existing_namespaces: set[str] | None = None
    for resource, found in cluster.discover(resources).items():
        if isinstance(found, Failure):
            if found.status == "absent":
                listed.add(resource.key)  # not served: there are none
            else:
                capture.unavailable.append(_unavailable(resource, found.status, found.message))
                _report(progress, resource.label, found.status)
            continue
        served: Served = found
        label = f"{served.plural}.{resource.group}" if resource.group else served.plural

        def on_page(_: Served, namespace: str, count: int, label: str = label) -> None:
            if progress is not None:
                progress.page(f"{label} in {namespace}" if namespace else label, count)

        namespaces = [""]
        if resource.operator_namespaces_only:
            namespaces = [
                ns
                for ns in operator_namespaces
                if existing_namespaces is None or ns in existing_namespaces
            ]
        complete = True
        total = 0
        for namespace in namespaces:
            try:
                items = cluster.list_objects(served, namespace, on_page)
            except ListError as error:
                if error.failure.status == "absent":
                    continue  # removed since discovery (a CRD uninstalled): there are none
                complete = False
                capture.unavailable.append(
                    _unavailable(resource, error.failure.status, error.failure.message, namespace)
                )
                where = f"{label} in {namespace}" if namespace else label
                _report(progress, where, error.failure.status)
                continue
            total += len(items)
            capture.objects.extend(items)
            if resource.key == ("", "Namespace"):
                existing_namespaces = {
                    str(item.get("metadata", {}).get("name", "")) for item in items
                }
        if complete:
            listed.add(resource.key)
            scope = f" in {', '.join(namespaces) or 'no operator namespace'}"
            _report(progress, label, f"{total:,}" + (scope if namespaces != [""] else ""))
    capture.listed = frozenset(listed)
    return capture


def _unavailable(resource: Resource, status: str, message: str, namespace: str = "") -> Unavailable:
    return Unavailable(resource.group, resource.kind, status, message, namespace)


def _report(progress: ProgressPrinter | None, label: str, outcome: str) -> None:
    if progress is not None:
        progress.done(label, outcome)


# -- stage 3: evaluate -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Coverage:
    """What the audit could not see, and which rules that kept from running."""

    notifications: tuple[Notification, ...]
    blocked: frozenset[str]
    """Rules that did not run at all (a kind they join, ``Reads.joins``, is missing)."""
    unseen: frozenset[tuple[str, str]]
    """(rule id, kind) pairs the audit could not judge: drift must not call them resolved."""


def coverage(capture: Capture, rules: Sequence[Rule]) -> Coverage:
    """Notifications for what the capture lacks, and the rules that lack keeps from running.

    A rule that may read what a snapshot left out (``scanner.audit.redaction``) does not run.
    A kind a rule ``reads`` (``Reads``) is missing when it was forbidden or failed, when
    a snapshot taken with other rules enabled did not list it, or when poolgate cannot
    list it at all (a user rule's kind outside its resource table). A kind the
    snapshot's poolgate could not list yet (``Resource.since``) is a note, and the
    rules run without it as they did then, but for those that need it
    (``_older_kinds``). A snapshot that does
    not say what it covers (a ``kubectl`` dump) is taken as it is: the rules run on the
    kinds it holds, a rule whose ``needs`` it lacks does not run, and earlier findings of
    a rule that reads a kind it lacks are unverified, never resolved.
    """
    # The document rules read no kind; the admission preview (built in too) reads some.
    active = [rule for rule in rules if not rule.builtin or rule.id == PREVIEW_RULE]
    relation = {rule.id: reads(rule) for rule in active}
    found = (
        _dump_coverage(capture, active, relation)
        if capture.listed is None
        else _listed_coverage(capture, capture.listed, rules, active, relation)
    )
    omitted = _omitted(capture, active)
    if not omitted:
        return found
    return Coverage(
        (*found.notifications, *omitted.notifications),
        found.blocked | omitted.blocked,
        found.unseen,
    )


def _omitted(capture: Capture, active: Sequence[Rule]) -> Coverage | None:
    """The rules that may read what the snapshot left out (``scanner.audit.redaction``) do not
    run: an error notification for each thing left out names them."""
    notes = []
    blocked: set[str] = set()
    for what, ids in redaction.readers(active, capture.omitted).items():
        blocked.update(ids)
        read = {kind for rule in active if rule.id in ids for kind in reads(rule).kinds}
        names = sorted(capture.omitted[what] & read)
        kinds = ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")
        notes.append(
            Notification(
                Level.ERROR,
                f"the snapshot left out {redaction.WHAT.get(what, what)} of {kinds} (the "
                f"rules it was taken with do not read them); rules that may read them did "
                f"not run: {', '.join(ids)}; take a new snapshot with these rules enabled",
            )
        )
    return Coverage(tuple(notes), frozenset(blocked), frozenset()) if notes else None


def _listed_coverage(
    capture: Capture,
    listed: frozenset[KindKey],
    rules: Sequence[Rule],
    active: Sequence[Rule],
    relation: Mapping[str, Reads],
) -> Coverage:
    """``coverage`` of a snapshot (or live capture) that records what it listed."""
    notes: list[Notification] = []
    blocked: set[str] = set()
    unseen: set[tuple[str, str]] = set()
    missing: dict[KindKey, list[Unavailable]] = {}
    for item in capture.unavailable:
        missing.setdefault(item.key, []).append(item)
    older: list[KindKey] = []
    for resource in plan(rules):
        if resource.key not in listed and resource.key not in missing:
            if resource.since > capture.revision:
                older.append(resource.key)
                continue
            message = "not in the snapshot (it was taken with other rules enabled)"
            missing[resource.key] = [
                Unavailable(resource.group, resource.kind, "not captured", message)
            ]
    if older:
        notes.append(_older_kinds(older, active, relation, blocked, unseen))
    for kind in sorted({kind for r in relation.values() for kind in r.kinds} - ALL_KINDS):
        missing[("", kind)] = [Unavailable("", kind, "not listable", _UNLISTABLE)]
    for key, items in missing.items():
        _, kind = key
        stopped = sorted(r.id for r in active if kind in relation[r.id].joins)
        partial = sorted(
            r.id for r in active if r.id not in stopped and kind in relation[r.id].subjects
        )
        blocked.update(stopped)
        unseen.update((rule_id, kind) for rule_id in partial)
        # A kind no enabled rule reads (a snapshot taken with more rules) changes nothing.
        level = Level.ERROR if stopped or partial else Level.NOTE
        notes.append(Notification(level, _unavailable_message(key, items, stopped, partial)))
    return Coverage(tuple(notes), frozenset(blocked), frozenset(unseen))


def _unverified(rule: Rule, read: Reads, lacking: Collection[str]) -> set[tuple[str, str]]:
    """(rule, kind) pairs whose earlier findings ``--compare`` may not call resolved when
    the run lacks ``lacking`` of the kinds ``rule`` reads: every kind it reports when one
    is a join (its verdicts rest on it), else the lacking kinds it reports on."""
    if not lacking:
        return set()
    kinds = reported_kinds(rule) if read.joins.intersection(lacking) else lacking
    return {(rule.id, kind) for kind in kinds}


def _older_kinds(
    kinds: Sequence[KindKey],
    active: Sequence[Rule],
    relation: Mapping[str, Reads],
    blocked: set[str],
    unseen: set[tuple[str, str]],
) -> Notification:
    """Kinds the snapshot lacks because the poolgate that wrote it could not list them
    yet (``Resource.since``). The model judges without them, as that poolgate did (for
    Kueue's: a queued workload is not judged); a rule that ``needs`` one does not run;
    and ``--compare`` calls no earlier finding of a rule that reads one resolved: its
    findings on that kind, or on every kind it reports when the kind is a join."""
    names = {kind for _, kind in kinds}
    stopped = sorted(r.id for r in active if names & r.needs)
    blocked.update(stopped)
    for rule in active:
        if rule.id not in stopped:
            unseen |= _unverified(rule, relation[rule.id], names & relation[rule.id].kinds)
    text = (
        "the snapshot was written by an earlier poolgate, which did not list "
        f"{', '.join(kind_label(key) for key in kinds)}: the rules judge it without them, "
        "as that poolgate did, and --compare calls no earlier finding of the rules that "
        "read them resolved"
    )
    if stopped:
        text += f"; rules that need them did not run: {', '.join(stopped)}"
    text += "; take a new snapshot to include them"
    return Notification(Level.ERROR if stopped else Level.NOTE, text)


_UNLISTABLE = (
    "poolgate does not list this kind in an audit (it is not in scanner/kinds/resources.py); "
    "check it with `poolgate scan`, audit a `kubectl get -o json` dump that holds it, "
    "or give the rule `modes: [scan]`"
)


def _dump_coverage(
    capture: Capture, active: Sequence[Rule], relation: Mapping[str, Reads]
) -> Coverage:
    """``coverage`` of a snapshot that does not record what it listed (``listed`` None)."""
    present = {kind for _, kind in snapshot.kinds_present(capture.objects)}
    present -= {item.kind for item in capture.unavailable}
    notes: list[Notification] = []
    needing = sorted(r.id for r in active if r.needs and not r.needs <= present)
    if needing:
        notes.append(
            Notification(
                Level.NOTE,
                "the snapshot does not say which kinds it covers; rules that need kinds "
                f"it does not hold did not run: {', '.join(needing)}",
            )
        )
    unseen: set[tuple[str, str]] = set()
    absent: set[str] = set()
    for rule in active:
        lacking = relation[rule.id].kinds - present
        if not lacking or rule.id in needing:
            continue
        absent |= lacking
        unseen |= _unverified(rule, relation[rule.id], lacking)
    if absent:
        names = sorted(absent)
        shown = ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")
        notes.append(
            Notification(
                Level.NOTE,
                f"the snapshot does not say which kinds it covers (no {ANNOTATION_LISTED} "
                f"annotation) and holds no {shown}: taken as unknown, not as none, so "
                "--compare calls earlier findings of the rules that read them unverified",
            )
        )
    return Coverage(tuple(notes), frozenset(needing), frozenset(unseen))


def _unavailable_message(
    key: KindKey, items: Sequence[Unavailable], stopped: Sequence[str], partial: Sequence[str]
) -> str:
    first = items[0]
    where = ", ".join(f"namespace {item.namespace}" for item in items if item.namespace)
    what = f"{kind_label(key)}{f' ({where})' if where else ''}"
    text = f"cannot list {what}: {first.status}: {first.message}"
    if stopped:
        text += f"; rules that did not run: {', '.join(stopped)}"
    if partial:
        text += f"; rules that did not run on {key[1]} objects: {', '.join(partial)}"
    if not stopped and not partial:
        text += "; no enabled rule reads it"
    return text


def evaluate(
    capture: Capture,
    ruleset: Ruleset,
    *,
    now: datetime.datetime | None = None,
    deadline: Deadline | None = None,
) -> tuple[Report, Coverage]:
    """Run ``ruleset`` over a capture; durations are judged as of ``now`` (default:
    when the capture was taken). Inside ``helper_process``, its helper may take part
    of the evaluation. ``deadline``: the run's (``--deadline``); rules that did not
    finish by then are named in an error notification and in
    ``report.stats.unfinished``."""
    inventory = snapshot.to_inventory(capture)
    covered = coverage(capture, ruleset.rules)
    runnable = replace(ruleset, rules=[r for r in ruleset.rules if r.id not in covered.blocked])
    report = evaluate_inventory(
        inventory,
        runnable,
        Path.cwd(),
        now=now or capture.captured_at,
        scope=ClusterScope(capture.context, capture.listed),
        deadline=deadline,
    )
    return (
        replace(
            report,
            notifications=[*report.notifications, *covered.notifications],
            rules=[rule.doc for rule in ruleset.rules],  # rules that could not run included
            scanned=Scanned(cluster=capture.context, read_at=capture.captured_at),
        ),
        covered,
    )


def read_and_evaluate(
    ruleset: Ruleset,
    read: Callable[[], Capture],
    *,
    snapshot_file: str | None,
    now: datetime.datetime | None,
    deadline: Deadline,
) -> tuple[Report, Coverage]:
    """``read`` the capture (of a live cluster, or of ``snapshot_file``) and ``evaluate``
    it. The capture and the report are held to the end of the process
    (``scanner.runtime.teardown``): a cluster's objects, freed only at exit."""
    with helper_process(ruleset, snapshot_file):
        capture = read()
        report, covered = evaluate(capture, ruleset, now=now, deadline=deadline)
        teardown.keep(capture, report)
    return report, covered


@contextmanager
def helper_process(ruleset: Ruleset, snapshot_file: str | None) -> Iterator[None]:
    """Around reading and evaluating an audit that may grow past the fork's memory
    guard (``_large``): a helper process forked now, while this process is small, that
    takes part of the evaluation (``scanner.evaluate.shipping``). A large cluster's
    objects would make a later fork's copied pages cost memory."""
    if not _large(snapshot_file):
        yield
        return
    with evaluation_helper(ruleset.rules, ruleset.engine):
        yield


HELPER_FROM_BYTES: Final = 64 * 1024 * 1024
"""Snapshot files from which an audit starts a helper process: decoded and modelled,
64 MiB of JSON take ~400 MiB, and the helper pays once poolgate holds 1 GiB (about
150 MiB of JSON). A live audit always starts one: its size is known only once read."""


def _large(snapshot_file: str | None) -> bool:
    """Whether an audit may grow past ``executors.FORK_BELOW``: a live one, or a
    snapshot of ``HELPER_FROM_BYTES`` or more."""
    if snapshot_file is None:
        return True
    try:
        return os.path.getsize(snapshot_file) >= HELPER_FROM_BYTES
    except OSError:
        return False  # snapshot.read reports it


# -- the commands' shared steps ------------------------------------------------------


def read_cluster(
    target: Target,
    settings: Settings,
    rules: Sequence[Rule],
    operator_namespaces: Sequence[str],
    progress: ProgressPrinter | None,
) -> Capture:
    """Connect, list what ``rules`` need, disconnect."""
    cluster = connect(target, settings)
    try:
        return capture_live(cluster, plan(rules), operator_namespaces, progress)
    finally:
        cluster.close()
