"""The admission preview (PG606) through the CLI: the platform's own admission floor,
scanned or given as context, run on the workloads of the same scan."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from cli_run import ROOT, poolgate

FLOOR = (ROOT / "tests" / "data" / "admission" / "gpu-pool-contract.yaml").read_text()
DENIED = (
    "pods of Deployment trainer would be denied at admission by gpu-pool-contract: "
    "GPU pods require runtimeClassName=nvidia and nodeSelector.sku"
)


def _binding(actions: str = "[Deny]", name: str = "gpu-pool-contract") -> str:
    return f"""\
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: {name}-binding
spec:
  policyName: {name}
  validationActions: {actions}
"""


def _deployment(runtime_class: str = "") -> str:
    line = f"      runtimeClassName: {runtime_class}\n" if runtime_class else ""
    return f"""\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: trainer
  namespace: ml
spec:
  selector:
    matchLabels: {{app: trainer}}
  template:
    metadata:
      labels: {{app: trainer}}
    spec:
{line}      nodeSelector: {{sku: h100}}
      containers:
        - name: main
          image: trainer:1
          resources:
            limits: {{nvidia.com/gpu: 1}}
"""


POD = """\
apiVersion: v1
kind: Pod
metadata:
  name: notebook
  namespace: ml
spec:
  containers:
    - name: main
      image: notebook:1
      resources:
        limits: {nvidia.com/gpu: 1}
