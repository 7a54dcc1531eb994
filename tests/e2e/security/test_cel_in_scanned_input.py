"""CEL written by the author of the scanned manifests (ValidatingAdmissionPolicy
validations, DeviceClass selectors) is read through poolgate's parser, never run:
text in a comment or a string does not count as a check, and hostile CEL (nesting,
size, garbage) costs bounded work and never crashes the scan."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from cli_run import ROOT, poolgate

FLOOR = (ROOT / "fixtures" / "rules" / "PG605" / "pass-enforced.yaml").read_text()
RUNTIME_CLASS = "has(object.spec.runtimeClassName) && object.spec.runtimeClassName == 'nvidia'"
SKU = "has(object.spec.nodeSelector) && 'sku' in object.spec.nodeSelector"


def _audit(tmp_path: Path, text: str) -> list[str]:
    """The rules that report on ``text``'s objects, audited as a kubectl dump."""
    dump = tmp_path / "dump.json"
    dump.write_text(
        json.dumps({"apiVersion": "v1", "kind": "List", "items": list(yaml.safe_load_all(text))})
    )
    result = poolgate("audit", "--snapshot", str(dump), "--format", "json", "--cel-engine", "cpp")
    assert result.returncode in (0, 1), result.stderr
    assert "Traceback" not in result.stderr
    return [finding["ruleId"] for finding in json.loads(result.stdout)["findings"]]


def test_the_fixture_policy_holds_gpu_pods_to_the_floor(tmp_path: Path) -> None:
    assert "PG605" not in _audit(tmp_path, FLOOR)


def test_a_floor_named_only_in_a_comment_or_a_string_does_not_count(tmp_path: Path) -> None:
    """A policy that admits every pod, naming runtimeClassName or the SKU key only in
    a comment or inside a string, checks nothing: PG605 reports the cluster (a search
    of the text took such a policy for the floor)."""
    commented = FLOOR.replace(json.dumps(RUNTIME_CLASS), json.dumps(f"true // {RUNTIME_CLASS}"))
    quoted = FLOOR.replace(json.dumps(SKU), json.dumps(f"{json.dumps(SKU)} != ''"))
    assert commented != FLOOR and quoted != FLOOR
    assert "PG605" in _audit(tmp_path, commented)
    assert "PG605" in _audit(tmp_path, quoted)


DEVICE_CLASS = """\
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata:
  name: {name}
spec:
  selectors:
    - cel:
        expression: {expression}
---
"""

POLICY = """\
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: {name}
spec:
  matchConstraints:
    resourceRules:
      - {{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}}
  validations:
    - expression: {expression}
---
"""

HOSTILE = {
    "parentheses": "(" * 10_000 + "device.driver == 'gpu.nvidia.com'" + ")" * 10_000,
    "lists": "[" * 10_000 + "]" * 10_000,
    "selections": "device" + ".driver" * 10_000,
    "long": "device.driver == '" + "x" * 150_000 + "'",
    "unterminated": "device.driver == 'gpu.nvidia.com",
    "comment": "// device.driver == 'gpu.nvidia.com'\nfalse",
    "control": "device.driver == '\\u0000' \x0b",
}


def _claiming(pod: str, classes: list[str]) -> str:
    """ResourceClaimTemplates for ``classes`` and a Pod that claims each of them: the pod
    uses GPUs only if one of its classes selects the GPU driver."""
    text = "".join(
        "apiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\n"
        f"metadata: {{name: {name}, namespace: ml}}\n"
        "spec: {spec: {devices: {requests: "
        f"[{{name: r, exactly: {{deviceClassName: {name}}}}}]}}}}}}\n---\n"
        for name in classes
    )
    claims = "".join(
        f"  - {{name: {name}, resourceClaimTemplateName: {name}}}\n" for name in classes
    )
    return text + (
        f"apiVersion: v1\nkind: Pod\nmetadata: {{name: {pod}, namespace: ml}}\nspec:\n"
        f"  resourceClaims:\n{claims}  containers: [{{name: c, image: busybox}}]\n---\n"
    )


def test_hostile_cel_in_scanned_objects_is_bounded_and_recognises_nothing(
    tmp_path: Path,
) -> None:
    """Each hostile expression as a DeviceClass selector and as a policy validation; a
    plain GPU class beside them. The scan ends normally; only the plain class makes
    its pod a GPU workload (PG103: a GPU Pod without runtimeClassName)."""
    text = DEVICE_CLASS.format(
        name="plain", expression=json.dumps('device.driver == "gpu.nvidia.com"')
    )
    for name, expression in HOSTILE.items():
        text += DEVICE_CLASS.format(name=name, expression=json.dumps(expression))
        text += POLICY.format(name=name, expression=json.dumps(expression))
    text += _claiming("control", ["plain"]) + _claiming("hostile", list(HOSTILE))
    manifest = tmp_path / "hostile.yaml"
    manifest.write_text(text)
    result = poolgate("scan", str(manifest), "--format", "json", "--cel-engine", "cpp", timeout=120)
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    findings = json.loads(result.stdout)["findings"]
    gpu_pods = {f["message"].split()[2] for f in findings if f["ruleId"] == "PG103"}
    assert gpu_pods == {"control"}
