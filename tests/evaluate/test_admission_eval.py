"""Admission policies loaded as rules and evaluated as the API server would
(``scanner.ruleset.admission``, ``scanner.evaluate.admission``): the Kubernetes
documentation's examples and the ``gpu-pool-contract`` floor, unchanged
(``tests/data/admission/``), on both engines where the fallback can run them."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pytest

from scanner.cel import cpp_available
from scanner.errors import RuleLoadError
from scanner.findings.records import Finding, Level, Outcome
from scanner.pipeline import Ruleset, ScanOptions, load_ruleset, scan_paths

DATA = Path(__file__).resolve().parents[1] / "data" / "admission"
DOCS = DATA / "k8s-docs"
ENGINES = ["cpp", "python"] if cpp_available() else ["python"]

DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {name}
  namespace: {namespace}
  labels: {{app: web}}
spec:
  replicas: {replicas}
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      containers:
        - name: web
          image: {image}
"""

NAMESPACE = """\
apiVersion: v1
kind: Namespace
metadata:
  name: {name}
  labels: {{environment: {environment}}}
"""


def ruleset(*paths: Path, engine: str = "cpp") -> Ruleset:
    return load_ruleset(ScanOptions(rule_dirs=list(paths), engine=engine, include_bundled=False))


def scan(tmp_path: Path, rules: Ruleset, *documents: str) -> list[Finding]:
    manifests = tmp_path / "manifests"
    manifests.mkdir(exist_ok=True)
    (manifests / "objects.yaml").write_text("---\n".join(documents))
    report = scan_paths([str(manifests)], rules, repo_root=tmp_path)
    return list(report.findings)


def deployment(
    name: str = "web", namespace: str = "ml", replicas: int = 1, image: str = "x"
) -> str:
    return DEPLOYMENT.format(name=name, namespace=namespace, replicas=replicas, image=image)


def summary(findings: list[Finding]) -> list[tuple[str, str, str, int]]:
    return [(f.rule_id, f.level.name.lower(), f.message, f.location.line) for f in findings]


@pytest.mark.parametrize("engine", ENGINES)
def test_gpu_pool_contract_unbound_denies_gpu_pods_without_runtime_class(
    tmp_path: Path, engine: str
) -> None:
    rules = ruleset(DATA / "gpu-pool-contract.yaml", engine=engine)
    pod = textwrap.dedent(
        """\
        apiVersion: v1
        kind: Pod
        metadata: {name: train, namespace: ml}
        spec:
          containers:
            - name: c
              image: x
              resources: {limits: {nvidia.com/gpu: 1}}
        """
    )
    good = pod.replace(
        "spec:\n", "spec:\n  runtimeClassName: nvidia\n  nodeSelector: {sku: h100}\n"
    )
    good = good.replace("name: train", "name: ok")
    found = scan(tmp_path, rules, pod, good, deployment())
    assert summary(found) == [
        (
            "gpu-pool-contract",
            "error",
            "GPU pods require runtimeClassName=nvidia and nodeSelector.sku (no binding in scope)",
            1,
        )
    ]
    assert found[0].ref is not None and found[0].ref.name == "train"
    assert found[0].outcome is Outcome.FAIL


@pytest.mark.parametrize("engine", ENGINES)
def test_basic_example_binding_judges_only_namespaces_it_selects(
    tmp_path: Path, engine: str
) -> None:
    rules = ruleset(
        DOCS / "basic-example-policy.yaml", DOCS / "basic-example-binding.yaml", engine=engine
    )
    found = scan(
        tmp_path,
        rules,
        NAMESPACE.format(name="test-ns", environment="test"),
        NAMESPACE.format(name="prod-ns", environment="prod"),
        deployment("big", "test-ns", replicas=7),
        deployment("small", "test-ns", replicas=3),
        deployment("big-prod", "prod-ns", replicas=7),
        deployment("elsewhere", "unknown", replicas=7),
    )
    by_name = {f.ref.name: f for f in found if f.ref is not None}
    assert set(by_name) == {"big", "elsewhere"}
    assert by_name["big"].level is Level.ERROR
    assert by_name["big"].message == "failed expression: object.spec.replicas <= 5"
    # The namespace of "elsewhere" is not in scope: its labels, so the binding's
    # namespaceSelector, are unknown -- not verified, never a pass or a violation.
    assert by_name["elsewhere"].level is Level.NOTE
    assert by_name["elsewhere"].outcome is Outcome.ERROR
    assert by_name["elsewhere"].message.startswith("not verified: namespaceSelector")