"""


def _scan(*args: str, cwd: Path) -> tuple[int, dict[str, Any]]:
    result = poolgate("scan", *args, "--format", "json", cwd=cwd)
    assert result.returncode in (0, 1, 3), result.stderr
    return result.returncode, json.loads(result.stdout)


def _previews(report: dict[str, Any]) -> list[dict[str, Any]]:
    return [f for f in report["findings"] if f["ruleId"] == "PG606"]


def _write(directory: Path, **files: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (directory / f"{name}.yaml").write_text(text)
    return directory


def test_bound_floor_denies_the_pods_of_a_deployment_without_runtime_class(
    tmp_path: Path,
) -> None:
    _write(tmp_path / "repo", floor=FLOOR, binding=_binding(), app=_deployment())
    code, report = _scan("repo", cwd=tmp_path)
    assert code == 1
    [finding] = _previews(report)
    assert finding["level"] == "error"
    assert finding["message"] == DENIED
    assert finding["location"]["uri"].endswith("app.yaml")
    assert (finding["location"]["line"], finding["location"]["path"]) == (9, "spec.template")
    # The scanned policy is not a rule of the run: only PG606 speaks for it.
    assert not any(f["ruleId"] == "gpu-pool-contract" for f in report["findings"])


def test_the_near_miss_that_meets_the_floor_passes(tmp_path: Path) -> None:
    _write(tmp_path / "repo", floor=FLOOR, binding=_binding(), app=_deployment("nvidia"))
    _, report = _scan("repo", cwd=tmp_path)
    assert _previews(report) == []
    assert report["notifications"] == []


def test_an_unbound_policy_admits_everything(tmp_path: Path) -> None:
    other = _binding(name="some-other-policy")  # names a policy not in scope
    _write(tmp_path / "repo", floor=FLOOR, other=other, app=_deployment())
    _, report = _scan("repo", cwd=tmp_path)
    assert _previews(report) == []
    assert report["notifications"] == []


def test_a_bare_pod_would_be_denied(tmp_path: Path) -> None:
    _write(tmp_path / "repo", floor=FLOOR, binding=_binding(), pod=POD)
    _, report = _scan("repo", cwd=tmp_path)
    [finding] = _previews(report)
    assert finding["message"].startswith(
        "Pod notebook would be denied at admission by gpu-pool-contract: "
    )
    assert finding["location"]["line"] == 1


@pytest.mark.parametrize(
    ("actions", "level", "verb"),
    [
        ("[Warn]", "warning", "would get an admission warning from"),
        ("[Audit]", "note", "would be audited at admission by"),
    ],
)
def test_the_binding_action_is_the_level(
    tmp_path: Path, actions: str, level: str, verb: str
) -> None:
    _write(tmp_path / "repo", floor=FLOOR, binding=_binding(actions), app=_deployment())
    _, report = _scan("repo", cwd=tmp_path)
    [finding] = _previews(report)
    assert finding["level"] == level
    assert f"pods of Deployment trainer {verb} gpu-pool-contract: " in finding["message"]


def test_the_floor_given_as_context_judges_the_scanned_workloads(tmp_path: Path) -> None:
    _write(tmp_path / "cluster", floor=FLOOR, binding=_binding())
    _write(tmp_path / "repo", app=_deployment())
    code, report = _scan("repo", "--context-path", "cluster", cwd=tmp_path)
    assert code == 1
    [finding] = _previews(report)
    assert finding["message"] == DENIED
    assert finding["location"]["uri"].endswith("app.yaml")


def test_config_and_disable_turn_the_preview_off(tmp_path: Path) -> None:
    repo = _write(tmp_path / "repo", floor=FLOOR, binding=_binding(), app=_deployment())
    _, report = _scan("repo", "--disable", "admission-preview", cwd=tmp_path)
    assert _previews(report) == []
    (repo / ".poolgate.yaml").write_text(
        "apiVersion: poolgate.io/v1alpha1\nkind: GpuPoolGate\nmetadata: {name: x}\n"
        "spec:\n  admissionPreview: false\n"
    )
    _, report = _scan(".", cwd=repo)
    assert _previews(report) == []
    (repo / ".poolgate.yaml").write_text(
        "apiVersion: poolgate.io/v1alpha1\nkind: GpuPoolGate\nmetadata: {name: x}\n"
        "spec:\n  admissionPreview: true\n"
    )
    _, report = _scan(".", cwd=repo)
    assert [f["message"] for f in _previews(report)] == [DENIED]


def test_a_non_boolean_switch_is_a_config_error(tmp_path: Path) -> None:
    repo = _write(tmp_path / "repo", app=_deployment())
    (repo / ".poolgate.yaml").write_text(
        "apiVersion: poolgate.io/v1alpha1\nkind: GpuPoolGate\nmetadata: {name: x}\n"
        "spec:\n  admissionPreview: sometimes\n"
    )
    result = poolgate("scan", ".", cwd=repo)
    assert result.returncode == 2
    assert "admissionPreview" in result.stderr


def test_the_audit_previews_the_live_objects(tmp_path: Path) -> None:
    """Today's bound policies run on the live workloads a snapshot holds."""
    items = [
        yaml.safe_load(text)
        for text in (
            FLOOR,
            _binding(),
            _deployment(),
            _deployment("nvidia").replace("name: trainer\n", "name: server\n", 1),
        )
    ]
    snapshot = tmp_path / "snapshot.json"
    snapshot.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    result = poolgate("audit", "--snapshot", str(snapshot), "--format", "json", cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    [finding] = _previews(json.loads(result.stdout))
    assert finding["message"] == DENIED
    assert finding["object"]["name"] == "trainer"
    assert finding["location"]["path"] == "spec.template"


def test_a_container_without_resources_is_judged_as_the_api_server_decodes_it(
    tmp_path: Path,
) -> None:
    """The API server's Pod always has ``resources`` (a struct): ``has(c.resources.limits)``
    is false there, not an evaluation error that would deny the pod."""
    floor = FLOOR.replace(
        "  validations:",
        "  matchConditions:\n    - name: gpu\n      expression: >-\n"
        "        object.spec.containers.exists(c, has(c.resources.limits))\n"
        "  validations:",
    )
    cpu = POD.replace("      resources:\n        limits: {nvidia.com/gpu: 1}\n", "")
    _write(tmp_path / "repo", floor=floor, binding=_binding(), pod=cpu)
    _, report = _scan("repo", cwd=tmp_path)
    assert _previews(report) == []
    _write(tmp_path / "repo", pod=POD)  # the GPU pod still meets the condition
    _, report = _scan("repo", cwd=tmp_path)
    assert [f["level"] for f in _previews(report)] == ["error"]
