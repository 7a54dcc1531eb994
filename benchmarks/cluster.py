"""What both shapes of the generated cluster snapshot share: Namespaces with
trust domains, GPU node pools and their Nodes, and the parts of a Pod that do
not depend on who owns it (image, container, creation time, status).

``benchmarks/snapshot.py`` writes the snapshot; ``benchmarks/controllers.py``
builds the controllers shape's apps. Every random draw comes from one
``random.Random``, so the order of the calls is part of the output.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

Obj = dict[str, Any]

_ZONES = ("us-central1-a", "us-central1-b", "us-central1-c")
_TRUST_DOMAINS = ("internal", "tenant-a", "tenant-b", "partner-x", "research", "prod-core")
_PSS = ("restricted", "restricted", "baseline", "privileged")
APPS = (
    "api",
    "trainer",
    "inference",
    "embedder",
    "indexer",
    "serving",
    "etl",
    "notebook",
    "evaluator",
    "reranker",
    "retriever",
    "finetune",
    "batch-score",
    "gateway",
)


@dataclass(frozen=True)
class Pool:
    name: str
    sku: str | None  # None for CPU pools
    product: str | None
    instance_type: str
    gpus: int
    sharing: str  # none | time-slicing | mps | mig
    mig_config: str
    resource: str | None  # the extended resource pods request
    allocatable: int  # of ``resource``
    weight: float


# One row per pool; "-" for what a CPU pool does not have. Products get an
# "NVIDIA-" prefix and resources an "nvidia.com/" prefix. ``alloc`` is the
# allocatable count of the resource per node (MIG: 7 slices x 8 GPUs;
# time-slicing/MPS: 4 replicas x GPUs, renamed to nvidia.com/gpu.shared);
# ``part`` is the pool's share of the nodes.
_POOL_TABLE = """
name       sku  product         instance-type  gpus sharing      mig-config   resource    alloc part
h100-train h100 H100-80GB-HBM3  a3-highgpu-8g  8    none         all-disabled gpu         8     0.18
h100-mig   h100 H100-80GB-HBM3  a3-highgpu-8g  8    mig          all-1g.10gb  mig-1g.10gb 56    0.06
a100-train a100 A100-SXM4-80GB  a2-ultragpu-8g 8    none         all-disabled gpu         8     0.14
a100-mig   a100 A100-SXM4-80GB  a2-ultragpu-8g 8    mig          all-1g.10gb  mig-1g.10gb 56    0.06
l4-serving l4   L4              g2-standard-48 4    none         all-disabled gpu         4     0.12
l4-shared  l4   L4              g2-standard-48 4    time-slicing all-disabled gpu.shared  16    0.08
a100-mps   a100 A100-SXM4-40GB  a2-highgpu-4g  4    mps          all-disabled gpu.shared  16    0.04
general    -    -               n2-standard-32 0    none         -            -           0     0.22
highmem    -    -               n2-highmem-64  0    none         -            -           0     0.10
"""


def _pools(table: str) -> tuple[Pool, ...]:
    rows = [line.split() for line in table.strip().splitlines()[1:]]
    return tuple(
        Pool(
            name=name,
            sku=None if sku == "-" else sku,
            product=None if product == "-" else f"NVIDIA-{product}",
            instance_type=itype,
            gpus=int(gpus),
            sharing=sharing,
            mig_config="" if mig == "-" else mig,
            resource=None if resource == "-" else f"nvidia.com/{resource}",
            allocatable=int(alloc),
            weight=float(weight),
        )
        for name, sku, product, itype, gpus, sharing, mig, resource, alloc, weight in rows
    )


POOLS = _pools(_POOL_TABLE)


@dataclass(frozen=True)
class Node:
    name: str
    pool: Pool


@dataclass
class NodeIndex:
    """The generated nodes, grouped the ways pods are placed on them."""

    nodes: list[Node]
    cpu: list[Node] = field(default_factory=list)
    by_resource: dict[str, list[Node]] = field(default_factory=dict)  # GPU resource -> nodes
    by_pool: dict[str, list[Node]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for n in self.nodes:
            self.by_pool.setdefault(n.pool.name, []).append(n)
            if n.pool.resource is None:
                self.cpu.append(n)
            else:
                self.by_resource.setdefault(n.pool.resource, []).append(n)
        self.gpu_resources = sorted(self.by_resource)


def container(app: str, image: str, resources: Obj, privileged: bool) -> Obj:
    """An app's one container: privileged, or as the restricted profile wants it."""
    return {
        "name": app,
        "image": image,
        "ports": [{"containerPort": 8080, "protocol": "TCP"}],
        "resources": resources,
        "securityContext": (
            {"privileged": True}
            if privileged
            else {
                "allowPrivilegeEscalation": False,
                "runAsNonRoot": True,
                "capabilities": {"drop": ["ALL"]},
            }
        ),
    }