@pytest.mark.parametrize("engine", ENGINES)
def test_param_binding_reads_the_param_object(tmp_path: Path, engine: str) -> None:
    rules = ruleset(
        DOCS / "policy-with-param.yaml",
        DOCS / "binding-with-param.yaml",
        DOCS / "replicalimit-param.yaml",
        engine=engine,
    )
    found = scan(
        tmp_path,
        rules,
        NAMESPACE.format(name="test-ns", environment="test"),
        deployment("four", "test-ns", replicas=4),
        deployment("three", "test-ns", replicas=3),
    )
    assert [f.ref.name for f in found if f.ref is not None] == ["four"]
    assert found[0].message == (
        "failed expression: object.spec.replicas <= params.maxReplicas (reason: Invalid)"
    )


def test_param_not_found_denies(tmp_path: Path) -> None:
    rules = ruleset(DOCS / "policy-with-param.yaml", DOCS / "binding-with-param.yaml")
    found = scan(
        tmp_path,
        rules,
        NAMESPACE.format(name="test-ns", environment="test"),
        deployment("three", "test-ns", replicas=3),
    )
    assert [f.message for f in found] == [
        "no params found for policy binding with `Deny` parameterNotFoundAction"
    ]


@pytest.mark.parametrize("engine", ENGINES)
def test_evaluation_error_with_failure_policy_fail_is_an_error(tmp_path: Path, engine: str) -> None:
    rules = ruleset(DOCS / "typechecking-multiple-match.yaml", engine=engine)
    found = scan(tmp_path, rules, deployment(replicas=3))
    assert len(found) == 1
    assert found[0].level is Level.ERROR and found[0].outcome is Outcome.ERROR
    assert found[0].message.startswith("would be denied: evaluation error: ")
    assert found[0].message.endswith("(no binding in scope)")


def test_failure_policy_ignore_is_a_note(tmp_path: Path) -> None:
    policy = (DOCS / "typechecking-multiple-match.yaml").read_text()
    policy = policy.replace("  spec: {\n", '  spec: {\n    failurePolicy: "Ignore",\n')
    (tmp_path / "ignore.yaml").write_text(policy)
    found = scan(tmp_path, ruleset(tmp_path / "ignore.yaml"), deployment(replicas=3))
    assert [(f.level, f.outcome) for f in found] == [(Level.NOTE, Outcome.ERROR)]
    assert "failurePolicy Ignore" in found[0].message


@pytest.mark.parametrize("engine", ENGINES)
def test_message_expression_and_audit_annotations(tmp_path: Path, engine: str) -> None:
    rules = ruleset(DOCS / "validating-admission-policy-audit-annotation.yaml", engine=engine)
    found = scan(tmp_path, rules, deployment(replicas=3), deployment("many", replicas=51))
    assert [f.message for f in found] == ["Deployment spec.replicas set to 3 (no binding in scope)"]


@pytest.mark.parametrize("engine", ENGINES)
def test_namespace_object_in_scope_or_not_verified(tmp_path: Path, engine: str) -> None:
    rules = ruleset(DOCS / "image-matches-namespace-environment.policy.yaml", engine=engine)
    found = scan(
        tmp_path,
        rules,
        NAMESPACE.format(name="staging", environment="staging"),
        deployment("good", "staging", image="staging.example.com/app"),
        deployment("bad", "staging", image="prod.example.com/app"),
        deployment("unknown-ns", "nowhere", image="prod.example.com/app"),
        deployment("no-check", "nowhere", image="quay.io/app"),
    )
    by_name = {f.ref.name: f for f in found if f.ref is not None}
    assert set(by_name) == {"bad", "unknown-ns", "no-check"}
    assert by_name["bad"].message == (
        "only staging images are allowed in namespace staging (no binding in scope)"
    )
    assert by_name["bad"].level is Level.ERROR
    for name in ("unknown-ns", "no-check"):
        assert by_name[name].level is Level.NOTE
        assert by_name[name].message.startswith("not verified: ")
        assert "namespace 'nowhere' is not in scope" in by_name[name].message


