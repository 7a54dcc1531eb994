"""Pools x workloads is not quadratic (issue 21, item 12): a pull request with 4,000
Karpenter NodePools and 4,000 Deployments, each pinned to its own pool, took 31 s,
one selector check per pair (16 million). Workloads reach pools through a label
index. The pairs examined are counted, not timed (about one per workload, in this
process at 1,000 x 1,000); the issue's 4,000 x 4,000 runs as a user runs it, in a
subprocess with a generous timeout, and must find what it should.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from cli_run import ROOT, poolgate

NODEPOOL = """\
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {{name: gpu-{i}}}
spec:
  template:
    metadata:
      labels: {{pool: gpu-{i}, sku: h100}}
    spec:
      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: gpu}}
      requirements:
        - {{key: karpenter.k8s.aws/instance-gpu-name, operator: In, values: [h100]}}
      taints: [{{key: nvidia.com/gpu, effect: NoSchedule}}]
"""

DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata: {{name: app-{i}, namespace: team-{team}}}
spec:
  selector: {{matchLabels: {{app: app-{i}}}}}
  template:
    metadata: {{labels: {{app: app-{i}}}}}
    spec:
      runtimeClassName: nvidia
      {selection}
      tolerations: [{{key: {tolerated}, operator: Exists}}]
      containers: [{{name: c, image: x, resources: {{limits: {{nvidia.com/gpu: 1}}}}}}]
"""

SELECTIONS = (
    "nodeSelector: {{pool: gpu-{i}}}",
    "nodeSelector: {{karpenter.sh/nodepool: gpu-{i}}}",  # the label Karpenter gives nodes
    "affinity: {{nodeAffinity: {{requiredDuringSchedulingIgnoredDuringExecution: "
    "{{nodeSelectorTerms: [{{matchExpressions: [{{key: pool, operator: In, values: [gpu-{i}]}}]}}]}}}}}}",
)


def _write(directory: Path, count: int) -> None:
    """``count`` NodePools and as many Deployments, each pinned to one of them."""
    (directory / "nodepools.yaml").write_text(
        "---\n".join(NODEPOOL.format(i=i) for i in range(count))
    )
    (directory / "workloads.yaml").write_text(
        "---\n".join(
            DEPLOYMENT.format(
                i=i,
                team=i % 20,
                selection=SELECTIONS[i % 3].format(i=i),
                # Every tenth does not tolerate its pool's taint: PG105 names the pool.
                tolerated="other" if i % 10 == 0 else "nvidia.com/gpu",
            )
            for i in range(count)
        )
    )


def _check(report: dict[str, Any], count: int) -> None:
    """Every Deployment reaches its own pool, and only it."""
    assert report["summary"]["objects"] == 2 * count
    untolerated = {
        f["object"]["name"]: f["message"] for f in report["findings"] if f["ruleId"] == "PG105"
    }
    assert sorted(untolerated) == sorted(f"app-{i}" for i in range(0, count, 10))
    for name, message in untolerated.items():
        pool = name.replace("app-", "gpu-")
        assert f"{pool}: nvidia.com/gpu:NoSchedule" in message, message


COUNTING = """\
import json, sys
from scanner.cli import run
from scanner.model import pools

examined = 0
real = pools._target


def counted(*args, **kwargs):
    global examined
    examined += 1
    return real(*args, **kwargs)


pools._target = counted
code = run(["scan", *sys.argv[1:]])
print(json.dumps({"code": code, "examined": examined}))
"""
"""``poolgate scan ARGS`` counting the workload-pool pairs it examines
(``pools._target``), in a process of its own: the scan's memory is not the test
process's."""


def _counted_scan(*args: str) -> dict[str, Any]:
    environment = {**os.environ, "PYTHONPATH": str(ROOT), "POOLGATE_JOBS": "1"}
    counting = subprocess.run(
        [sys.executable, "-c", COUNTING, *args],
        capture_output=True,
        text=True,
        env=environment,  # one process: every pair is counted there
        timeout=300,
        check=False,
    )
    assert counting.returncode == 0, counting.stderr
    result: dict[str, Any] = json.loads(counting.stdout)
    return result


def test_pools_and_workloads_cost_a_pair_each(tmp_path: Path) -> None:
    count = 1_000
    _write(tmp_path, count)
    out = tmp_path / "report.json"
    result = _counted_scan(str(tmp_path), "--format", "json", "--output", str(out))
    assert result["code"] == 1  # findings (no Namespaces in scope, images not pinned, ...)
    _check(json.loads(out.read_text()), count)
    assert result["examined"] <= 2 * count  # pair by pair: 1,000,000


UNSELECTIVE = """\
apiVersion: apps/v1
kind: Deployment
metadata: {{name: app-{i}, namespace: ml}}
spec:
  selector: {{matchLabels: {{app: app-{i}}}}}
  template:
    metadata: {{labels: {{app: app-{i}}}}}
    spec:
      tolerations: [{{key: other-{i}, operator: Exists}}]
      containers: [{{name: c, image: x, resources: {{limits: {{nvidia.com/gpu: 1}}}}}}]
"""
"""A GPU Deployment that selects nothing (every GPU pool admits it), each with a
toleration of its own (so no two share a computation)."""


def test_workloads_that_select_no_pool_are_not_followed_to_every_pool(tmp_path: Path) -> None:
    """Found in review: with no node selection every workload reaches every pool, so
    1,000 x 1,000 was a million targets (21 s, 1.2 GB) and 4,000 x 4,000 would not
    fit in memory. Past ``MAX_REACH`` pools a selection is not followed, and the run
    says so (error, exit 3) instead."""
    count = 1_000
    (tmp_path / "nodepools.yaml").write_text(
        "---\n".join(NODEPOOL.format(i=i) for i in range(count))
    )
    (tmp_path / "workloads.yaml").write_text(
        "---\n".join(UNSELECTIVE.format(i=i) for i in range(count))
    )
    out = tmp_path / "report.json"
    args = ("--fail-on", "never", "--format", "json", "--output", str(out))
    result = _counted_scan(str(tmp_path), *args)
    assert result["code"] == 3
    assert result["examined"] == 0  # pair by pair: 1,000,000
    report = json.loads(out.read_text())
    (note,) = [n for n in report["notifications"] if "GPU pools" in n["message"]]
    assert note["level"] == "error"
    assert note["message"].startswith(
        "the node selection of 1000 GPU workload(s) (Deployment ml/app-0, Deployment "
        "ml/app-1, Deployment ml/app-2 and 997 more) may reach more than 100 GPU pools"
    )
    # Their pools are unknown, not absent: no "selects no GPU pool" or taint finding.
    assert not [f for f in report["findings"] if f["ruleId"] in ("PG105", "PG106", "PG201")]


def test_the_issues_four_thousand_pools_and_workloads(tmp_path: Path) -> None:
    count = 4_000
    _write(tmp_path, count)
    out = tmp_path / "report.json"
    # About 3 s here; 31 s (and 190 s on a busy host) pair by pair.
    result = poolgate("scan", str(tmp_path), "--format", "json", "--output", str(out), timeout=120)
    assert result.returncode == 1, result.stderr
    _check(json.loads(out.read_text()), count)
