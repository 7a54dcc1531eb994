"""``poolgate admission export``: what it writes, that it compiles in the Kubernetes CEL
environment, that PG605 counts it as the admission floor, and what it refuses."""

from __future__ import annotations

import io
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml
from cli_run import poolgate

from scanner.cel import cpp_available, get_engine
from scanner.errors import RuleLoadError
from scanner.pipeline import Ruleset, ScanOptions, load_ruleset, scan_paths
from scanner.ruleset import export

pytestmark = pytest.mark.skipif(not cpp_available(), reason="cel-expr-python not installed")

GPU_DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: train, namespace: ml}
spec:
  selector: {matchLabels: {app: train}}
  template:
    metadata: {labels: {app: train}}
    spec:
      containers:
        - name: c
          image: x
          resources: {limits: {nvidia.com/gpu: 1}}
"""


@cache
def ruleset() -> Ruleset:
    return load_ruleset(ScanOptions(engine="cpp", enable_all=True))


def exported(actions: tuple[str, ...] = ("Deny",)) -> export.Export:
    return export.export(ruleset().rules, ruleset().config, actions)


def write_export(path: Path, result: export.Export) -> Path:
    with path.open("w", encoding="utf-8") as handle:
        export.render(result, handle)
    return path


def test_the_required_rules_are_exported_and_the_rest_listed_with_reasons() -> None:
    result = exported()
    assert {"PG103", "PG104", "PG301", "PG302", "PG501"} <= set(result.exported)
    skipped = {item.rule_id: item.reason for item in result.skipped}
    assert "node pools" in skipped["PG105"]
    assert "DeviceClass" not in skipped["PG105"]
    assert "signature-verification" in skipped["PG502"]
    assert set(skipped).isdisjoint(result.exported)


def test_every_expression_compiles_in_the_kubernetes_environment() -> None:
    assert export.check(exported(), get_engine("cpp", export.VARIABLES)) == []


def test_an_expression_that_does_not_compile_is_reported_with_its_rule() -> None:
    result = exported()
    broken = [dict(obj) for obj in result.objects]
    for obj in broken:
        if obj["kind"] == "ValidatingAdmissionPolicy":
            obj["spec"] = {
                **obj["spec"],
                "validations": [{"expression": "object.(", "message": "m"}],
            }
            break
    problems = export.check(
        export.Export(tuple(broken), (), ()), get_engine("cpp", export.VARIABLES)
    )
    assert len(problems) == 1 and "admission validations[0].expression: CEL" in problems[0]


def test_bindings_deny_by_default_and_dry_run_with_warn_audit() -> None:
    def actions(result: export.Export) -> dict[str, list[str]]:
        return {
            obj["metadata"]["name"]: obj["spec"]["validationActions"]
            for obj in result.objects
            if obj["kind"] == "ValidatingAdmissionPolicyBinding"
        }

    deny = actions(exported())
    assert deny["poolgate-gpu-workload-runtimeclass"] == ["Deny"]
    # PG301 reports notes in kube-system: bound there with Audit only.
    assert deny["poolgate-privileged-outside-operator-system"] == ["Audit"]
    dry = actions(exported(("Warn", "Audit")))
    assert dry["poolgate-gpu-workload-runtimeclass"] == ["Warn", "Audit"]
    assert "Deny" not in {action for values in dry.values() for action in values}


def test_config_values_are_params_in_one_config_map() -> None:
    result = exported()
    config_map = result.objects[0]
    assert config_map["kind"] == "ConfigMap"
    assert config_map["metadata"] == {
        "name": export.PARAMS_NAME,
        "namespace": "gpu-operator",
        "labels": export.MANAGED,
    }
    assert config_map["data"]["skuLabels"].split(",")[:2] == [
        "sku",
        "cloud.google.com/gke-accelerator",
    ]
    assert config_map["data"]["operatorNamespaces"] == "gpu-operator,nvidia-gpu-operator"
    for obj in result.objects[1:]:
        if obj["kind"] == "ValidatingAdmissionPolicy":
            assert obj["spec"]["paramKind"] == {"apiVersion": "v1", "kind": "ConfigMap"}
        else:
            assert obj["spec"]["paramRef"]["name"] == export.PARAMS_NAME
            assert obj["spec"]["paramRef"]["parameterNotFoundAction"] == "Deny"


def pg605(tmp_path: Path, context: list[str]) -> list[Any]:
    workload = tmp_path / "train.yaml"
    workload.write_text(GPU_DEPLOYMENT, encoding="utf-8")
    report = scan_paths([str(workload)], ruleset(), repo_root=tmp_path, context=context)
    return [finding for finding in report.findings if finding.rule_id == "PG605"]


def test_the_export_as_context_satisfies_the_admission_floor(tmp_path: Path) -> None:
    enforced = write_export(tmp_path / "admission.yaml", exported())
    assert pg605(tmp_path, [str(enforced)]) == []


def test_a_dry_run_export_does_not_satisfy_the_admission_floor(tmp_path: Path) -> None:
    dry = write_export(tmp_path / "admission.yaml", exported(("Warn", "Audit")))
    (finding,) = pg605(tmp_path, [str(dry)])
    assert "not Deny" in finding.message


def test_the_sku_label_counts_only_with_its_params_in_scope(tmp_path: Path) -> None:
    # Without the ConfigMap the SKU label the policy reads is unknown: PG605 says so.
    without = [obj for obj in exported().objects if obj["kind"] != "ConfigMap"]
    path = tmp_path / "admission.yaml"
    path.write_text(yaml.safe_dump_all(without), encoding="utf-8")
    (finding,) = pg605(tmp_path, [str(path)])
    assert "SKU/pool node selection" in finding.message


def test_the_command_writes_valid_deterministic_yaml(tmp_path: Path) -> None:
    first = poolgate("admission", "export", "-o", str(tmp_path / "a.yaml"), cwd=tmp_path)
    second = poolgate("admission", "export", "-o", str(tmp_path / "b.yaml"), cwd=tmp_path)
    assert first.returncode == 0 and second.returncode == 0, first.stderr
    text = (tmp_path / "a.yaml").read_text("utf-8")
    assert text == (tmp_path / "b.yaml").read_text("utf-8")
    kinds = [obj["kind"] for obj in yaml.safe_load_all(text)]
    assert kinds[0] == "ConfigMap" and kinds.count("ValidatingAdmissionPolicy") >= 5
    assert "#   PG105: needs the node pools" in text
    assert "not exported: PG105: needs the node pools" in first.stderr
    assert "not exported: PG603: reads live state" in first.stderr  # audit-only rules too


def test_the_command_takes_the_config(tmp_path: Path) -> None:
    config = tmp_path / "poolgate.yaml"
    config.write_text(
        "apiVersion: poolgate.io/v1alpha1\nkind: GpuPoolGate\nmetadata: {name: x}\n"
        "spec:\n  skuLabel: node.example.com/sku\n  operatorNamespaces: [platform-gpu]\n",
        encoding="utf-8",
    )
    run = poolgate("admission", "export", "--config", str(config), cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    config_map = next(yaml.safe_load_all(run.stdout))
    assert config_map["metadata"]["namespace"] == "platform-gpu"
    assert config_map["data"]["skuLabels"].split(",")[0] == "node.example.com/sku"


@pytest.mark.parametrize(
    ("actions", "message"),
    [
        ("Deny,Warn", "cannot be combined"),
        ("Block", "use Deny, Warn, Audit"),
        ("Audit,Audit", "twice"),
    ],
)
def test_bad_actions_are_a_usage_error(tmp_path: Path, actions: str, message: str) -> None:
    run = poolgate("admission", "export", "--actions", actions, "-o", "out.yaml", cwd=tmp_path)
    assert run.returncode == 2 and message in run.stderr
    assert not (tmp_path / "out.yaml").exists()


def test_a_rule_whose_admission_cel_does_not_compile_fails_the_export(tmp_path: Path) -> None:
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "ACME001-x.yaml").write_text(
        "id: ACME001\nname: acme-x\nlevel: error\nsummary: s\ndescription: d\n"
        "remediation: r.\nsubject: workload\nviolations: '[]'\n"
        "admission:\n  validations:\n    - expression: 'variables.spec.('\n      message: m\n",
        encoding="utf-8",
    )
    run = poolgate("admission", "export", "--rules", str(rules), "-o", "out.yaml", cwd=tmp_path)
    assert run.returncode == 2
    assert "ACME001: admission validations[0].expression: CEL" in run.stderr
    assert not (tmp_path / "out.yaml").exists()


@pytest.mark.parametrize(
    "section",
    [
        "admission: {}\n",
        "admission:\n  notExported: joins\n  validations: [{expression: 'true'}]\n",
        "admission:\n  validations: [{expression: 'true', path: spec}]\n",
    ],
)
def test_the_rule_schema_checks_the_admission_section(tmp_path: Path, section: str) -> None:
    (tmp_path / "ACME001-x.yaml").write_text(
        "id: ACME001\nname: acme-x\nlevel: error\nsummary: s\ndescription: d\n"
        "remediation: r.\nsubject: workload\nviolations: '[]'\n" + section,
        encoding="utf-8",
    )
    with pytest.raises(RuleLoadError) as raised:
        load_ruleset(ScanOptions(engine="cpp", rule_dirs=[tmp_path], include_bundled=False))
    assert "admission" in "\n".join(raised.value.problems)


@pytest.mark.parametrize(
    ("resource", "count"),
    [
        ("nvidia.com/gpu", "1"),
        ("nvidia.com/gpu.shared", "2"),
        ("nvidia.com/mig-1g.10gb", "1"),
        ("nvidia.com/mig-2g.48gb.me.all", "1"),
        ("nvidia.com/gpu", "0"),
        ("nvidia.com/gpus", "1"),
        ("nvidia.com/mig-", "1"),
        ("example.com/nvidia.com/gpu", "1"),
        ("amd.com/gpu", "1"),
    ],
)
def test_the_gpu_variable_agrees_with_the_model(resource: str, count: str) -> None:
    from admission_harness import evaluate

    from scanner.model.quantity import is_zero
    from scanner.model.workloads import GPU_RESOURCE

    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ml"},
        "spec": {
            "containers": [{"name": "c", "image": "x", "resources": {"limits": {resource: count}}}]
        },
    }
    result = exported()
    policy = next(
        obj
        for obj in result.objects
        if obj.get("metadata", {}).get("annotations", {}).get("poolgate.io/rule") == "PG103"
    )
    params = result.objects[0]
    verdict = evaluate(policy, [], params, pod)
    model_gpu = bool(GPU_RESOURCE.match(resource)) and not is_zero(count)
    assert bool(verdict.messages) == model_gpu


PRIVILEGED_POD: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "debug", "namespace": "ml"},
    "spec": {"containers": [{"name": "c", "image": "x", "securityContext": {"privileged": True}}]},
}


def pg301_policy() -> tuple[dict[str, Any], dict[str, Any]]:
    result = exported()
    policy = next(
        obj
        for obj in result.objects
        if obj.get("metadata", {}).get("annotations", {}).get("poolgate.io/rule") == "PG301"
    )
    return policy, result.objects[0]


def test_an_update_that_leaves_the_pod_template_alone_is_not_judged() -> None:
    from admission_harness import evaluate

    policy, params = pg301_policy()
    relabelled = {
        **PRIVILEGED_POD,
        "metadata": {**PRIVILEGED_POD["metadata"], "labels": {"a": "b"}},
    }
    assert evaluate(policy, [], params, PRIVILEGED_POD).messages  # its CREATE is denied
    # A controller labelling the pod, or removing a finalizer, after the policy came in.
    assert not evaluate(policy, [], params, relabelled, old=PRIVILEGED_POD).matched


def test_an_update_that_changes_the_pod_template_is_judged() -> None:
    from admission_harness import evaluate

    policy, params = pg301_policy()
    plain = {**PRIVILEGED_POD, "spec": {"containers": [{"name": "c", "image": "x"}]}}
    # kubectl debug --profile=sysadmin: a privileged ephemeral container added to a pod.
    debugged = {
        **plain,
        "spec": {
            **plain["spec"],
            "ephemeralContainers": [
                {"name": "debugger", "image": "busybox", "securityContext": {"privileged": True}}
            ],
        },
    }
    verdict = evaluate(policy, [], params, debugged, old=plain)
    assert verdict.matched and "debugger" in verdict.messages[0]
    resources = policy["spec"]["matchConstraints"]["resourceRules"][0]["resources"]
    assert "pods/ephemeralcontainers" in resources


def test_every_object_is_a_valid_kubernetes_object() -> None:
    # The official client's models know every field of admissionregistration.k8s.io/v1:
    # an object read into its model and written back is unchanged only when it holds
    # no field the API does not have; the client also checks required fields and enums.
    pytest.importorskip("kubernetes")
    from kubernetes.client import ApiClient

    client = ApiClient()
    models = {
        "ConfigMap": "V1ConfigMap",
        "ValidatingAdmissionPolicy": "V1ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding": "V1ValidatingAdmissionPolicyBinding",
    }
    out = io.StringIO()
    export.render(exported(), out)
    for obj in yaml.safe_load_all(out.getvalue()):
        assert obj["apiVersion"] in ("v1", export.API_VERSION)
        model = client._ApiClient__deserialize(obj, models[obj["kind"]])  # type: ignore[attr-defined]
        assert client.sanitize_for_serialization(model) == obj


def test_a_rule_variable_may_not_shadow_the_exports_own(tmp_path: Path) -> None:
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "ACME001-x.yaml").write_text(
        "id: ACME001\nname: acme-x\nlevel: error\nsummary: s\ndescription: d\n"
        "remediation: r.\nsubject: workload\nviolations: '[]'\n"
        "admission:\n  variables:\n    - {name: gpu, expression: 'false'}\n"
        "  validations:\n    - expression: '!variables.gpu'\n",
        encoding="utf-8",
    )
    run = poolgate("admission", "export", "--rules", str(rules), cwd=tmp_path)
    assert run.returncode == 2
    assert "ACME001: admission variables: gpu is defined twice" in run.stderr
    assert run.stdout == ""


def test_the_portable_engine_loads_the_rules_and_the_policies_are_the_same(tmp_path: Path) -> None:
    default = poolgate("admission", "export", cwd=tmp_path)
    portable = poolgate("admission", "export", "--cel-engine", "python", cwd=tmp_path)
    assert portable.returncode == 0, portable.stderr
    assert portable.stdout == default.stdout
