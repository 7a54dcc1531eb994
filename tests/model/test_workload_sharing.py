"""How a workload shares the GPUs it gets (``workload.gpuSharing``, issue 24 item 7).

KAI scheduler fractions and HAMi shares are the ``fractional`` mode; a DRA claim's
``GpuConfig`` sharing is ``time-slicing`` or ``mps``. The pool side (PG201 across
trust domains) is fixtures/scenarios/fractional-sharing.
"""

from __future__ import annotations

from typing import Any

import pytest

from scanner.inventory import KubeObject
from scanner.model.index import ObjectIndex
from scanner.model.workloads import build_workloads
from scanner.sources.yaml.document import parse_stream


def facts_of(text: str) -> list[dict[str, Any]]:
    objects: list[KubeObject] = parse_stream(text, "w.yaml").objects
    workloads, invalid = build_workloads(objects, ObjectIndex(objects))
    assert not invalid
    return [dict(w.facts) for w in workloads]


KAI = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: nb, namespace: ml}
spec:
  template:
    metadata:
      annotations: {gpu-fraction: "FRACTION"}
    spec:
      schedulerName: kai-scheduler
      containers: [{name: c, image: x}]
"""


@pytest.mark.parametrize(
    ("fraction", "mode"),
    [("0.5", "fractional"), ("1", "fractional"), ("0", ""), ("half", ""), ("", "")],
)
def test_kai_gpu_fraction_makes_a_fractional_gpu_workload(fraction: str, mode: str) -> None:
    [facts] = facts_of(KAI.replace("FRACTION", fraction))
    assert facts["gpuSharing"]["mode"] == mode
    assert facts["gpu"] is (mode == "fractional")  # it asks for no nvidia.com/gpu
    if mode:
        assert facts["gpuSharing"] == {
            "mode": "fractional",
            "by": "annotation gpu-fraction",
            "path": "spec.template.metadata.annotations.gpu-fraction",
        }


def test_kai_gpu_memory_on_a_pod() -> None:
    [facts] = facts_of(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  annotations: {gpu-memory: '4000'}\n"
        "spec:\n  containers: [{name: c, image: x}]\n"
    )
    assert facts["gpu"] and facts["gpuSharing"]["path"] == "metadata.annotations.gpu-memory"


@pytest.mark.parametrize(
    ("resources", "mode"),
    [
        ("{nvidia.com/gpu: 1, nvidia.com/gpumem: 3000}", "fractional"),
        ("{nvidia.com/gpu: 1, nvidia.com/gpucores: 30}", "fractional"),
        ("{nvidia.com/gpu: 1, nvidia.com/gpumem-percentage: 50}", "fractional"),
        ("{nvidia.com/gpu: 1, nvidia.com/gpumem: 0}", ""),
        ("{nvidia.com/gpu: 1}", ""),
        ("{nvidia.com/gpumem: 3000}", ""),  # no GPU asked for: HAMi gives nothing
    ],
)
def test_hami_shares(resources: str, mode: str) -> None:
    [facts] = facts_of(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n"
        f"  containers:\n    - name: c\n      image: x\n      resources:\n"
        f"        limits: {resources}\n"
    )
    assert facts["gpuSharing"]["mode"] == mode
    if mode:
        assert facts["gpuSharing"]["path"] == "spec.containers[0].resources.limits"


DRA = """\
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: shared-gpu, namespace: ml}
spec:
  spec:
    devices:
      requests:
        - name: gpu
          exactly: {deviceClassName: gpu.nvidia.com}
      config:
        - requests: [gpu]
          opaque:
            driver: DRIVER
            parameters:
              apiVersion: resource.nvidia.com/v1beta1
              kind: GpuConfig
              sharing:
                strategy: STRATEGY
---
apiVersion: v1
kind: Pod
metadata: {name: p, namespace: ml}
spec:
  resourceClaims:
    - {name: gpu, resourceClaimTemplateName: shared-gpu}
  containers:
    - name: c
      image: x
      resources:
        claims: [{name: gpu}]
"""


@pytest.mark.parametrize(
    ("driver", "strategy", "mode"),
    [
        ("gpu.nvidia.com", "TimeSlicing", "time-slicing"),
        ("gpu.nvidia.com", "MPS", "mps"),
        ("gpu.nvidia.com", "Exclusive", ""),
        ("other.example.com", "TimeSlicing", ""),
    ],
)
def test_dra_gpu_config_sharing(driver: str, strategy: str, mode: str) -> None:
    [facts] = facts_of(DRA.replace("DRIVER", driver).replace("STRATEGY", strategy))
    assert facts["gpu"]
    [claim] = facts["draClaims"]
    assert claim["sharing"] == mode
    assert facts["gpuSharing"]["mode"] == mode
    if mode:
        assert facts["gpuSharing"]["by"] == "DRA claim shared-gpu"
        assert facts["gpuSharing"]["path"] == "spec.resourceClaims[0]"
