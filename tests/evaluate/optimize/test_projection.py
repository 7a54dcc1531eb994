"""A workload's activation holds only the fields its rules may read (scanner/evaluate/loop.py,
``workload_fields`` in scanner/evaluate/optimize/projection.py), and the findings do not depend on it.

cel-expr-python converts a variable whole the first time an expression reads it, so
converting fields no rule names is wasted time. No cluster is available here: the
snapshots are the test dump and the benchmark generator's cluster at a small size.
"""

from __future__ import annotations

import datetime
import textwrap
from pathlib import Path
from typing import Any

import pytest

from benchmarks.snapshot import write_snapshot
from scanner import pipeline
from scanner.audit import run as audit
from scanner.cel import cpp_available
from scanner.cel.analysis import analyze_rule
from scanner.evaluate.optimize import projection as projecting
from scanner.evaluate.optimize.projection import projection, workload_fields
from scanner.pipeline import ScanOptions, load_ruleset
from scanner.sources import snapshot
from scanner.sources.files import load_paths

pytestmark = pytest.mark.skipif(not cpp_available(), reason="cel-expr-python not installed")

REPO = Path(__file__).resolve().parents[3]
DUMP = REPO / "tests" / "audit" / "controlled" / "dump.yaml"
NOW = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)


@pytest.mark.parametrize(
    ("source", "fields"),
    [
        ("workload.gpu && workload.pending", {"gpu", "pending"}),
        # both branches count: only a controlled workload skips the else branch
        ("(workload.controlled ? [] : workload.targets)", {"controlled", "targets"}),
        ('"workload.targets" + workload.name', {"name"}),  # in a string: no read
        ("has(workload.ns.name) && .workload.gpu", {"ns", "gpu"}),
        ("workload.name.startsWith('a')", {"name"}),
        ("[1].map(x, x)", set()),
        # read from the parse: keys, raw strings and comments are no obstacle
        ('"targets" in workload', {"targets"}),
        ('workload["containers"]', {"containers"}),
        ('workload.name + r"\\d"', {"name"}),
        ("workload.name // comment, workload.gpu", {"name"}),
        ("workload.?name.orValue('') + workload.podSpec.?x.orValue('')", {"name", "podSpec"}),
        ("[workload].map(workload, workload.gpu)", None),  # the variable whole: a list of it
        ("[1].map(workload, workload.gpu)", set()),  # a comprehension variable of that name
        ("[1].map(workload, .workload.gpu)", {"gpu"}),  # .workload is the variable
        # read whole: every field
        ("size(workload) > 3", None),
        ("workload.all(k, k != '')", None),
        ("[workload].size()", None),
        ("workload[x]", None),
    ],
)
def test_the_fields_a_rule_may_read(source: str, fields: set[str] | None) -> None:
    found = workload_fields(analyze_rule((source,)))
    assert found == (None if fields is None else frozenset(fields))


@pytest.mark.parametrize(
    ("source", "keys"),
    [
        ('"nodeSelector" in workload.podSpec ? 1 : 2', {"podSpec": {"nodeSelector"}}),
        ("has(workload.podSpec.hostPID) && workload.podSpec.hostPID", {"podSpec": {"hostPID"}}),
        ("workload.ns.platform || workload.ns.operator", {"ns": {"platform", "operator"}}),
        ("'k' in workload.podSpec", {"podSpec": {"k"}}),
        ('["x", "k" in workload.podSpec]', {"podSpec": {"k"}}),
        ('"q" + ("k" in workload.podSpec)', {"podSpec": {"k"}}),
        ("workload.podSpec.containers.all(c, true)", {"podSpec": {"containers"}}),
        ('workload.podSpec["k"]', {"podSpec": {"k"}}),
        ('workload.podSpec[?"k"].orValue(1)', {"podSpec": {"k"}}),
        ('"a\\"b" in workload.podSpec', {"podSpec": {'a"b'}}),
        ('"k" in .workload.podSpec', {"podSpec": {"k"}}),
        ("workload.podSpec.containers.exists(c, c.name == '')", {"podSpec": {"containers"}}),
        # the value may be read at any key: whole
        ('x + "k" in workload.podSpec', {"podSpec": None}),  # (x + "k") in ...
        ('a == "k" in workload.podSpec', {"podSpec": None}),  # (a == "k") in ...
        ('"k" in workload.podSpec + x', {"podSpec": None}),
        ("workload.podSpec[x]", {"podSpec": None}),
        ("size(workload.podSpec)", {"podSpec": None}),
        ("workload.podSpec.all(k, true)", {"podSpec": None}),
        ("workload.ns.platform && workload.ns == {}", {"ns": None}),
    ],
)
def test_the_keys_of_a_field_a_rule_may_read(source: str, keys: dict[str, set[str] | None]) -> None:
    found = projection(analyze_rule((source,)))
    assert found == {
        name: None if wanted is None else frozenset(wanted) for name, wanted in keys.items()
    }


