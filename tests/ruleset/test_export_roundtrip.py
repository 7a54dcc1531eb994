"""The exported policies give the built-in rules' verdicts on the rules' own fixtures.

Each exported ValidatingAdmissionPolicy is evaluated (``admission_harness``) on every
object of its rule's fixtures (fixtures/rules/<ID>/fire*.yaml and pass*.yaml) that
its matchConstraints select. The rule's own findings on the file decide what the
policy must do with each object: a finding at error or warning level -> denied (a
Deny binding), at note level -> audited only, none -> admitted. Fixture files whose
verdict rests on facts admission cannot see are exempt, with the reason
(``EXEMPT``); an exemption that is no longer needed fails the test too.
"""

from __future__ import annotations

import io
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml
from admission_harness import evaluate

from scanner.cel import cpp_available
from scanner.findings.records import Level
from scanner.pipeline import Ruleset, ScanOptions, load_ruleset
from scanner.pipeline.fixtures import check_file
from scanner.ruleset import export

pytestmark = pytest.mark.skipif(not cpp_available(), reason="cel-expr-python not installed")

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures" / "rules"

EXEMPT: dict[str, str] = {
    # Pod templates in CRDs: the export matches Pods and the built-in controllers; the
    # Pods a Kubeflow, Ray, KServe or JobSet operator creates are checked as Pods.
    "PG103/fire-crd-inferenceservice.yaml": "CRD pod template (the operator's Pods are checked)",
    "PG103/fire-crd-pytorchjob.yaml": "CRD pod template (the operator's Pods are checked)",
    "PG103/fire-crd-raycluster.yaml": "CRD pod template (the operator's Pods are checked)",
    "PG301/fire-crd-jobset.yaml": "CRD pod template (the operator's Pods are checked)",
    "PG301/fire-crd-pytorchjob.yaml": "CRD pod template (the operator's Pods are checked)",
    "PG301/fire-crd-raycluster.yaml": "CRD pod template (the operator's Pods are checked)",
    "PG501/fire-crd-inferenceservice.yaml": "CRD pod template (the operator's Pods are checked)",
    "PG501/fire-crd-jobset.yaml": "CRD pod template (the operator's Pods are checked)",
    "PG104/fire-near-miss-sku-labels.yaml": (
        "one InferenceService among its objects (the operator's Pods are checked)"
    ),
    # Cross-object facts.
    "PG103/fire-crd-dra-claim-template.yaml": (
        "GPU through a DRA ResourceClaimTemplate: the claim's DeviceClass is another object"
    ),
    "PG103/fire-dra-v1alpha2-resource-class.yaml": (
        "GPU through DRA claims: their ResourceClass is another object"
    ),
}


@cache
def ruleset() -> Ruleset:
    return load_ruleset(ScanOptions(engine="cpp", enable_all=True))


@cache
def exported() -> export.Export:
    rules = ruleset()
    return export.export(rules.rules, rules.config)


@cache
def written() -> tuple[dict[str, Any], ...]:
    """The objects as the command writes them, read back: what is tested is the YAML."""
    out = io.StringIO()
    export.render(exported(), out)
    return tuple(yaml.safe_load_all(out.getvalue()))


def objects_of(kind: str) -> list[dict[str, Any]]:
    return [obj for obj in written() if obj["kind"] == kind]


def policy_of(rule_id: str) -> dict[str, Any]:
    for obj in objects_of("ValidatingAdmissionPolicy"):
        if obj["metadata"]["annotations"]["poolgate.io/rule"] == rule_id:
            return obj
    raise AssertionError(f"{rule_id} is not exported")


def cases() -> list[Any]:
    return [
        pytest.param(path, id=f"{path.parent.name}/{path.name}")
        for rule_id in exported().exported
        for path in sorted((FIXTURES / rule_id).glob("*.yaml"))
    ]


def expected(path: Path, rule_id: str) -> dict[tuple[str, str, str], str]:
    """(kind, namespace, name) -> what admission must do, from the rule's findings."""
    result = check_file(path, rule_id, ruleset(), expect_findings=path.name.startswith("fire"))
    verdicts: dict[tuple[str, str, str], str] = {}
    for finding in result.findings:
        if finding.rule_id != rule_id or finding.ref is None:
            continue
        ref = finding.ref
        key = (ref.kind, ref.namespace or "default", ref.name)
        verdict = "audit" if finding.level == Level.NOTE else "deny"
        if verdicts.get(key) != "deny":
            verdicts[key] = verdict
    return verdicts


@pytest.mark.parametrize("path", cases())
def test_exported_policy_gives_the_rules_verdict(path: Path) -> None:
    rule_id = path.parent.name
    policy = policy_of(rule_id)
    bindings = objects_of("ValidatingAdmissionPolicyBinding")
    params = objects_of("ConfigMap")[0]
    want = expected(path, rule_id)
    wrong = []
    for obj in yaml.safe_load_all(path.read_text("utf-8")):
        if not isinstance(obj, dict) or "metadata" not in obj:
            continue
        verdict = evaluate(policy, bindings, params, obj)
        meta = obj["metadata"]
        key = (obj["kind"], meta.get("namespace") or "default", meta["name"])
        if not verdict.matched:
            if key in want:
                wrong.append(f"{key}: not matched by the policy, rule: {want[key]}")
            continue
        if verdict.outcome != want.get(key, "admit"):
            wrong.append(
                f"{key}: {verdict.outcome} {verdict.messages}, rule: {want.get(key, 'admit')}"
            )
    name = f"{rule_id}/{path.name}"
    if name in EXEMPT:
        assert wrong, f"{name} is exempt ({EXEMPT[name]}) but the policy agrees: drop the exemption"
        return
    assert not wrong, "\n".join(wrong)


def test_every_exemption_names_a_fixture() -> None:
    for name in EXEMPT:
        assert (FIXTURES / name).is_file(), name
