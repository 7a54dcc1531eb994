"""Decision logic of the evaluation, tested with a fake CEL engine (no CEL involved),
on the plain path (scanner/evaluate/evaluator.py) and the fast one (fast.py)."""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from scanner.cel import ResultKind
from scanner.errors import CelEvalError
from scanner.evaluate import evaluator, fast
from scanner.evaluate.evaluator import Evaluation
from scanner.evaluate.stamp import document_findings
from scanner.findings.records import Level, Outcome
from scanner.inventory import InvalidDocument, KubeObject, LineMap, Origin
from scanner.model import Subject
from scanner.ruleset.docs import RuleDoc
from scanner.ruleset.load import Rule, Validation


@dataclass(frozen=True)
class FakeProgram:
    """Returns ``result(activation)``; raises CelEvalError when it returns an exception."""

    result: Any
    source: str = "fake"

    def evaluate(self, activation: Any) -> Any:
        value = self.result(activation) if callable(self.result) else self.result
        if isinstance(value, Exception):
            raise value
        return value

    variable_value = evaluate


class FakeEngine:
    name = "fake"

    def compile(self, source: str, result: ResultKind) -> FakeProgram:
        raise AssertionError("rules are built by hand in these tests")

    def activation(self, data: Mapping[str, Any]) -> Any:
        return dict(data)


def doc(rule_id: str = "PG900", level: Level = Level.ERROR, subject: str = "workload") -> RuleDoc:
    return RuleDoc(rule_id, "test-rule", level, "s", "d", "r.", subject, "rules/x.yaml")


def make_obj(
    name: str = "train", kind: str = "Deployment", context_only: bool = False
) -> KubeObject:
    positions = {
        "": (3, 1),
        "spec": (7, 1),
        "spec.template.spec": (12, 5),
        "spec.template.spec.containers[0].securityContext.privileged": (20, 13),
    }
    return KubeObject(
        {"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": name, "namespace": "ml"}},
        Origin("k8s/train.yaml", 0, 3, 1),
        LineMap(positions),
        context_only=context_only,
    )


REPO = Path(__file__).resolve().parents[2]

Evaluate = Callable[..., Evaluation]


@pytest.fixture(params=[evaluator.evaluate, fast.evaluate], ids=["plain", "fast"])
def evaluate(request: pytest.FixtureRequest) -> Evaluate:
    found: Evaluate = request.param
    return found


def run(
    evaluate: Evaluate,
    rule: Rule,
    *objects: KubeObject,
    lookup: Mapping[str, KubeObject] | None = None,
) -> Any:
    subjects = {"workload": [Subject("workload", obj, {"workload": {}}) for obj in objects]}
    return evaluate([rule], subjects, FakeEngine(), {"config": {}}, lookup)


def test_violation_is_stamped_with_rule_id_level_and_exact_location(evaluate: Evaluate) -> None:
    items = [
        {
            "message": "privileged\nsecond line",
            "path": "spec.template.spec.containers[0].securityContext.privileged",
        }
    ]
    rule = Rule(doc(), True, frozenset(), violations=FakeProgram(items))
    [finding] = run(evaluate, rule, make_obj()).findings
    assert finding.rule_id == "PG900"
    assert finding.level is Level.ERROR
    assert finding.message == "privileged\\nsecond line"  # one line, nothing cut off
    assert (finding.location.uri, finding.location.line, finding.location.column) == (
        "k8s/train.yaml",
        20,
        13,
    )
    assert finding.ref is not None and finding.ref.logical_name == "ml/Deployment/train"


def test_a_line_break_in_quoted_data_cannot_cut_a_message_short(evaluate: Evaluate) -> None:
    """A value such as ``runtimeClassName: "nvidia\\u2028x"`` is shown escaped; cut at the
    break, the message would read as if the value were ``nvidia``."""
    text = "uses runtimeClassName nvidia\u2028-not-really\r\x85; expected nvidia"
    rule = Rule(doc(), True, frozenset(), violations=FakeProgram([{"message": text}]))
    [finding] = run(evaluate, rule, make_obj()).findings
    assert finding.message == (
        "uses runtimeClassName nvidia\\u2028-not-really\\r\\x85; expected nvidia"
    )


