"""The nightly audit: read a cluster (or a snapshot of one), then run the same rules as ``scan``.

Stages, in order:

1. **Plan** (``plan``): the kinds the enabled rules need. An ``object`` rule needs
   its ``match.kinds`` (every kind when it names none); any rule over a derived
   subject (workload, node, pool, namespace, ...) needs the whole model, so every
   kind in ``scanner.sources.resources`` is listed. Secrets never are.
2. **Capture** (``capture_live``): discovery, then one paginated list per kind;
   ConfigMaps only in the operator namespaces that exist. A kind the server does
   not serve is complete with zero objects; a kind that is forbidden (403) or keeps
   failing is *unavailable*.
3. **Evaluate** (``evaluate``): the capture becomes an inventory of ``cluster://``
   objects and goes through ``pipeline.evaluate_inventory`` with the audit time as
   ``cluster.now``. Every unavailable kind becomes an error notification naming
   the rules that could not run on it (exit code 3 when nothing else failed);
   rules that ``need`` an unavailable kind for their joins do not run at all,
   so no finding ever rests on data the audit did not have.

``poolgate snapshot`` stops after stage 2 and writes the capture; ``poolgate
audit --snapshot`` starts at stage 3 with a capture read from a file.
"""

from __future__ import annotations

import datetime
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TextIO

from scanner.findings import Level, Notification
from scanner.kinds import WORKLOAD_KINDS
from scanner.model.cluster import KIND as CLUSTER_KIND
from scanner.model.cluster import ClusterScope
from scanner.pipeline import Ruleset, evaluate_inventory
from scanner.reporters import Report
from scanner.rules import Rule
from scanner.sources import snapshot
from scanner.sources.cluster import Cluster, Failure, ListError, Served, Settings, Target, connect
from scanner.sources.resources import RESOURCES, Resource, by_kind
from scanner.sources.snapshot import Capture, KindKey, Unavailable, kind_label

MODE = "audit"

_POOL_KINDS = ("Node", "NodePool", "ContainerNodePool", "MachineDeployment")
_SUBJECT_KINDS: dict[str, tuple[str, ...]] = {
    "node": _POOL_KINDS,
    "pool": _POOL_KINDS,
    "namespace": ("Namespace",),
    "sharingConfig": ("ConfigMap",),
    "cluster": tuple(sorted(WORKLOAD_KINDS)),
}
"""Kinds each derived subject is made from (for ``workload``: ``scanner.kinds``). The
``cluster`` subject counts the run's GPU workloads, so a workload kind that cannot be
read leaves a cluster rule partial (and its finding unverified, never resolved, in
drift); a cluster rule names the other kinds its facts come from in ``needs``, so it
does not run at all when one of them cannot be read."""

ALL_KINDS: frozenset[str] = frozenset(resource.kind for resource in RESOURCES)


def subject_kinds(rule: Rule) -> frozenset[str]:
    """The kinds a rule reports on: a 403 on one of them means it did not run there."""
    subject = rule.doc.subject
    if subject == "document":
        return frozenset()
    if subject == "object":
        return rule.kinds or ALL_KINDS
    if subject == "workload":
        return (rule.kinds & WORKLOAD_KINDS) if rule.kinds else WORKLOAD_KINDS
    return frozenset(_SUBJECT_KINDS.get(subject, ALL_KINDS))


def needed_kinds(rules: Iterable[Rule]) -> frozenset[str]:
    """Every kind the rules read: their subjects, their ``needs``, and the model's joins."""
    kinds: set[str] = set()
    for rule in rules:
        if rule.builtin:
            continue
        kinds |= subject_kinds(rule) | rule.needs
        if rule.doc.subject != "object":
            kinds |= ALL_KINDS  # derived facts join across every kind the model knows
    return frozenset(kinds)


def plan(rules: Iterable[Rule]) -> list[Resource]:
    """The resources to list for ``rules``, in listing order (Namespaces first)."""
    return by_kind(needed_kinds(rules))


# -- stage 2: capture ------------------------------------------------------------------


