"""Deferred facts of controlled workloads (scanner/model/workloads.py, ``Workload.complete``).

A controlled pod gets its instance facts when the model is built and the rest when a
rule first needs them. Completed facts must be exactly those computed at once, and the
findings of a run must not depend on it.

No cluster is available here: the snapshots are what `poolgate snapshot` writes (the
test dump, and the benchmark generator's cluster at a small size).
"""

from __future__ import annotations

import datetime
import textwrap
from pathlib import Path

import pytest

import scanner.pipeline
from benchmarks.snapshot import write_snapshot
from scanner import audit
from scanner.inventory import Inventory
from scanner.model import Model, build_model
from scanner.pipeline import ScanOptions, load_ruleset
from scanner.sources import snapshot

DUMP = Path(__file__).parents[1] / "audit" / "controlled" / "dump.yaml"
NOW = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)


@pytest.fixture(params=["dump", "generated"])
def snapshot_path(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    if request.param == "dump":
        return DUMP
    path = tmp_path / "cluster.json"
    write_snapshot(path, nodes=30, pods=600)
    return path


def inventory_of(path: Path) -> Inventory:
    return snapshot.to_inventory(snapshot.read(str(path)))


def comparable(model: Model) -> dict[str, object]:
    return {
        "workloads": [(w.obj.ref, w.facts) for w in model.workloads],
        "nodes": [facts for _, facts in model.nodes],
        "pools": [pool.facts for pool in model.pools],
        "namespaces": [facts for _, facts in model.namespaces],
        "cluster": model.cluster,
        "clusterSubject": model.cluster_subject and model.cluster_subject[1],
    }


def test_completed_facts_are_the_facts_computed_at_once(snapshot_path: Path) -> None:
    inventory = inventory_of(snapshot_path)
    deferred = build_model(inventory)
    waiting = [w for w in deferred.workloads if w.deferred is not None]
    assert waiting, "the snapshot has controlled pods"
    assert all(w.facts["controlled"] for w in waiting)
    assert not any(w.deferred for w in deferred.workloads if not w.facts["controlled"])
    for workload in deferred.workloads:
        workload.complete()
    assert comparable(deferred) == comparable(build_model(inventory, defer=False))


def test_a_controlled_pod_waits_with_its_instance_facts_only() -> None:
    model = build_model(inventory_of(DUMP))
    pod = next(w for w in model.workloads if w.obj.name == "embedder-6d9f-x1")
    assert pod.deferred is not None
    facts = pod.facts
    assert facts["controlled"] and facts["controller"] == "Deployment/embedder"
    assert facts["gpu"] and not facts["pending"]
    assert facts["runningShared"] and facts["ns"]["name"] == "team-a"
    assert "containers" not in facts and "targets" not in facts
    complete = pod.complete()
    assert complete is facts  # completed in place: subjects already hold this dict
    assert {"containers", "targets", "diagnosis", "serviceAccount", "volumes"} <= set(facts)
    assert all("signature" in c and "security" in c for c in facts["containers"])


def test_completing_one_workload_changes_no_other_fact() -> None:
    inventory = inventory_of(DUMP)
    model = build_model(inventory)
    before = comparable(model)
    pod = next(w for w in model.workloads if w.deferred is not None)
    pod.complete()
    after = comparable(model)
    index = next(i for i, w in enumerate(model.workloads) if w is pod)
    assert after["workloads"][:index] == before["workloads"][:index]  # type: ignore[index]
    assert after["workloads"][index + 1 :] == before["workloads"][index + 1 :]  # type: ignore[index]
    assert {k: v for k, v in after.items() if k != "workloads"} == {
        k: v for k, v in before.items() if k != "workloads"
    }


CONTAINER_RULE = textwrap.dedent(
    """\
    id: ACME001
    name: pod-container-images
    level: warning
    summary: Reports every container image of a pod (reads template facts of controlled pods).
    description: A rule of one's own that reads template facts on every pod.
    remediation: None; it is a test.
    subject: workload
    match:
      kinds: [Pod]
    violations: |
      workload.containers.map(c, {"message": c.name + " runs " + c.image
        + " as " + string(c.security.runAsNonRoot) + " via " + workload.serviceAccount.name,
        "path": c.path})
    """
)


@pytest.mark.parametrize("engine", ["cpp", "python"])
def test_findings_do_not_depend_on_deferring(
    engine: str, snapshot_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rule of one's own may read any fact of a controlled pod: it is completed first."""
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "ACME001.yaml").write_text(CONTAINER_RULE)
    ruleset = load_ruleset(ScanOptions(rule_dirs=[rules], engine=engine, enable_all=True))
    capture = snapshot.read(str(snapshot_path))

    def run() -> list[tuple[str, str, str, str]]:
        report, _ = audit.evaluate(capture, ruleset, now=NOW)
        return [(f.rule_id, f.location.uri, f.location.path, f.message) for f in report.findings]

    deferring = run()
    monkeypatch.setattr(
        scanner.pipeline,
        "build_model",
        lambda *args, **kwargs: build_model(*args, **kwargs, defer=False),
    )
    at_once = run()
    assert deferring == at_once
    custom = [f for f in deferring if f[0] == "ACME001"]
    assert any("/Pod/" in uri for _, uri, _, _ in custom), "controlled pods were checked"