def test_missing_path_falls_back_to_nearest_ancestor_then_first_line(evaluate: Evaluate) -> None:
    items = [
        {"message": "a", "path": "spec.template.spec.runtimeClassName"},
        {"message": "b", "path": "status.nothing"},
    ]
    rule = Rule(doc(), True, frozenset(), violations=FakeProgram(items))
    lines = sorted(f.location.line for f in run(evaluate, rule, make_obj()).findings)
    assert lines == [3, 12]


def test_violation_level_override_and_ref(evaluate: Evaluate) -> None:
    other = make_obj("cm", "ConfigMap")
    items = [{"message": "m", "level": "note", "ref": "ml/ConfigMap/cm"}]
    rule = Rule(doc(), True, frozenset(), violations=FakeProgram(items))
    [finding] = run(evaluate, rule, make_obj(), lookup={"ml/ConfigMap/cm": other}).findings
    assert finding.level is Level.NOTE
    assert finding.ref is not None and finding.ref.kind == "ConfigMap"


def test_kind_filter_and_condition_come_before_evaluation(evaluate: Evaluate) -> None:
    calls: list[str] = []

    def record(activation: Any) -> list[Any]:
        calls.append(activation["object"]["metadata"]["name"])
        return []

    rule = Rule(
        doc(),
        True,
        frozenset({"Deployment"}),
        condition=FakeProgram(lambda a: a["object"]["metadata"]["name"] != "skip"),
        violations=FakeProgram(record),
    )
    run(evaluate, rule, make_obj("a"), make_obj("b", "Pod"), make_obj("skip"))
    assert calls == ["a"]


def test_context_only_objects_are_never_reported(evaluate: Evaluate) -> None:
    rule = Rule(doc(), True, frozenset(), violations=FakeProgram([{"message": "m"}]))
    evaluation = run(evaluate, rule, make_obj(context_only=True))
    assert evaluation.findings == [] and evaluation.subjects == 0


def test_evaluation_error_becomes_an_error_outcome_and_the_run_goes_on(evaluate: Evaluate) -> None:
    failing = Rule(
        doc("PG901"), True, frozenset(), violations=FakeProgram(CelEvalError("no such key: x"))
    )
    subjects = {
        "workload": [Subject("workload", make_obj("a")), Subject("workload", make_obj("b"))]
    }
    good = Rule(doc("PG902"), True, frozenset(), violations=FakeProgram([{"message": "m"}]))
    findings = evaluate([failing, good], subjects, FakeEngine(), {}).findings
    errors = [f for f in findings if f.outcome is Outcome.ERROR]
    assert len(errors) == 2 and all("no such key: x" in f.message for f in errors)
    assert len([f for f in findings if f.rule_id == "PG902"]) == 2


def test_malformed_violation_items_are_evaluation_errors(evaluate: Evaluate) -> None:
    for bad in (
        [{"path": "x"}],
        ["just a string"],
        [{"message": "m", "path": 3}],
        [{"message": "m", "level": "fatal"}],
    ):
        rule = Rule(doc(), True, frozenset(), violations=FakeProgram(bad))
        [finding] = run(evaluate, rule, make_obj()).findings
        assert finding.outcome is Outcome.ERROR


