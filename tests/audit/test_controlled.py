"""Controlled objects in an audit (scanner/model/controllers.py): a Pod or ReplicaSet
that runs its controller's current template is checked through the controller, once;
instance rules still see every pod; anything else is checked as itself.

No cluster is available here: the dump is what `poolgate snapshot` or `kubectl get
-o yaml` writes, and `poolgate audit --snapshot` reads it exactly as a live audit
reads the API server.
"""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest

from scanner.audit import run as audit
from scanner.pipeline import ScanOptions, load_ruleset
from scanner.sources import snapshot

DUMP = Path(__file__).parent / "controlled" / "dump.yaml"
NOW = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)


def findings(engine: str, rules: set[str]) -> set[tuple[str, str]]:
    ruleset = load_ruleset(ScanOptions(engine=engine, enable_all=True))
    report, _ = audit.evaluate(snapshot.read(str(DUMP)), ruleset, now=NOW)
    return {
        (f.rule_id, f.ref.logical_name) for f in report.findings if f.ref and f.rule_id in rules
    }


@pytest.mark.parametrize("engine", ["cpp", "python"])
def test_template_findings_once_on_the_controller_instance_findings_on_every_pod(
    engine: str,
) -> None:
    assert findings(engine, {"PG501", "PG201", "PG603", "PG301"}) == {
        # the Deployment and its current ReplicaSet and pods: one template finding
        ("PG501", "team-a/Deployment/embedder"),
        ("PG201", "team-a/Deployment/embedder"),
        # running together on the MPS node: instance findings on each pod
        ("PG201", "team-a/Pod/embedder-6d9f-x1"),
        ("PG201", "team-a/Pod/embedder-6d9f-x2"),
        # the old ReplicaSet's template moved on: checked as itself; its pod through it
        ("PG501", "team-a/ReplicaSet/embedder-5c2a"),
        ("PG201", "team-a/ReplicaSet/embedder-5c2a"),
        ("PG603", "team-a/Pod/embedder-5c2a-z9"),
        # a bare pod
        ("PG201", "team-b/Pod/probe"),
        ("PG501", "team-b/Pod/probe"),
        # the Job and its Pending pod
        ("PG501", "team-b/Job/eval"),
        ("PG603", "team-b/Pod/eval-q7x"),
        # the PyTorchJob: its template once, its Pending worker as itself
        ("PG501", "team-b/PyTorchJob/ft"),
        ("PG603", "team-b/Pod/ft-worker-1"),
        # owner absent, owner uid of another object, owner that makes no pods
        ("PG501", "team-a/Pod/orphan-5c4b-a1"),
        ("PG501", "team-a/Pod/embedder-6d9f-old"),
        ("PG501", "team-a/Pod/sideloaded"),
        ("PG301", "team-a/Pod/sideloaded"),
    }
