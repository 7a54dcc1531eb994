"""The parser-based analysis (scanner/cel/analysis.py) against what the text-reading
code computed before it, for every bundled rule and for the CEL of every admission
policy and DeviceClass in fixtures/ and tests/.

analysis_golden.json was written by the old code (guards.py, deferral.py, reads.py,
cel/budget.py, bindings.py, model/dra.py, model/admission.py as of commit fc70c4c, with
tests/cel/make_analysis_golden.py of that commit). Every rule reads the same kinds and
facts, splits into the same conjuncts and guards, nests as deep and binds the same way
— except where ``DIFFERENCES`` says why the parse reads better than the text did.
A rule whose text changed since has its entry written from the parse of the new
text (PG108 and PG110 for issue 24: new expressions, and PG110 reads
``cluster.gpuOperator``, so ClusterPolicy, Deployment and Node; PG202 and PG403 leave
members of unknown sharing out; PG305 stays silent where another engine's network
policies apply).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from scanner.audit import reads
from scanner.cel import get_engine
from scanner.cel.analysis import analyze
from scanner.cel.budget import comprehension_nesting, iterates
from scanner.cel.syntax import ParseError
from scanner.config.values import Config
from scanner.evaluate.optimize import binding as bindings
from scanner.evaluate.optimize import guards
from scanner.evaluate.optimize import projection as deferral
from scanner.kinds import WORKLOAD_KINDS
from scanner.model import admission, dra
from scanner.ruleset.load import Rule, bundled_rules_dir, load_rules

GOLDEN = json.loads(Path(__file__).with_name("analysis_golden.json").read_text(encoding="utf-8"))

_SIGNATURE_KINDS = ["ClusterImagePolicy", "ClusterPolicy", "Namespace", "Policy"]
DIFFERENCES: dict[tuple[str, str], Any] = {
    # The old reading took the list literal ["RuntimeDefault", "Localhost"] for an index
    # with a string, and so for a read of a container's signature; PG303 never reads
    # one (tests/cel/test_analysis_golden.py: test_pg303_does_not_read_signatures).
    ("PG303", "fact_kinds"): lambda old: sorted(set(old) - set(_SIGNATURE_KINDS)),
    ("PG303", "joins"): lambda old: sorted(set(old) - set(_SIGNATURE_KINDS)),
    # Issue 24: PG104 accepts any label of config.skuLabels (one comprehension over it)
    # and points at the pod spec's nodeSelector when there is one.
    ("PG104", "projection"): lambda old: {**old, "podSpec": ["nodeSelector"]},
    ("PG104", "projection_controlled"): lambda old: {**old, "podSpec": ["nodeSelector"]},
    ("PG104", "nesting"): lambda old: {**old, "violations": [1, 17]},
    ("PG104", "iterates"): lambda old: {**old, "violations": True},
}
"""(rule, field) -> what the old answer becomes."""

GOLDEN_WORKLOAD_KINDS: frozenset[str] = frozenset(
    {
        *("Pod", "Deployment", "ReplicaSet", "StatefulSet", "DaemonSet", "Job", "CronJob"),
        *("ReplicationController", "PodTemplate", "PyTorchJob", "TFJob", "MPIJob"),
        *("RayCluster", "RayJob", "RayService", "JobSet", "LeaderWorkerSet"),
        *("InferenceService", "Rollout"),
    }
)
"""The workload kinds when the golden file was written. Issue 24 added kinds that
carry pod templates (LLMInferenceService, the Kubeflow Trainer runtimes, PaddleJob,
...): a rule that read every workload kind then reads every one now."""

SHARING_CONFIG_RULES: frozenset[str] = frozenset({"PG203", "PG204", "PG205"})
"""``sharingConfig`` subjects are also made from EC2NodeClasses whose Bottlerocket
settings share GPUs (issue 24)."""


def _with_added_kinds(rule_id: str, field: str, old: list[str]) -> list[str]:
    kinds = set(old)
    if kinds >= GOLDEN_WORKLOAD_KINDS:
        kinds |= WORKLOAD_KINDS
    if field == "subjects" and rule_id in SHARING_CONFIG_RULES:
        kinds.add("EC2NodeClass")
    return sorted(kinds)


def _bound_in_dyn(old: Any) -> Any:
    """Issue 23: each bound variable's expression is wrapped in ``dyn()``, as cel-cpp
    types a map literal by joining its values' types (``binding.let_source``)."""
    if old is None:
        return None
    return [text.replace('": (\n', '": dyn(\n') for text in old]


