"""What findings say and where they point on real-shaped files (issue 24, item 9):
one PG303 finding per container with each control a SARIF related location, objects
named by generateName, PG102 naming the SKU label, PG501 on a non-reference, and the
key's column inside a ConfigMap's device-plugin config."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.cli_run import poolgate

JOB = """\
apiVersion: batch/v1
kind: Job
metadata:
  generateName: train-
  namespace: team-a
spec:
  template:
    spec:
      restartPolicy: Never
      containers:
        - name: t
          image: FILLED BY THE OPERATOR
          resources:
            limits: {nvidia.com/gpu: 1}
          securityContext:
            allowPrivilegedEscalation: false
            runAsNonRoot: true
"""

NODE = """\
apiVersion: v1
kind: Node
metadata:
  name: gpu-1
  labels: {pool: a100, nvidia.com/gpu.present: "true"}
spec:
  taints: [{key: nvidia.com/gpu, effect: NoSchedule}]
"""

SHARING = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: time-slicing-config
  namespace: gpu-operator
data:
    a100: |
        version: v1
        sharing:
          timeSlicing:
            renameByDefault: true
            resources:
              - name: nvidia.com/gpu
                replicas: 4
"""


def _sarif(tmp_path: Path, name: str, text: str) -> list[dict[str, Any]]:
    (tmp_path / name).write_text(text, encoding="utf-8")
    out = tmp_path / "out.sarif"
    result = poolgate("scan", name, "--format", "sarif", "--output", str(out), cwd=tmp_path)
    assert result.returncode in (0, 1), result.stderr  # warnings alone exit 0
    results: list[dict[str, Any]] = json.loads(out.read_text())["runs"][0]["results"]
    return results


def test_pg303_is_one_finding_per_container_with_each_control_related(tmp_path: Path) -> None:
    results = [r for r in _sarif(tmp_path, "job.yaml", JOB) if r["ruleId"] == "PG303"]
    assert len(results) == 1
    [result] = results
    region = result["locations"][0]["physicalLocation"]["region"]
    assert (region["startLine"], region["startColumn"]) == (15, 11)  # securityContext
    text = result["message"]["text"]
    assert text.startswith("container 't' breaks Pod Security restricted: ")
    assert "did you mean allowPrivilegeEscalation?" in text
    related = {
        (r["physicalLocation"]["region"]["startLine"], r["message"]["text"])
        for r in result["relatedLocations"]
    }
    assert related == {
        (15, "does not set allowPrivilegeEscalation: false"),
        (15, "has no seccompProfile on it or the pod (RuntimeDefault or Localhost needed)"),
        (15, "does not drop ALL capabilities"),
    }
    assert [r["id"] for r in result["relatedLocations"]] == [0, 1, 2]


def test_generate_name_names_the_object(tmp_path: Path) -> None:
    results = _sarif(tmp_path, "job.yaml", JOB)
    pg103 = next(r for r in results if r["ruleId"] == "PG103")
    assert pg103["message"]["text"].startswith("GPU Job train-* sets no runtimeClassName")
    logical = pg103["locations"][0]["logicalLocations"][0]
    assert logical["fullyQualifiedName"] == "team-a/Job/train-*"
    assert logical["name"] == "train-*"


def test_pg501_says_when_an_image_is_not_a_reference(tmp_path: Path) -> None:
    results = _sarif(tmp_path, "job.yaml", JOB)
    [pg501] = [r["message"]["text"] for r in results if r["ruleId"] == "PG501"]
    assert pg501 == "container 't' image 'FILLED BY THE OPERATOR' is not an image reference"


def test_pg102_says_the_sku_is_a_label(tmp_path: Path) -> None:
    [pg102] = [r for r in _sarif(tmp_path, "node.yaml", NODE) if r["ruleId"] == "PG102"]
    assert pg102["message"]["text"] == "GPU Node gpu-1 lacks the SKU label sku"


def test_findings_in_a_configmap_config_point_at_the_key_column(tmp_path: Path) -> None:
    [pg203] = [r for r in _sarif(tmp_path, "cm.yaml", SHARING) if r["ruleId"] == "PG203"]
    region = pg203["locations"][0]["physicalLocation"]["region"]
    lines = SHARING.splitlines()
    assert lines[region["startLine"] - 1].strip() == "sharing:"
    assert region["startColumn"] == lines[region["startLine"] - 1].index("sharing") + 1 == 9
