"""Seeded generator of a cluster snapshot: one ``kind: List`` of Namespaces,
Nodes, workload controllers and Pods, as ``kubectl get -o json|yaml`` (or
``poolgate snapshot``) would dump them, without ``managedFields``.

Nodes form GPU SKU pools (exclusive, MIG, time-slicing, MPS) plus CPU pools,
labelled the way GPU Feature Discovery labels them and tainted
``nvidia.com/gpu=present:NoSchedule``; a few nodes break the pool contract
(missing taint or SKU label) so an audit has something to find
(``benchmarks/cluster.py``). About a third of the pods request GPUs and run on
a pool that offers their resource; most pods are Running, some Pending (half of
those not yet scheduled, the case a GPU audit cares about).

The pods come in one of two shapes:

* ``controllers=True`` (the default, what real clusters look like): pods are
  made app by app, each app a Deployment (with its ReplicaSet), StatefulSet,
  Job or bare Pod whose replicas share its pod template exactly; every owner
  reference names an object in the snapshot (``benchmarks/controllers.py``).
  The List holds Namespaces, Nodes, then each app's controllers followed by
  its pods.
* ``controllers=False`` (the worst case for a scanner that checks pods through
  their controller): every pod has its own random spec and an owner reference
  to a ReplicaSet that is not in the snapshot.

The List records what it covers as ``poolgate snapshot`` does (the
``poolgate.io/listed`` annotation naming every kind an audit lists), so the audit
judges it as it judges the nightly CronJob's snapshot: a kind listed and absent is
none, and every rule runs (a ``kubectl get`` dump without it leaves the rules that
need an absent kind, such as PG305 and PG502, out).

For the same seed both shapes hold the same Namespaces and Nodes. The file is
streamed item by item (at most one app's pods are built at a time), so 100,000
pods never sit in memory. JSON (the default for ``.json``) writes and reads
several times faster than YAML.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import IO, NamedTuple

from benchmarks.cluster import APPS, ClusterGen, Node, NodeIndex, Obj, Pool
from benchmarks.controllers import write_apps
from benchmarks.emit import sequence_item
from scanner.kinds.resources import RESOURCES, REVISION
from scanner.sources.snapshot import ANNOTATION_LISTED, ANNOTATION_REVISION, kind_label

LISTED = ",".join(sorted(kind_label(resource.key) for resource in RESOURCES))
"""Every kind an audit lists, as ``poolgate snapshot`` records a complete listing."""


class SnapshotInfo(NamedTuple):
    """What ``write_snapshot`` produced."""

    nodes: int
    pods: int
    namespaces: int
    bytes: int
    controllers: int  # objects other than Pods, Nodes and Namespaces


def unique_pod(
    gen: ClusterGen,
    index: int,
    ns: str,
    node: Node | None,
    gpu_pool: Pool | None,
    phase: str,
    total_nodes: int,
) -> Obj:
    """A pod of the worst-case shape: its own template, its ReplicaSet absent."""
    rng = gen.rng
    app = gen.pick(APPS)
    name = f"{app}-{rng.getrandbits(40):010x}-{index:06d}"
    spec = gen.pod_spec(app, ns, gpu_pool)
    created = gen.timestamp()
    wanted = gpu_pool.resource if gpu_pool is not None and gpu_pool.resource else "cpu"
    if node is not None:
        spec["nodeName"] = node.name
    status = gen.pod_status(phase, node, created, index, wanted, total_nodes)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": ns,
            "uid": gen.uid(),
            "creationTimestamp": created,
            "labels": {"app.kubernetes.io/name": app, "pod-template-hash": name[-16:-7]},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": name[:-7],
                    "uid": gen.uid(),
                    "controller": True,
                }
            ],
        },
        "spec": spec,
        "status": status,
    }


def write_unique_pods(
    gen: ClusterGen, index: NodeIndex, tenants: list[str], pods: int, writer: _Writer
) -> None:
    """The worst-case shape: each pod placed, and made, on its own."""
    rng = gen.rng
    for i in range(pods):
        candidates = index.cpu or index.nodes
        if index.gpu_resources and rng.random() < 1 / 3:
            candidates = index.by_resource[
                index.gpu_resources[rng.randrange(len(index.gpu_resources))]
            ]
        node = candidates[rng.randrange(len(candidates))] if candidates else None
        # A pod on a GPU pool asks for that pool's resource.
        gpu_pool = node.pool if node is not None and node.pool.resource else None
        phase = "Running" if rng.random() < 0.9 else "Pending"
        if phase == "Pending" and rng.random() < 0.5:
            node = None  # not scheduled
        ns = "gpu-operator" if rng.random() < 0.02 else tenants[rng.randrange(len(tenants))]
        writer.item(unique_pod(gen, i, ns, node, gpu_pool, phase, len(index.nodes)))


def write_snapshot(
    path: Path, nodes: int, pods: int, seed: int = 7, controllers: bool = True
) -> SnapshotInfo:
    """Write a ``kind: List`` snapshot to ``path`` (JSON for ``.json``, else YAML).

    ``controllers=True``: pods belong to controllers in the snapshot and share
    their templates; ``False``: every pod its own template, owners absent (the
    generator's output before controllers were modelled, byte for byte).
    """
    gen = ClusterGen(seed)
    namespaces = gen.namespaces(max(6, min(400, pods // 500 + 2)))
    tenants = [name for name, trust in namespaces if trust != "platform"] or ["default"]
    index = NodeIndex(gen.nodes(nodes))
    as_json = path.suffix.lower() == ".json"
    path.parent.mkdir(parents=True, exist_ok=True)
    owners = 0
    with path.open("w", encoding="utf-8") as out:
        writer = _Writer(out, as_json)
        for name, trust in namespaces:
            writer.item(gen.namespace(name, trust))
        for n in index.nodes:
            writer.item(gen.node(n))
        if controllers:
            owners = write_apps(gen, index, tenants, pods, writer.item)
        else:
            write_unique_pods(gen, index, tenants, pods, writer)
        writer.close()
    return SnapshotInfo(nodes, pods, len(namespaces), path.stat().st_size, owners)


class _Writer:
    """Streams List items as JSON or YAML."""

    def __init__(self, out: IO[str], as_json: bool) -> None:
        self.out = out
        self.as_json = as_json
        self.first = True
        listed = json.dumps(LISTED)
        if as_json:
            out.write(
                '{"apiVersion":"v1","kind":"List","metadata":{"resourceVersion":"",'
                f'"annotations":{{"{ANNOTATION_LISTED}":{listed},'
                f'"{ANNOTATION_REVISION}":"{REVISION}"}}}},"items":[\n'
            )
        else:
            out.write(
                'apiVersion: v1\nkind: List\nmetadata:\n  resourceVersion: ""\n'
                f"  annotations:\n    {ANNOTATION_LISTED}: {listed}\n"
                f'    {ANNOTATION_REVISION}: "{REVISION}"\n'
            )

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
