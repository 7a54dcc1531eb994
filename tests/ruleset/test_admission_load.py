"""Loading admission policies as rules (``scanner.ruleset.admission``): what loads,
with which id and level, and what is refused with a reason."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from scanner.cel import cpp_available, get_engine
from scanner.errors import RuleLoadError
from scanner.findings.records import Level
from scanner.ruleset.load import bundled_rules_dir, load_rules

DATA = Path(__file__).resolve().parents[1] / "data" / "admission"

POLICY = """\
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {{name: {name}}}
spec:
  matchConstraints:
    resourceRules:
      - {{apiGroups: [""], apiVersions: ["v1"], operations: ["CREATE"], resources: ["pods"]}}
  validations:
    - expression: {expression}
      message: checked
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def load(*paths: Path, engine: str = "cpp", bundled: bool = False) -> dict[str, object]:
    directories = [bundled_rules_dir(), *paths] if bundled else list(paths)
    return {rule.id: rule for rule in load_rules(directories, get_engine(engine))}


def problems(*paths: Path, engine: str = "cpp", bundled: bool = False) -> str:
    with pytest.raises(RuleLoadError) as refused:
        load(*paths, engine=engine, bundled=bundled)
    return str(refused.value)


def test_a_policy_is_a_rule_named_by_the_policy(tmp_path: Path) -> None:
    rules = load(DATA / "gpu-pool-contract.yaml", bundled=True)
    rule = rules["gpu-pool-contract"]
    assert rule.doc.name == "gpu-pool-contract"  # type: ignore[attr-defined]
    assert rule.doc.level is Level.ERROR  # type: ignore[attr-defined]
    assert rule.doc.source.endswith("gpu-pool-contract.yaml")  # type: ignore[attr-defined]
    assert "PG301" in rules  # loaded next to the built-in rules


def test_a_policy_named_like_a_built_in_rule_is_refused(tmp_path: Path) -> None:
    path = write(
        tmp_path, "p.yaml", POLICY.format(name="privileged-outside-operator", expression="'true'")
    )
    assert "named like rule PG301" in problems(path, bundled=True)


def test_a_policy_with_an_invalid_name_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, "p.yaml", POLICY.format(name="Not_DNS", expression="'true'"))
    assert "metadata.name: must be a DNS-1123 name" in problems(path)


def test_cel_that_does_not_compile_is_refused_with_its_line(tmp_path: Path) -> None:
    path = write(tmp_path, "p.yaml", POLICY.format(name="p", expression="object.spec +"))
    text = problems(path)
    assert f"{path}:9: spec.validations[0].expression: CEL" in text


@pytest.mark.parametrize(
    ("expression", "named"),
    [
        ("resource.Get('v1', 'configmaps', 'ns', 'x') != null", "resource.Get/List"),
        ("http.Get('https://example.com') != null", "http.Get/Post"),
    ],
)
def test_kyverno_functions_poolgate_lacks_are_refused(
    tmp_path: Path, expression: str, named: str
) -> None:
    path = write(tmp_path, "p.yaml", POLICY.format(name="p", expression=f'"{expression}"'))
    assert f"uses {named}" in problems(path)


@pytest.mark.skipif(not cpp_available(), reason="compares with the default engine")
def test_the_fallback_refuses_what_it_cannot_run(tmp_path: Path) -> None:
    expression = '"object.?spec.?hostPID.orValue(false) == false"'
    path = write(tmp_path, "p.yaml", POLICY.format(name="p", expression=expression))
    assert "p" in load(path, engine="cpp")
    text = problems(path, engine="python")
    assert "spec.validations[0].expression" in text and "cpp" in text


def test_bindings_set_the_level(tmp_path: Path) -> None:
    write(tmp_path, "p.yaml", POLICY.format(name="p", expression="'true'"))
    write(
        tmp_path,
        "b.yaml",
        """\
        apiVersion: admissionregistration.k8s.io/v1
        kind: ValidatingAdmissionPolicyBinding
        metadata: {name: b}
        spec: {policyName: p, validationActions: [Warn]}
        """,
    )
    assert load(tmp_path)["p"].doc.level is Level.WARNING  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (
            """\
            apiVersion: admissionregistration.k8s.io/v1
            kind: ValidatingAdmissionPolicyBinding
            metadata: {name: b}
            spec: {policyName: missing, validationActions: [Deny]}
            """,
            "names policy missing, which is not loaded",
        ),
        (
            """\
            apiVersion: v1
            kind: ConfigMap
            metadata: {name: stray}
            """,
            "ConfigMap is not a rule, an admission policy, a binding or the params",
        ),
        (
            """\
            apiVersion: admissionregistration.k8s.io/v1
            kind: ValidatingAdmissionPolicyBinding
            metadata: {name: b}
            spec: {policyName: p, validationActions: [Block]}
            """,
            "spec.validationActions: must list Deny, Warn or Audit",
        ),
    ],
)
def test_what_cannot_be_used_is_a_problem(tmp_path: Path, text: str, reason: str) -> None:
    write(tmp_path, "p.yaml", POLICY.format(name="p", expression="'true'"))
    write(tmp_path, "x.yaml", text)
    assert reason in problems(tmp_path)


def test_a_policy_defined_twice_is_refused(tmp_path: Path) -> None:
    write(tmp_path, "a.yaml", POLICY.format(name="p", expression="'true'"))
    write(tmp_path, "b.yaml", POLICY.format(name="p", expression="'false'"))
    assert "p is already defined in" in problems(tmp_path)


def test_a_kyverno_rule_without_cel_is_refused(tmp_path: Path) -> None:
    """poolgate runs Kyverno's CEL rules; a pattern rule is refused, never passed."""
    path = write(
        tmp_path,
        "cp.yaml",
        """\
        apiVersion: kyverno.io/v1
        kind: ClusterPolicy
        metadata: {name: require-labels}
        spec:
          rules:
            - name: check-for-labels
              match: {any: [{resources: {kinds: [Pod]}}]}
              validate:
                pattern: {metadata: {labels: {app: "?*"}}}
        """,
    )
    assert "spec.rules[0]: has no validate.cel" in problems(path)


def test_kyverno_rules_are_named_policy_slash_rule(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "cp.yaml",
        """\
        apiVersion: kyverno.io/v1
        kind: ClusterPolicy
        metadata: {name: require-labels}
        spec:
          validationFailureAction: Enforce
          rules:
            - name: check-for-labels
              match: {any: [{resources: {kinds: [Pod]}}]}
              validate:
                cel:
                  expressions:
                    - expression: "has(object.metadata.labels)"
        """,
    )
    rules = load(path)
    assert list(rules) == ["require-labels/check-for-labels"]
    assert rules["require-labels/check-for-labels"].doc.level is Level.ERROR  # type: ignore[attr-defined]
