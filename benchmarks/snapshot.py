"""Seeded generator of a cluster snapshot: one ``kind: List`` of Namespaces,
Nodes and Pods, as ``kubectl get -o json|yaml`` (or ``poolgate snapshot``)
would dump them, without ``managedFields``.

Nodes form GPU SKU pools (exclusive, MIG, time-slicing, MPS) plus CPU pools,
labelled the way GPU Feature Discovery labels them and tainted
``nvidia.com/gpu=present:NoSchedule``; a few nodes break the pool contract
(missing taint or SKU label) so an audit has something to find. About a third
of the pods request GPUs and run on a pool that offers their resource; most
pods are Running, some Pending (half of those not yet scheduled, the case a
GPU audit cares about).

The file is streamed item by item, so 100,000 pods never sit in memory.
JSON (the default for ``.json``) writes and reads several times faster than
YAML.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, NamedTuple

from benchmarks.emit import sequence_item

Obj = dict[str, Any]

_ZONES = ("us-central1-a", "us-central1-b", "us-central1-c")
_TRUST_DOMAINS = ("internal", "tenant-a", "tenant-b", "partner-x", "research", "prod-core")
_PSS = ("restricted", "restricted", "baseline", "privileged")
_APPS = (
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


class SnapshotInfo(NamedTuple):
    """What ``write_snapshot`` produced."""

    nodes: int
    pods: int
    namespaces: int
    bytes: int


@dataclass(frozen=True)
class _Pool:
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


def _pools(table: str) -> tuple[_Pool, ...]:
    rows = [line.split() for line in table.strip().splitlines()[1:]]
    return tuple(
        _Pool(
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


_POOLS = _pools(_POOL_TABLE)


@dataclass(frozen=True)
class _Node:
    name: str
    pool: _Pool


class _SnapshotGen:
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

    def nodes(self, count: int) -> list[_Node]:
        weights = [p.weight for p in _POOLS]
        out = []
        for i in range(count):
            pool = self.rng.choices(_POOLS, weights)[0]
            out.append(_Node(f"gke-prod-{pool.name}-{self.rng.getrandbits(32):08x}-{i:05d}", pool))
        return out

    def node(self, node: _Node) -> Obj:
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

    def pod(
        self,
        index: int,
        ns: str,
        node: _Node | None,
        gpu_pool: _Pool | None,
        phase: str,
        total_nodes: int,
    ) -> Obj:
        app = self.pick(_APPS)
        name = f"{app}-{self.rng.getrandbits(40):010x}-{index:06d}"
        resources: Obj = {
            "requests": {"cpu": self.pick(("250m", "500m", "1", "2", "4")), "memory": "2Gi"},
            "limits": {"cpu": self.pick(("1", "2", "4", "8")), "memory": "8Gi"},
        }
        spec: Obj = {"serviceAccountName": f"{app}-runtime", "priorityClassName": "standard"}
        if gpu_pool is not None and gpu_pool.resource is not None:
            count = min(gpu_pool.allocatable, self.rng.choice((1, 1, 2, 4, 8)))
            resources["limits"][gpu_pool.resource] = str(count)
            if self.rng.random() < 0.9:
                spec["runtimeClassName"] = "nvidia"
            if self.rng.random() < 0.85:
                spec["nodeSelector"] = {"sku": gpu_pool.sku, "pool": gpu_pool.name}
            spec["tolerations"] = [
                {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
            ]
        privileged = ns == "gpu-operator" or self.rng.random() < 0.003
        image = f"us-docker.pkg.dev/acme-ml/{ns}/{app}:v1.{self.rng.randrange(40)}.0"
        if self.rng.random() < 0.6:
            image += f"@sha256:{self.rng.getrandbits(256):064x}"
        spec["containers"] = [
            {
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
        ]
        spec["securityContext"] = {"seccompProfile": {"type": "RuntimeDefault"}}
        day, hour, minute = self.rng.randint(1, 29), self.rng.randrange(24), self.rng.randrange(60)
        created = f"2025-11-{day:02d}T{hour:02d}:{minute:02d}:00Z"
        status: Obj = {"phase": phase, "qosClass": "Burstable"}
        wanted = gpu_pool.resource if gpu_pool is not None else "cpu"
        if node is not None:
            spec["nodeName"] = node.name
            status["hostIP"] = f"10.128.{self.rng.randrange(256)}.{self.rng.randrange(256)}"
        if phase == "Running":
            status["podIP"] = (
                f"10.{self.rng.randrange(256)}.{self.rng.randrange(256)}.{index % 250 + 2}"
            )
            status["startTime"] = created
        elif node is None:
            status["conditions"] = [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": f"0/{total_nodes} nodes are available: insufficient {wanted}.",
                }
            ]
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": ns,
                "uid": self.uid(),
                "creationTimestamp": created,
                "labels": {"app.kubernetes.io/name": app, "pod-template-hash": name[-16:-7]},
                "ownerReferences": [
                    {
                        "apiVersion": "apps/v1",
                        "kind": "ReplicaSet",
                        "name": name[:-7],
                        "uid": self.uid(),
                        "controller": True,
                    }
                ],
            },
            "spec": spec,
            "status": status,
        }


def write_snapshot(path: Path, nodes: int, pods: int, seed: int = 7) -> SnapshotInfo:
    """Write a ``kind: List`` snapshot to ``path`` (JSON for ``.json``, else YAML)."""
    gen = _SnapshotGen(seed)
    rng = gen.rng
    namespaces = gen.namespaces(max(6, min(400, pods // 500 + 2)))
    tenant_ns = [name for name, trust in namespaces if trust != "platform"] or ["default"]
    node_list = gen.nodes(nodes)
    by_resource: dict[str, list[_Node]] = {}
    cpu_nodes: list[_Node] = []
    for n in node_list:
        if n.pool.resource is None:
            cpu_nodes.append(n)
        else:
            by_resource.setdefault(n.pool.resource, []).append(n)
    gpu_resources = sorted(by_resource)
    as_json = path.suffix.lower() == ".json"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as out:
        writer = _Writer(out, as_json)
        for name, trust in namespaces:
            writer.item(gen.namespace(name, trust))
        for n in node_list:
            writer.item(gen.node(n))
        for i in range(pods):
            candidates = cpu_nodes or node_list
            if gpu_resources and rng.random() < 1 / 3:
                candidates = by_resource[gpu_resources[rng.randrange(len(gpu_resources))]]
            node = candidates[rng.randrange(len(candidates))] if candidates else None
            # A pod on a GPU pool asks for that pool's resource.
            gpu_pool = node.pool if node is not None and node.pool.resource else None
            phase = "Running" if rng.random() < 0.9 else "Pending"
            if phase == "Pending" and rng.random() < 0.5:
                node = None  # not scheduled
            ns = "gpu-operator" if rng.random() < 0.02 else tenant_ns[rng.randrange(len(tenant_ns))]
            writer.item(gen.pod(i, ns, node, gpu_pool, phase, nodes))
        writer.close()
    return SnapshotInfo(nodes, pods, len(namespaces), path.stat().st_size)


class _Writer:
    """Streams List items as JSON or YAML."""

    def __init__(self, out: IO[str], as_json: bool) -> None:
        self.out = out
        self.as_json = as_json
        self.first = True
        if as_json:
            out.write(
                '{"apiVersion":"v1","kind":"List","metadata":{"resourceVersion":""},"items":[\n'
            )
        else:
            out.write('apiVersion: v1\nkind: List\nmetadata:\n  resourceVersion: ""\n')

    def item(self, obj: Obj) -> None:
        if self.as_json:
            if not self.first:
                self.out.write(",\n")
            self.out.write(json.dumps(obj, separators=(",", ":")))
        else:
            if self.first:
                self.out.write("items:\n")
            self.out.write(sequence_item(obj, "  "))
        self.first = False

    def close(self) -> None:
        if self.as_json:
            self.out.write("\n]}\n")
        elif self.first:
            self.out.write("items: []\n")