class ClusterGen:
    """The random draws of a snapshot, in one ``random.Random(seed)``."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def pick(self, seq: tuple[str, ...] | list[str]) -> str:
        return seq[self.rng.randrange(len(seq))]

    def namespaces(self, count: int) -> list[tuple[str, str]]:
        """(name, trust domain) for each namespace, system ones first."""
        out = [("kube-system", "platform"), ("gpu-operator", "platform")]
        for i in range(count - len(out)):
            out.append((f"team-{i:03d}", self.pick(_TRUST_DOMAINS)))
        return out

    def namespace(self, name: str, trust: str) -> Obj:
        pss = "privileged" if trust == "platform" else self.pick(_PSS)
        return {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {
                "name": name,
                "uid": self.uid(),
                "labels": {
                    "kubernetes.io/metadata.name": name,
                    "poolgate.io/trust-domain": trust,
                    "pod-security.kubernetes.io/enforce": pss,
                },
            },
            "spec": {"finalizers": ["kubernetes"]},
            "status": {"phase": "Active"},
        }

    def uid(self) -> str:
        h = f"{self.rng.getrandbits(128):032x}"
        return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"

    def nodes(self, count: int) -> list[Node]:
        weights = [p.weight for p in POOLS]
        out = []
        for i in range(count):
            pool = self.rng.choices(POOLS, weights)[0]
            out.append(Node(f"gke-prod-{pool.name}-{self.rng.getrandbits(32):08x}-{i:05d}", pool))
        return out

    def node(self, node: Node) -> Obj:
        pool = node.pool
        labels: Obj = {
            "kubernetes.io/hostname": node.name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "node.kubernetes.io/instance-type": pool.instance_type,
            "topology.kubernetes.io/zone": self.pick(_ZONES),
            "pool": pool.name,
        }
        capacity: Obj = {
            "cpu": "96" if pool.sku else "32",
            "memory": "1342177280Ki" if pool.sku else "131072000Ki",
            "ephemeral-storage": "3750000000Ki",
            "pods": "110",
        }
        taints: list[Obj] = []
        broken = self.rng.random() < 0.02  # a node that breaks the pool contract
        if pool.sku and pool.product and pool.resource:
            if not (broken and self.rng.random() < 0.5):
                labels["sku"] = pool.sku
            labels.update(
                {
                    "nvidia.com/gpu.present": "true",
                    "nvidia.com/gpu.product": pool.product,
                    "nvidia.com/gpu.count": str(pool.gpus),
                    "nvidia.com/gpu.memory": "81559" if "80GB" in pool.product else "23034",
                    "nvidia.com/gpu.sharing-strategy": pool.sharing
                    if pool.sharing != "mig"
                    else "none",
                    "nvidia.com/mig.config": pool.mig_config,
                    "nvidia.com/cuda.driver.major": "550",
                    "nvidia.com/gpu.deploy.device-plugin": "true",
                }
            )
            if pool.sharing == "mig":
                labels["nvidia.com/mig.strategy"] = "mixed"
                labels["nvidia.com/mig.config.state"] = (
                    self.pick(("failed", "pending")) if broken else "success"
                )
            if not broken:
                taints.append({"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"})
            capacity[pool.resource] = str(pool.allocatable)
            if broken and self.rng.random() < 0.5:
                capacity[pool.resource] = "0"  # device plugin down
        if self.rng.random() < 0.05:
            taints.append({"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"})
        spec: Obj = {
            "podCIDR": f"10.{self.rng.randrange(256)}.{self.rng.randrange(256)}.0/24",
            "providerID": f"gce://acme-prod/{labels['topology.kubernetes.io/zone']}/{node.name}",
        }
        if taints:
            spec["taints"] = taints
        allocatable = dict(capacity)
        allocatable["cpu"] = "95690m" if pool.sku else "31850m"
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": node.name, "uid": self.uid(), "labels": labels},
            "spec": spec,
            "status": {
                "capacity": capacity,
                "allocatable": allocatable,
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "True",
                        "reason": "KubeletReady",
                        "lastHeartbeatTime": "2025-11-29T14:55:02Z",
                    }
                ],
                "nodeInfo": {
                    "kubeletVersion": "v1.30.5-gke.1014001",
                    "containerRuntimeVersion": "containerd://1.7.22",
                    "osImage": "Container-Optimized OS from Google",
                },
            },
        }

    def pod_spec(self, app: str, ns: str, pool: Pool | None) -> Obj:
        """A pod spec for ``app`` in ``ns``, asking for ``pool``'s GPU resource if any:
        resources, runtime class, SKU selector and toleration, one container."""
        rng, pick = self.rng, self.pick
        resources: Obj = {
            "requests": {"cpu": pick(("250m", "500m", "1", "2", "4")), "memory": "2Gi"},
            "limits": {"cpu": pick(("1", "2", "4", "8")), "memory": "8Gi"},
        }
        spec: Obj = {"serviceAccountName": f"{app}-runtime", "priorityClassName": "standard"}
        if pool is not None and pool.resource is not None:
            count = min(pool.allocatable, rng.choice((1, 1, 2, 4, 8)))
            resources["limits"][pool.resource] = str(count)
            if rng.random() < 0.9:
                spec["runtimeClassName"] = "nvidia"
            if rng.random() < 0.85:
                spec["nodeSelector"] = {"sku": pool.sku, "pool": pool.name}
            spec["tolerations"] = [
                {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
            ]
        privileged = ns == "gpu-operator" or rng.random() < 0.003
        spec["containers"] = [container(app, self.image(ns, app), resources, privileged)]
        spec["securityContext"] = {"seccompProfile": {"type": "RuntimeDefault"}}
        return spec

    def image(self, ns: str, app: str) -> str:
        """A tagged image, digest-pinned 60% of the time."""
        image = f"us-docker.pkg.dev/acme-ml/{ns}/{app}:v1.{self.rng.randrange(40)}.0"
        if self.rng.random() < 0.6:
            image += f"@sha256:{self.rng.getrandbits(256):064x}"
        return image

    def timestamp(self, first_day: int = 1, last_day: int = 29) -> str:
        """An RFC 3339 time in November 2025, between the two days."""
        rng = self.rng
        day, hour, minute = rng.randint(first_day, last_day), rng.randrange(24), rng.randrange(60)
        return f"2025-11-{day:02d}T{hour:02d}:{minute:02d}:00Z"

    def pod_status(
        self, phase: str, node: Node | None, started: str, index: int, wanted: str, total_nodes: int
    ) -> Obj:
        """Running with IPs, Pending on a node, or Pending and unschedulable."""
        status: Obj = {"phase": phase, "qosClass": "Burstable"}
        if node is not None:
            status["hostIP"] = f"10.128.{self.rng.randrange(256)}.{self.rng.randrange(256)}"
        if phase == "Running":
            status["podIP"] = (
                f"10.{self.rng.randrange(256)}.{self.rng.randrange(256)}.{index % 250 + 2}"
            )
            status["startTime"] = started
        elif node is None:
            status["conditions"] = [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": f"0/{total_nodes} nodes are available: insufficient {wanted}.",
                }
            ]
        return status
