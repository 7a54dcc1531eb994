"""Seeded generator of the pools x workloads shape: many GPU NodePools, a workload each.

Issue 21 (item 12) found workload-to-pool targeting quadratic: 1,000 Karpenter
NodePools with 1,000 Deployments took 2.5 s, 4,000 with 4,000 took 31 s. This
shape reproduces it at any size. A platform with a pool per team, SKU and
capacity type has this shape on a smaller scale; a pull request can make it as
large as it likes.

``write_pools(root, count)`` writes ``count`` GPU NodePools (``gpu-<i>``; a SKU
label, a ``pool`` label, an instance-GPU requirement and the ``nvidia.com/gpu``
taint; every eighth a time-slicing pool) into ``root/nodepools.yaml``, and
``count`` GPU Deployments into ``root/workloads.yaml``, each pinned to one pool:
half by its ``pool`` label, a quarter by ``karpenter.sh/nodepool`` (the label
Karpenter gives the pool's nodes) and a quarter by a required node-affinity ``In``
on ``pool``, all tolerating the taint. The Deployments are spread over 20
Namespaces with trust domains (``root/namespaces.yaml``), so pools get tenants.

The output depends only on ``count`` and ``seed``.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from benchmarks.emit import dump_stream
from benchmarks.manifests import Dice, Obj

NAMESPACES = 20
_AWS = "karpenter.k8s.aws"
_SKUS = (("h100", "8"), ("a100", "8"), ("l4", "1"), ("l40s", "4"))


class PoolsInfo(NamedTuple):
    """What ``write_pools`` produced."""

    pools: int
    workloads: int
    bytes: int


def nodepool(index: int, dice: Dice) -> Obj:
    sku, gpus = _SKUS[dice.rng.randrange(len(_SKUS))]
    labels = {"pool": f"gpu-{index}", "sku": sku}
    if index % 8 == 7:
        labels["nvidia.com/gpu.sharing-strategy"] = "time-slicing"
        labels["nvidia.com/gpu.replicas"] = "4"
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": f"gpu-{index}"},
        "spec": {
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "nodeClassRef": {"group": _AWS, "kind": "EC2NodeClass", "name": "gpu"},
                    "requirements": [
                        {"key": f"{_AWS}/instance-gpu-name", "operator": "In", "values": [sku]},
                        {"key": f"{_AWS}/instance-gpu-count", "operator": "In", "values": [gpus]},
                    ],
                    "taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}],
                },
            }
        },
    }


def deployment(index: int, dice: Dice) -> Obj:
    pool = f"gpu-{index}"
    spec: Obj = {"runtimeClassName": "nvidia"}
    if index % 4 == 1:
        spec["nodeSelector"] = {"karpenter.sh/nodepool": pool}
    elif index % 4 == 3:
        term = {"matchExpressions": [{"key": "pool", "operator": "In", "values": [pool]}]}
        required = {"nodeSelectorTerms": [term]}
        spec["affinity"] = {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}
        }
    else:
        spec["nodeSelector"] = {"pool": pool}
    spec["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    gpus = dice.rng.choice((1, 1, 2, 4))
    spec["containers"] = [
        {
            "name": "main",
            "image": f"registry.example.com/ml/app-{index}@{dice.digest()}",
            "resources": {"limits": {"nvidia.com/gpu": gpus}},
        }
    ]
    app = {"app": f"app-{index}"}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": f"app-{index}", "namespace": f"team-{index % NAMESPACES}"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": app},
            "template": {"metadata": {"labels": app}, "spec": spec},
        },
    }


def namespaces() -> list[Obj]:
    return [
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {
                "name": f"team-{i}",
                "labels": {"poolgate.io/trust-domain": f"team-{i}"},
            },
        }
        for i in range(NAMESPACES)
    ]


def write_pools(root: Path, count: int, seed: int = 7) -> PoolsInfo:
    """Write the shape with ``count`` NodePools and ``count`` Deployments under ``root``."""
    if count < 0:
        raise ValueError("count must be >= 0")
    dice = Dice(seed)
    root.mkdir(parents=True, exist_ok=True)
    files = {
        "namespaces.yaml": namespaces(),
        "nodepools.yaml": [nodepool(i, dice) for i in range(count)],
        "workloads.yaml": [deployment(i, dice) for i in range(count)],
    }
    size = 0
    for name, objects in files.items():
        data = dump_stream(objects).encode("utf-8")
        (root / name).write_bytes(data)
        size += len(data)
    return PoolsInfo(count, count, size)