@pytest.mark.parametrize("engine", ENGINES)
def test_lazy_variables_an_unused_failing_variable_admits(tmp_path: Path, engine: str) -> None:
    (tmp_path / "lazy.yaml").write_text(
        textwrap.dedent(
            """\
            apiVersion: admissionregistration.k8s.io/v1
            kind: ValidatingAdmissionPolicy
            metadata: {name: lazy}
            spec:
              matchConstraints:
                resourceRules:
                  - {apiGroups: ["apps"], apiVersions: ["v1"], operations: ["CREATE"], resources: ["deployments"]}
              variables:
                - {name: broken, expression: "object.spec.nothing.here"}
                - {name: replicas, expression: "object.spec.replicas"}
              validations:
                - expression: "variables.replicas < 5"
                  messageExpression: "'too many: ' + string(variables.broken)"
                  message: "too many replicas"
            """
        )
    )
    found = scan(
        tmp_path,
        ruleset(tmp_path / "lazy.yaml", engine=engine),
        deployment(replicas=1),
        deployment("big", replicas=9),
    )
    # The failing variable is read only by the message expression: the message falls back.
    assert [f.message for f in found] == ["too many replicas (no binding in scope)"]


def test_user_info_reads_are_not_verified(tmp_path: Path) -> None:
    """The documentation's match-conditions example does not compile (``startWith``):
    refused at load, as the API server refuses it. Fixed, its ``request.userInfo``
    condition makes every result not verified."""
    with pytest.raises(RuleLoadError) as refused:
        ruleset(DOCS / "validating-admission-policy-match-conditions.yaml")
    assert "startWith" in str(refused.value)
    fixed = (DOCS / "validating-admission-policy-match-conditions.yaml").read_text()
    (tmp_path / "fixed.yaml").write_text(fixed.replace("startWith", "startsWith"))
    found = scan(tmp_path, ruleset(tmp_path / "fixed.yaml"), deployment())
    assert [(f.level, f.outcome) for f in found] == [(Level.NOTE, Outcome.ERROR)]
    assert "request.userInfo" in found[0].message


def test_warn_and_audit_bindings(tmp_path: Path) -> None:
    shutil.copy(DOCS / "basic-example-policy.yaml", tmp_path / "policy.yaml")
    binding = (DOCS / "basic-example-binding.yaml").read_text()
    (tmp_path / "warn.yaml").write_text(binding.replace('"Deny"', '"Warn", "Audit"'))
    rules = ruleset(tmp_path / "policy.yaml", tmp_path / "warn.yaml")
    found = scan(
        tmp_path,
        rules,
        NAMESPACE.format(name="t", environment="test"),
        deployment("big", "t", replicas=9),
    )
    assert [(f.level, f.message) for f in found] == [
        (Level.WARNING, "failed expression: object.spec.replicas <= 5")
    ]


def test_namespace_selector_sees_the_name_label_the_api_server_sets(tmp_path: Path) -> None:
    shutil.copy(DOCS / "basic-example-policy.yaml", tmp_path / "policy.yaml")
    binding = (DOCS / "basic-example-binding.yaml").read_text()
    binding = binding.replace('environment: "test"', '"kubernetes.io/metadata.name": "team-a"')
    (tmp_path / "binding.yaml").write_text(binding)
    rules = ruleset(tmp_path / "policy.yaml", tmp_path / "binding.yaml")
    found = scan(
        tmp_path,
        rules,
        NAMESPACE.format(name="team-a", environment="prod"),
        NAMESPACE.format(name="team-b", environment="prod"),
        deployment("a", "team-a", replicas=9),
        deployment("b", "team-b", replicas=9),
    )
    assert [f.ref.name for f in found if f.ref is not None] == ["a"]


def test_a_binding_excludes_resources(tmp_path: Path) -> None:
    shutil.copy(DOCS / "basic-example-policy.yaml", tmp_path / "policy.yaml")
    (tmp_path / "binding.yaml").write_text(
        textwrap.dedent(
            """\
            apiVersion: admissionregistration.k8s.io/v1
            kind: ValidatingAdmissionPolicyBinding
            metadata: {name: all-but-web}
            spec:
              policyName: demo-policy.example.com
              validationActions: [Deny]
              matchResources:
                excludeResourceRules:
                  - apiGroups: ["apps"]
                    apiVersions: ["v1"]
                    operations: ["*"]
                    resources: ["deployments"]
                    resourceNames: ["web"]
            """
        )
    )
    rules = ruleset(tmp_path / "policy.yaml", tmp_path / "binding.yaml")
    found = scan(tmp_path, rules, deployment("web", replicas=9), deployment("api", replicas=9))
    assert [f.ref.name for f in found if f.ref is not None] == ["api"]
