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
from scanner.audit import run as audit
from scanner.cel.analysis import analyze_rule
from scanner.evaluate.optimize.projection import reads_instance_facts_only
from scanner.inventory import Inventory
from scanner.model import Model, build_model
from scanner.model.workloads import INSTANCE_FACTS
from scanner.pipeline import ScanOptions, load_ruleset
from scanner.sources import snapshot
from scanner.sources.yaml.document import parse_plain

DUMP = Path(__file__).parents[1] / "audit" / "controlled" / "dump.yaml"
NOW = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)


def generated(directory: Path) -> Path:
    """The benchmark generator's cluster, small."""
    path = directory / "cluster.json"
    write_snapshot(path, nodes=20, pods=300)
    return path


@pytest.fixture(params=["dump", "generated"])
def snapshot_path(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    return DUMP if request.param == "dump" else generated(tmp_path)


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
    deferred = build_model(inventory, read_yaml=parse_plain)
    waiting = [w for w in deferred.workloads if w.deferred is not None]
    assert waiting, "the snapshot has controlled pods"
    assert all(w.facts["controlled"] for w in waiting)
    assert not any(w.deferred for w in deferred.workloads if not w.facts["controlled"])
    for workload in deferred.workloads:
        workload.complete()
    assert comparable(deferred) == comparable(
        build_model(inventory, defer=False, read_yaml=parse_plain)
    )


def test_a_controlled_pod_waits_with_its_instance_facts_only() -> None:
    model = build_model(inventory_of(DUMP), read_yaml=parse_plain)
    pod = next(w for w in model.workloads if w.obj.name == "embedder-6d9f-x1")
    assert pod.deferred is not None
    facts = pod.facts
    assert facts["controlled"] and facts["controller"] == "Deployment/embedder"
    assert facts["gpu"] and not facts["pending"]
    assert facts["runningShared"] and facts["ns"]["name"] == "team-a"
    assert "containers" not in facts and "targets" not in facts
    assert (
        set(facts) == INSTANCE_FACTS
    )  # exact: scanner/evaluate/optimize/projection.py relies on it
    complete = pod.complete()
    assert complete is facts  # completed in place: subjects already hold this dict
    assert {"containers", "targets", "diagnosis", "serviceAccount", "volumes"} <= set(facts)
    assert all("signature" in c and "security" in c for c in facts["containers"])


def test_completing_one_workload_changes_no_other_fact() -> None:
    inventory = inventory_of(DUMP)
    model = build_model(inventory, read_yaml=parse_plain)
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


@pytest.mark.parametrize(
    ("source", "light"),
    [
        ("workload.gpu && workload.pending", True),
        ("has(workload.runningNode.name) && has(workload.ns) && workload.ns.name != ''", True),
        ('"workload.targets" + workload.name', True),  # in a string: no read
        # a deferred workload is controlled: this else branch never runs on one
        ("(workload.controlled ? [] : workload.targets).map(t, t.pool)", True),
        ("{'a': workload.controlled ? 1 : size(workload.containers)}", True),
        ("workload.controlled ? (workload.gpu ? 1 : 2) : size(workload.containers)", True),
        ("{workload.controlled ? 'a' : size(workload.containers) > 1 ? 'b' : 'c': 1}", True),
        # any read of a deferred fact that may run
        ("workload.containers.map(c, c.name)", False),
        ("workload.pending || size(workload.containers) > 1", False),  # || may drop it
        ("has(workload.targets)", False),  # would answer false instead of failing
        ("has((workload.serviceAccount))", False),
        ("has( workload . diagnosis )", False),
        ("workload.controlled ? workload.targets : []", False),  # the then branch runs
        ("!workload.controlled ? [] : workload.targets", False),
        ("x && workload.controlled ? [] : workload.targets", False),  # (x && ...) ? ...
        ("(workload.controlled ? [] : workload.name) + workload.targets", False),
        ('"targets" in workload', False),
        ("size(.workload.targets)", False),  # .workload is the global variable too
        ("has(.workload.targets)", False),
        ("[.workload].size()", False),
        # a conditional as a map key: the value after it always runs
        ("{workload.controlled ? 'x' : 'y' : workload.targets}", False),
        ("{workload.controlled ? 'x' : 'y' : has(workload.targets)}['x']", False),
        ("size(workload) > 3", False),
        ("workload.all(k, k != '')", False),
        ('workload["containers"]', False),
        ("workload[x]", False),
        ("[1].exists(workload, workload.controlled ? 1 : workload.targets)", True),
        ("[1].exists(c, .workload.controlled ? 1 : size(.workload.targets) > 0)", True),
        # comments, raw and triple-quoted strings, optional syntax: read from the parse
        ('workload.name + r"\\d"', True),
        ('workload.name + """x"""', True),
        ("workload.name // comment, workload.targets", True),
        ("workload.?name.orValue('')", True),
        ("workload.?targets.orValue([])", False),
    ],
)
def test_which_rules_run_on_instance_facts(source: str, light: bool) -> None:
    assert reads_instance_facts_only(analyze_rule((source,))) is light


def rule_file(rule_id: str, violations: str) -> str:
    return textwrap.dedent(
        f"""\
        id: {rule_id}
        name: reads-template-facts-{rule_id.lower()}
        level: warning
        summary: Reads facts a controlled pod gets only when complete.
        description: A rule of one's own that reads template facts on every pod.
        remediation: None; it is a test.
        subject: workload
        match:
          kinds: [Pod]
        violations: |
          {violations}
        """
    )


_BIG = "[" + ",".join(str(i) for i in range(110)) + "]"

CUSTOM_RULES = {
    # reads deferred facts: the pod is completed first
    "ACME001": 'workload.containers.map(c, {"message": c.name + " runs " + c.image'
    ' + " as " + string(c.security.runAsNonRoot) + " via " + workload.serviceAccount.name,'
    ' "path": c.path})',
    # has() on a deferred fact, parenthesized: must see the complete facts
    "ACME002": '[{"message": has((workload.targets)) ? "targets known" : "no targets"}]',
    # || would drop a failed read of a deferred fact on the instance facts
    "ACME003": '(workload.pending || size(workload.containers) > 1) ? [{"message": "x"}] : []',
    # on the complete facts this runs into the iteration limit; a failed read on the
    # instance facts would have skipped it
    "ACME004": f"(workload.containers.exists(c, {_BIG}.exists(i, {_BIG}.exists(j, false)))"
    ' || workload.gpu) ? [{"message": "gpu pod"}] : []',
    # a map holding a failed read compares equal or not, with the pure-Python engine
    "ACME005": '{"many": size(workload.containers) > 5} == {"many": true} ? []'
    ' : [{"message": "five containers or fewer"}]',
    # instance facts only: runs on controlled pods without completing them
    "ACME006": '(workload.controlled ? [] : workload.targets).map(t, {"message": t.pool})'
    ' + (workload.runningShared ? [{"message": "shared " + workload.trustDomain}] : [])',
}


@pytest.mark.parametrize(
    ("engine", "rule_id", "source"),
    [
        *(("cpp", rule_id, source) for rule_id in CUSTOM_RULES for source in ("dump", "generated")),
        ("python", "ACME005", "dump"),  # its maps hold errors differently
        ("cpp", "all", "dump"),
        ("cpp", "all", "generated"),
        ("python", "all", "dump"),  # the pure-Python engine is slow on the generated one
    ],
)
def test_findings_do_not_depend_on_deferring(
    engine: str,
    rule_id: str,
    source: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A rule of one's own may read any fact of a controlled pod, on its own (the pod
    still waits when it runs) or after other rules."""
    snapshot_path = DUMP if source == "dump" else generated(tmp_path)
    rules = tmp_path / "rules"
    rules.mkdir()
    chosen = [rule_id]
    if rule_id == "all":  # ACME004's iteration limit takes seconds in pure Python
        chosen = [r for r in CUSTOM_RULES if engine == "cpp" or r != "ACME004"]
    for chosen_id in chosen:
        (rules / f"{chosen_id}.yaml").write_text(rule_file(chosen_id, CUSTOM_RULES[chosen_id]))
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
    for chosen_id in chosen:
        custom = [f for f in deferring if f[0] == chosen_id]
        assert any("/Pod/" in uri for _, uri, _, _ in custom), "controlled pods were checked"