def test_validation_messages_follow_vap_order(evaluate: Evaluate) -> None:
    validations = (
        Validation(FakeProgram(False), "static", FakeProgram("  dynamic  "), "spec"),
        Validation(FakeProgram(False), "static", FakeProgram("dynamic \u2028 more"), "spec"),
        Validation(FakeProgram(False), "static only", None, ""),
        Validation(FakeProgram(False), "", FakeProgram(""), ""),
        Validation(FakeProgram(True), "never", None, ""),
    )
    rule = Rule(doc(), True, frozenset(), validations=validations)
    messages = [f.message for f in run(evaluate, rule, make_obj()).findings]
    # VAP: a messageExpression with a line break falls back to message.
    assert messages == ["dynamic", "static", "static only", "failed expression: fake"]


def test_variables_are_bound_in_order(evaluate: Evaluate) -> None:
    seen: list[Any] = []
    variables = (
        ("a", FakeProgram(1)),
        ("b", FakeProgram(lambda act: act["variables"]["a"] + 1)),
    )
    rule = Rule(
        doc(),
        True,
        frozenset(),
        variables=variables,
        violations=FakeProgram(lambda act: seen.append(dict(act["variables"])) or []),
    )
    run(evaluate, rule, make_obj())
    assert seen == [{"a": 1, "b": 2}]


def test_document_findings_only_for_enabled_document_rules() -> None:
    origin = Origin("bad.yaml")
    invalid = [
        InvalidDocument("PG001", "YAML does not parse", origin, 4, 2),
        InvalidDocument("PG002", "duplicate key", origin, 9, 3),
    ]
    rules = {"PG001": Rule(doc("PG001", subject="document"), True, frozenset())}
    [finding] = list(document_findings(invalid, rules))
    assert (finding.rule_id, finding.location.line, finding.location.column) == ("PG001", 4, 2)


def test_controlled_workloads_run_only_instance_rules(evaluate: Evaluate) -> None:
    """A Pod whose controller is in the run is covered by the controller's findings;
    only rules with ``match.controlled: include`` look at it."""
    violation = FakeProgram([{"message": "bad"}])
    template_rule = Rule(doc("PG900"), True, frozenset(), violations=violation)
    instance_rule = Rule(doc("PG901"), True, frozenset(), violations=violation, controlled=True)
    subjects = {
        "workload": [
            Subject("workload", make_obj("api"), {"workload": {"controlled": False}}),
            Subject(
                "workload",
                make_obj("api-x1", "Pod"),
                {"workload": {"controlled": True, "controller": "Deployment/api"}},
            ),
        ]
    }
    # A rule that never reports on the controller's kind would leave the pod unchecked.
    pod_rule = Rule(doc("PG902"), True, frozenset({"Pod"}), violations=violation)
    rules = [template_rule, instance_rule, pod_rule]
    findings = evaluate(rules, subjects, FakeEngine(), {}).findings
    assert sorted((f.rule_id, f.ref.name) for f in findings if f.ref) == [
        ("PG900", "api"),
        ("PG901", "api"),
        ("PG901", "api-x1"),
        ("PG902", "api-x1"),
    ]


def test_the_plain_path_knows_nothing_about_speed() -> None:
    """scanner/evaluate/evaluator.py (and the stamping it uses) imports nothing from
    runtime/ or optimize/, directly or through another module: it is what the fast
    path is compared with (tests/equivalence/)."""
    for name in ("evaluator", "stamp"):
        tree = ast.parse((REPO / "scanner" / "evaluate" / f"{name}.py").read_text())
        imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
        imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        assert not {module for module in imported if module and _speed(module)}, name
    probe = "import sys, scanner.evaluate.evaluator; print(' '.join(sorted(sys.modules)))"
    loaded = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.split()
    assert "scanner.evaluate.evaluator" in loaded
    assert not [module for module in loaded if _speed(module)]


def _speed(module: str) -> bool:
    """A module of the speed-ups, the fast path or the process machinery."""
    fast_path = ("plan", "fast", "loop", "shipping", "optimize")
    return module == "scanner.runtime.executors" or any(
        module == f"scanner.evaluate.{name}" or module.startswith(f"scanner.evaluate.{name}.")
        for name in fast_path
    )