class ProgressPrinter:
    """Per-kind progress on stderr: a live counter on a terminal, one line per kind otherwise."""

    def __init__(self, stream: TextIO, live: bool) -> None:
        self._stream = stream
        self._live = live

    def page(self, label: str, count: int) -> None:
        if self._live:
            self._stream.write(f"\r\x1b[K  listing {label} ... {count:,}")
            self._stream.flush()

    def done(self, label: str, outcome: str) -> None:
        prefix = "\r\x1b[K" if self._live else ""
        self._stream.write(f"{prefix}  {label}: {outcome}\n")
        self._stream.flush()


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
    """Rules that did not run at all (a kind they ``need`` is unavailable)."""
    unseen: frozenset[tuple[str, str]]
    """(rule id, kind) pairs the audit could not judge: drift must not call them resolved."""


def coverage(capture: Capture, rules: Sequence[Rule]) -> Coverage:
    """Notifications for unavailable kinds, and the rules they stop."""
    notes: list[Notification] = []
    blocked: set[str] = set()
    unseen: set[tuple[str, str]] = set()
    missing: dict[KindKey, list[Unavailable]] = {}
    cluster_rules = {rule.id for rule in rules if rule.doc.subject == "cluster"}
    for item in capture.unavailable:
        missing.setdefault(item.key, []).append(item)
    if capture.listed is not None:
        for resource in plan(rules):
            if resource.key not in capture.listed and resource.key not in missing:
                message = "not in the snapshot (it was taken with other rules enabled)"
                missing[resource.key] = [
                    Unavailable(resource.group, resource.kind, "not captured", message)
                ]
    for key, items in missing.items():
        _, kind = key
        stopped = sorted(r.id for r in rules if not r.builtin and kind in r.needs)
        partial = sorted(
            r.id
            for r in rules
            if not r.builtin and r.id not in stopped and kind in subject_kinds(r)
        )
        blocked.update(stopped)
        unseen.update((rule_id, kind) for rule_id in [*stopped, *partial])
        # A cluster rule's finding is on the cluster, whatever kind hid part of it.
        unseen.update(
            (rule_id, CLUSTER_KIND) for rule_id in [*stopped, *partial] if rule_id in cluster_rules
        )
        notes.append(Notification(Level.ERROR, _unavailable_message(key, items, stopped, partial)))
    if capture.listed is None:
        present = snapshot.kinds_present(capture.objects)
        kinds_there = {kind for _, kind in present}
        needing = sorted(
            r.id for r in rules if not r.builtin and r.needs and not r.needs <= kinds_there
        )
        if needing:
            blocked.update(needing)
            notes.append(
                Notification(
                    Level.NOTE,
                    "the snapshot does not say which kinds it covers; rules that need kinds "
                    f"it does not hold did not run: {', '.join(needing)}",
                )
            )
    return Coverage(tuple(notes), frozenset(blocked), frozenset(unseen))


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
        text += "; no enabled rule reports on it, but facts derived from it are missing"
    return text


def evaluate(
    capture: Capture, ruleset: Ruleset, *, now: datetime.datetime | None = None
) -> tuple[Report, Coverage]:
    """Run ``ruleset`` over a capture; durations are judged as of ``now`` (default:
    when the capture was taken)."""
    inventory = snapshot.to_inventory(capture)
    covered = coverage(capture, ruleset.rules)
    runnable = replace(ruleset, rules=[r for r in ruleset.rules if r.id not in covered.blocked])
    report = evaluate_inventory(
        inventory,
        runnable,
        Path.cwd(),
        now=now or capture.captured_at,
        scope=ClusterScope(capture.context, capture.listed),
    )
    return (
        replace(
            report,
            notifications=[*report.notifications, *covered.notifications],
            rules=[rule.doc for rule in ruleset.rules],  # rules that could not run included
        ),
        covered,
    )


def stderr_progress(enabled: bool) -> ProgressPrinter | None:
    """Progress on stderr when it is a terminal or ``--progress`` asks for it."""
    live = sys.stderr.isatty()
    return ProgressPrinter(sys.stderr, live) if enabled or live else None


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
