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
code = run(["scan", sys.argv[1], "--format", "json", "--output", sys.argv[2]])
print(json.dumps({"code": code, "examined": examined}))
"""
"""``poolgate scan`` counting the workload-pool pairs it examines (``pools._target``),
in a process of its own: the scan's memory is not the test process's."""


def test_pools_and_workloads_cost_a_pair_each(tmp_path: Path) -> None:
    count = 1_000
    _write(tmp_path, count)
    out = tmp_path / "report.json"
    environment = {**os.environ, "PYTHONPATH": str(ROOT), "POOLGATE_JOBS": "1"}
    counting = subprocess.run(
        [sys.executable, "-c", COUNTING, str(tmp_path), str(out)],
        capture_output=True,
        text=True,
        env=environment,  # one process: every pair is counted there
        timeout=300,
        check=False,
    )
    assert counting.returncode == 0, counting.stderr
    result = json.loads(counting.stdout)
    assert result["code"] == 1  # findings (no Namespaces in scope, images not pinned, ...)
    _check(json.loads(out.read_text()), count)
    assert result["examined"] <= 2 * count  # pair by pair: 1,000,000


def test_the_issues_four_thousand_pools_and_workloads(tmp_path: Path) -> None:
    count = 4_000
    _write(tmp_path, count)
    out = tmp_path / "report.json"
    # About 3 s here; 31 s (and 190 s on a busy host) pair by pair.
    result = poolgate("scan", str(tmp_path), "--format", "json", "--output", str(out), timeout=120)
    assert result.returncode == 1, result.stderr
    _check(json.loads(out.read_text()), count)
