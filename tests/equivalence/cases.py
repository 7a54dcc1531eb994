"""The inputs every speed-up and executor is compared on, and how a case is evaluated.

Every fixture directory, the audit lab's snapshots (tests/audit/), and what the
benchmark generators make at a small size: a manifest corpus and a cluster snapshot
in both shapes (pods under controllers in the snapshot, whose facts are deferred;
every pod its own template). Scans run every rule (``enable_all``); an audit case
runs the rules its coverage lets run, as ``poolgate audit`` does.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.corpus import write_corpus
from benchmarks.snapshot import write_snapshot
from scanner import pipeline
from scanner.audit import run as audit
from scanner.cel import Engine
from scanner.evaluate.evaluator import Evaluation
from scanner.findings.records import Finding
from scanner.inventory import Inventory, KubeObject
from scanner.model import Subject, build_model
from scanner.model.cluster import ClusterScope
from scanner.ruleset.load import Rule
from scanner.sources import snapshot
from scanner.sources.files import load_paths
from scanner.sources.yaml.document import parse_plain

REPO = Path(__file__).resolve().parents[2]
NOW = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)

FIXTURES = sorted(
    path.name for path in (REPO / "fixtures").iterdir() if path.is_dir() and path.name != "config"
)
"""Every fixture directory but the configuration files' (no objects)."""

SNAPSHOTS = {
    "audit-lab": [
        REPO / "tests" / "audit" / "lab" / name for name in ("platform.yaml", "workloads.yaml")
    ],
    "audit-controlled": [REPO / "tests" / "audit" / "controlled" / "dump.yaml"],
    "audit-clean": [REPO / "tests" / "audit" / "clean" / "cluster.yaml"],
}
GENERATED = ("corpus", "snapshot-controllers", "snapshot-unique")

CASES = [f"fixtures/{name}" for name in FIXTURES] + list(SNAPSHOTS) + list(GENERATED)
SMALL = [f"fixtures/{name}" for name in FIXTURES if name != "rules"] + list(SNAPSHOTS)
"""The cases the pure-Python engine runs on too (cel-python is slow on the rest)."""


@dataclass(frozen=True)
class Case:
    name: str
    inventory: Inventory
    scope: ClusterScope | None = None
    """The cluster an audit read; None for a scan of manifests."""
    blocked: frozenset[str] = frozenset()
    """Rules the audit's coverage keeps from running."""


def make_case(name: str, rules: Sequence[Rule], scratch: Path) -> Case:
    """The case ``name`` (``CASES``); generated inputs are written under ``scratch``."""
    if name.startswith("fixtures/"):
        return Case(name, load_paths([str(REPO / name)], REPO))
    if name == "corpus":
        write_corpus(scratch / "corpus", 300)
        return Case(name, load_paths([str(scratch / "corpus")], scratch))
    if name in SNAPSHOTS:
        dump = scratch / f"{name}.yaml"
        dump.write_text("\n---\n".join(path.read_text() for path in SNAPSHOTS[name]))
    else:
        dump = scratch / f"{name}.json"
        write_snapshot(dump, nodes=20, pods=300, controllers=name == "snapshot-controllers")
    capture = snapshot.read(str(dump))
    return Case(
        name,
        snapshot.to_inventory(capture),
        ClusterScope(capture.context, capture.listed),
        audit.coverage(capture, rules).blocked,
    )


Evaluate = Callable[
    [
        Sequence[Rule],
        Mapping[str, Sequence[Subject]],
        Engine,
        Mapping[str, Any],
        Mapping[str, KubeObject],
    ],
    Evaluation,
]


def evaluated(case: Case, ruleset: pipeline.Ruleset, evaluate: Evaluate) -> Evaluation:
    """``case`` evaluated by ``evaluate``, on a model of its own (evaluating completes
    deferred facts in place)."""
    model = build_model(case.inventory, ruleset.config, case.scope, read_yaml=parse_plain)
    rules = [rule for rule in ruleset.rules if rule.id not in case.blocked]
    variables = pipeline.run_variables(ruleset, model, NOW)
    lookup = pipeline.RefLookup(case.inventory)
    return evaluate(rules, model.subjects(), ruleset.engine, variables, lookup)


def fingerprints(findings: Sequence[Finding]) -> list[tuple[str, Finding]]:
    """The findings in order, each with its fingerprint (what drift and baselines match)."""
    return [(finding.fingerprint, finding) for finding in findings]


def assert_same(got: Evaluation, plain: Evaluation) -> None:
    assert fingerprints(got.findings) == fingerprints(plain.findings)
    assert got.subjects == plain.subjects
    assert got.unfinished == plain.unfinished == frozenset()