EVERY_RULE: dict[str, Any] = {"bound": _bound_in_dyn}
"""field -> what the old answer becomes, for every rule."""

_HOST_NAMESPACES = [
    (f'"f": "{name}", "on": has(workload.podSpec.{name}) && workload.podSpec.{name} == true',
     f'"f": dyn("{name}"), "on": dyn(has(workload.podSpec.{name}) && workload.podSpec.{name} == true)')
    for name in ("hostPID", "hostIPC", "hostNetwork")
]  # fmt: skip
_EMPTY_GRANT = [
    ('{"scope": "", "role": "", "writes": [], "writesNamed": {}, "subjects": []}',
     '{"scope": dyn(""), "role": dyn(""), "writes": dyn([]), "writesNamed": dyn({}), '
     '"subjects": dyn([])}')
]  # fmt: skip
REWRITTEN: dict[str, list[tuple[str, str]]] = {"PG302": _HOST_NAMESPACES, "PG306": _EMPTY_GRANT}
"""Issue 23: rules whose literals Kubernetes' homogeneous-literal check refuses, rewritten
with ``dyn()`` (which reads what its argument reads): rule -> (old text, new text)."""


def _rewritten(rule_id: str, old: dict[str, Any]) -> dict[str, Any]:
    """The old answer for a rule's rewritten text: the binding's text is the new text,
    and a macro after a rewritten part starts that much later."""
    changes = REWRITTEN.get(rule_id, [])
    if not changes:
        return old
    bound = old["bound"]
    for before, after in changes:
        bound = [text.replace(before, after) for text in bound]
    shift = sum(len(after) - len(before) for before, after in changes)
    nesting = dict(old["nesting"])
    for field, source in programs(rules()[rule_id]):
        depth, offset = nesting[field]
        if depth and any(after in source[:offset] for _, after in changes):
            nesting[field] = [depth, offset + shift]
    return {**old, "bound": bound, "nesting": nesting}


@cache
def rules() -> dict[str, Rule]:
    return {rule.id: rule for rule in load_rules([bundled_rules_dir()], get_engine("python"))}


def programs(rule: Rule) -> Iterator[tuple[str, str]]:
    """(field, source) of every expression of a rule, in file order."""
    if rule.condition is not None:
        yield "match.condition", rule.condition.source
    for name, program in rule.variables:
        yield f"variables.{name}", program.source
    if rule.violations is not None:
        yield "violations", rule.violations.source
    for index, validation in enumerate(rule.validations):
        yield f"validations[{index}].expression", validation.expression.source
        if validation.message_expression is not None:
            yield f"validations[{index}].messageExpression", validation.message_expression.source


def _projection(found: Mapping[str, frozenset[str] | None] | None) -> Any:
    if found is None:
        return None
    return {name: None if keys is None else sorted(keys) for name, keys in sorted(found.items())}


def _atom(atom: guards.Atom) -> Any:
    if isinstance(atom, guards.Flag):
        return ["flag", atom.variable, list(atom.fields), atom.negated]
    if isinstance(atom, guards.Equals):
        return ["equals", atom.variable, list(atom.fields), atom.text]
    return ["member", atom.variable, list(atom.fields), sorted(atom.values)]


def _guard(rule: Rule) -> Any:
    if rule.condition is None:
        return None
    run = {"config": Config().cel_view(), "cluster": {}}
    found = guards.build(rule.condition.source, get_engine("cpp"), run, rule.params)
    if found is None:
        return None
    return {
        "never": found.never,
        "flags": [_atom(atom) for atom in found.flags],
        "any_of": [[_atom(atom) for atom in atoms] for atoms in found.any_of],
        "whole": found.whole,
    }


def _enclosed(text: str) -> str:
    """A conjunct's text without the parentheses around it (the old split kept them;
    a node of the parse spans what they enclose)."""
    if text.startswith("(") and text.endswith(")") and analyze(text).conjuncts:
        inner = text[1:-1]
        try:
            same = analyze(inner).conjuncts == analyze(text).conjuncts
        except ParseError:  # "(a) && (b)": not one group
            return text
        return inner.strip() if same else text
    return text