def test_fields_of_all_expressions_of_a_rule_add_up() -> None:
    assert workload_fields(analyze_rule(("workload.gpu", "workload.name + ''"))) == {"gpu", "name"}
    assert workload_fields(analyze_rule(("workload.gpu", "size(workload)"))) is None


def test_a_rule_variable_reads_what_its_expression_is_made_of() -> None:
    """``variables.x`` is followed to the variable's expression: a filter's result is
    its range's elements, so reading them reads the range."""
    variables = (("named", "workload.containers.filter(c, c.gpu)"), ("ns", "workload.ns"))
    rule = analyze_rule(("variables.named.map(c, c.name)", "variables.ns.platform"), variables)
    assert projection(rule) == {"containers": None, "ns": frozenset({"platform"})}
    unused = analyze_rule(("true",), (("x", "workload.podSpec.x"),))
    assert projection(unused) == {"podSpec": frozenset({"x"})}  # evaluated, so read


def test_an_activation_holds_only_the_fields_its_rules_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ruleset = pipeline.load_ruleset(pipeline.ScanOptions(engine="cpp", enable_all=True))
    named = frozenset().union(
        *(
            workload_fields(rule.analysis) or ()
            for rule in ruleset.rules
            if rule.doc.subject == "workload"
        )
    )
    seen: list[set[str]] = []
    original = ruleset.engine.activation

    def recording(data: dict[str, Any]) -> Any:
        facts = data.get("workload")
        if isinstance(facts, dict) and "kind" in data.get("object", {}):
            seen.append(set(facts))
        return original(data)

    monkeypatch.setattr(ruleset.engine, "activation", recording)
    inventory = load_paths([str(REPO / "fixtures" / "rules")], REPO)
    pipeline.evaluate_inventory(inventory, ruleset, REPO, now=NOW)
    assert seen and all(keys <= named for keys in seen)
    # a non-GPU workload meets only the rules that read its containers and namespace
    assert min(len(keys) for keys in seen) < len(named) // 2


def rule_file(rule_id: str, violations: str) -> str:
    return textwrap.dedent(
        f"""\
        id: {rule_id}
        name: reads-facts-{rule_id.lower()}
        level: warning
        summary: Reads workload facts its own way.
        description: A rule of one's own, for the test.
        remediation: None; it is a test.
        subject: workload
        violations: |
          {violations}
        """
    )


WHOLE_RULES = {
    # read the facts whole: nothing may be left out (and no activation is projected)
    "ACME101": 'size(workload) > 3 ? [{"message": string(size(workload)) + " facts"}] : []',
    "ACME102": '"gpu" in workload && workload.gpu ? [{"message": "a GPU workload"}] : []',
}
CUSTOM_RULES = {
    # a field holding a map that lacks a key on some workloads: the same either way
    "ACME103": 'has(workload.runningNode.name) ? [] : [{"message": "not running"}]',
    "ACME104": '[{"message": workload.runningNode.name}]',  # an error where it is missing
    # keys of a field's value: a named key's presence, its value, an error where missing
    "ACME105": '"nodeSelector" in workload.podSpec ? [{"message": "selects nodes"}] : []',
    "ACME106": '[{"message": string(workload.podSpec.serviceAccountName)}]',
    "ACME107": 'workload.ns.known ? [{"message": joined(workload.ns.labels.map(k, k), ",")}] : []',
}


@pytest.mark.parametrize("whole", [False, True], ids=["projected", "beside-whole-readers"])
@pytest.mark.parametrize("source", ["dump", "generated", "fixtures"])
def test_findings_do_not_depend_on_the_projection(
    source: str, whole: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bundled rules and rules of one's own that read fields, or keys of a field's
    value, give the same findings with the projection as without; so do they beside
    rules that read the facts whole (which turn it off for the subjects they run on)."""
    rules = tmp_path / "rules"
    rules.mkdir()
    custom = {**CUSTOM_RULES, **(WHOLE_RULES if whole else {})}
    for rule_id, violations in custom.items():
        (rules / f"{rule_id}.yaml").write_text(rule_file(rule_id, violations))
    ruleset = load_ruleset(ScanOptions(rule_dirs=[rules], engine="cpp", enable_all=True))

    def run() -> list[tuple[str, str, str, str]]:
        if source == "fixtures":
            inventory = load_paths([str(REPO / "fixtures" / "rules")], REPO)
            findings = pipeline.evaluate_inventory(inventory, ruleset, REPO, now=NOW).findings
        else:
            path = DUMP
            if source == "generated":
                path = tmp_path / "cluster.json"
                write_snapshot(path, nodes=20, pods=300)
            findings, _ = audit.evaluate(snapshot.read(str(path)), ruleset, now=NOW)
            findings = findings.findings
        return [(f.rule_id, f.location.uri, f.location.path, f.message) for f in findings]

    projected = run()
    monkeypatch.setattr(projecting, "ENGINES", frozenset())
    all_facts = run()
    assert projected == all_facts
    for rule_id in custom:
        assert any(f[0] == rule_id for f in all_facts), rule_id