def _bound(rule: Rule) -> Any:
    if not rule.variables:
        return None
    variables = [(name, program.source) for name, program in rule.variables]
    bodies = [source for field, source in programs(rule) if not field.startswith(("match", "var"))]
    return [bindings.let_source(variables, body) for body in bodies]


def current(rule: Rule) -> dict[str, Any]:
    """What the new code says, in the golden file's terms."""
    read = reads.reads(rule)
    condition = rule.condition.source if rule.condition is not None else None
    return {
        "fact_kinds": sorted(reads.fact_kinds(rule.analysis)),
        "subjects": sorted(read.subjects),
        "joins": sorted(read.joins),
        "refs": rule.analysis.refs,
        "instance_facts_only": deferral.reads_instance_facts_only(rule.analysis),
        "projection": _projection(deferral.projection(rule.analysis)),
        "projection_controlled": _projection(deferral.projection(rule.analysis, controlled=True)),
        "conjuncts": None
        if condition is None
        else [part.source for part in analyze(condition).conjuncts],
        "guard": _guard(rule),
        "nesting": {field: list(comprehension_nesting(source)) for field, source in programs(rule)},
        "iterates": {field: iterates(source) for field, source in programs(rule)},
        "bound": _bound(rule),
    }


def test_every_bundled_rule_is_in_the_golden_file() -> None:
    assert set(GOLDEN["rules"]) == set(rules())


@pytest.mark.parametrize("rule_id", sorted(GOLDEN["rules"]))
def test_the_analysis_reads_each_rule_as_the_text_did(rule_id: str) -> None:
    old = dict(GOLDEN["rules"][rule_id])
    for field, change in EVERY_RULE.items():
        old[field] = change(old[field])
    old = _rewritten(rule_id, old)
    for field in ("fact_kinds", "subjects", "joins"):
        old[field] = _with_added_kinds(rule_id, field, old[field])
    for (rule, field), change in DIFFERENCES.items():
        if rule == rule_id:
            old[field] = change(old[field])
    if old["conjuncts"] is not None:
        old["conjuncts"] = [_enclosed(text) for text in old["conjuncts"]]
    assert current(rules()[rule_id]) == old


def test_pg303_does_not_read_signatures(monkeypatch: pytest.MonkeyPatch) -> None:
    """What ``DIFFERENCES`` says of PG303 holds: its findings on every fixture stay the
    same when no container has a signature fact to read, while PG502's, which reads
    them, change."""
    from scanner import pipeline
    from scanner.model import policy
    from scanner.sources.files import load_paths

    assert not rules()["PG303"].analysis.covers("workload", ("containers", None, "signature"))
    repo = Path(__file__).resolve().parents[2]
    ruleset = pipeline.load_ruleset(pipeline.ScanOptions(engine="cpp", enable_all=True))
    inventory = load_paths(
        [str(repo / "fixtures" / "rules"), str(repo / "fixtures" / "scenarios")], repo
    )

    def findings(rule_id: str) -> list[Any]:
        report = pipeline.evaluate_inventory(inventory, ruleset, repo)
        return [finding for finding in report.findings if finding.rule_id == rule_id]

    before = {rule_id: findings(rule_id) for rule_id in ("PG303", "PG502")}
    monkeypatch.setattr(policy, "signature_facts", lambda *args: {})
    assert before["PG303"] and findings("PG303") == before["PG303"]
    assert findings("PG502") != before["PG502"]


def test_admission_policies_read_as_the_text_did() -> None:
    keys = admission._label_keys(Config())
    for policy in GOLDEN["policies"]:
        names = admission._names(policy["expressions"])
        runtime_class = "runtimeClassName" in names
        sku = bool({"nodeSelector", "nodeAffinity"} & names and keys & names)
        assert (runtime_class, sku) == (policy["runtimeClass"], policy["sku"]), policy
    assert GOLDEN["policies"]


def test_device_class_selectors_read_as_the_text_did() -> None:
    for expression, gpu in GOLDEN["selectors"].items():
        assert dra.selects_gpu_driver(expression) is gpu, expression
    assert True in GOLDEN["selectors"].values()
