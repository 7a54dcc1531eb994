"""The controllers shape of the generated snapshot: pods made app by app.

A real cluster's dump (``poolgate snapshot`` lists Deployments, ReplicaSets,
StatefulSets, DaemonSets, Jobs, CronJobs and Pods) holds almost every pod's
controller, and the replicas of one controller share its pod template. So an
app here is one pod template, the controller objects that own its pods, and
its replicas:

* Deployment (~70% of apps): the Deployment, its current ReplicaSet (owned by
  the Deployment) and pods owned by the ReplicaSet, all but the Deployment
  labelled with the ReplicaSet's ``pod-template-hash``;
* StatefulSet (~12%): pods ``<name>-0`` .. ``<name>-<N-1>`` owned by it, with
  ``controller-revision-hash`` and ``apps.kubernetes.io/pod-index``;
* Job (~15%, ``batch/v1``): ``parallelism`` = ``completions`` = the replicas,
  ``restartPolicy: Never``, pods labelled with the job name and controller uid
  (the labels the Job controller puts in the template);
* a bare Pod (~3%): one pod, no owner.

Replicas are drawn from {1, 2, 3, 5, 10, 20} (20/20/20/15/15/10%), the last app
cut so the pods add up exactly. Every owner reference names an object in the
snapshot by name and uid (``controller`` and ``blockOwnerDeletion`` true).

What the worst-case shape decides per pod is decided here per app, in the
template: GPU or not (about a third of apps; all replicas of a GPU app run on
one pool that offers its resource), the GPU count, ``runtimeClassName: nvidia``
(90%), the SKU node selector (85%), the toleration, privileged (~0.3%, and every
app in ``gpu-operator``, ~2% of apps), the image and its digest (60%). A pod's
spec is a deep copy of the template's plus ``nodeName`` when it is scheduled;
its name, uid, per-pod labels, node and status are its own. (Real pods differ
from their template a little more: admission adds defaults and the service
account token volume, and a StatefulSet pod gets ``hostname``/``subdomain``.)
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import NamedTuple

from benchmarks.cluster import APPS, ClusterGen, Node, NodeIndex, Obj, Pool

KINDS = ("Deployment", "StatefulSet", "Job", "Pod")
KIND_WEIGHTS = (70, 12, 15, 3)
REPLICAS = (1, 2, 3, 5, 10, 20)
REPLICA_WEIGHTS = (20, 20, 20, 15, 15, 10)
# The alphabet of Kubernetes' generated name suffixes and template hashes
# (k8s.io/apimachinery rand.SafeEncodeString: no vowels, no 0/1/3).
_SAFE = "bcdfghjklmnpqrstvwxz2456789"


class PodIdentity(NamedTuple):
    """What a controller gives each replica of its own."""

    name: str
    generate_name: str | None
    labels: dict[str, str]
    owner: Obj | None  # the controller's owner reference; None for a bare pod


PodMeta = Callable[[int], PodIdentity]
"""Replica index -> its identity."""


@dataclass
class App:
    """One pod template and what is decided for its replicas before any is written."""

    kind: str  # Deployment | StatefulSet | Job | Pod (bare)
    role: str  # api, trainer, ...
    name: str
    namespace: str
    uid: str
    created: str
    first_day: int  # pods are created after this day
    generation: int
    labels: dict[str, str]  # the selector labels
    spec: Obj  # the template's pod spec
    wanted: str  # what an unschedulable replica lacks
    placements: list[tuple[Node | None, str]]  # (node, phase) per replica

    @property
    def replicas(self) -> int:
        return len(self.placements)

    @property
    def ready(self) -> int:
        return sum(phase == "Running" for _, phase in self.placements)


def owner_reference(api_version: str, kind: str, name: str, uid: str) -> Obj:
    """The reference a controller sets on what it creates."""
    return {
        "apiVersion": api_version,
        "kind": kind,
        "name": name,
        "uid": uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


class AppGen:
    """Apps, their controller objects and their pods, from the snapshot's draws."""

    def __init__(self, gen: ClusterGen, index: NodeIndex, tenants: list[str]) -> None:
        self.gen = gen
        self.rng = gen.rng
        self.index = index
        self.tenants = tenants

    def safe(self, length: int) -> str:
        return "".join(_SAFE[self.rng.randrange(len(_SAFE))] for _ in range(length))

    def app(self, number: int, most: int) -> App:
        """App ``number``, with at most ``most`` replicas."""
        rng = self.rng
        kind = rng.choices(KINDS, KIND_WEIGHTS)[0]
        replicas = 1 if kind == "Pod" else min(most, rng.choices(REPLICAS, REPLICA_WEIGHTS)[0])
        role = self.gen.pick(APPS)
        ns = "gpu-operator" if rng.random() < 0.02 else self.gen.pick(self.tenants)
        name = f"{role}-{number:05d}"
        pool, candidates = self.pool()
        spec = self.template_spec(role, ns, pool, kind)
        first_day = rng.randint(1, 28)
        return App(
            kind=kind,
            role=role,
            name=name,
            namespace=ns,
            uid=self.gen.uid(),
            created=self.gen.timestamp(first_day, first_day),
            first_day=first_day,
            generation=rng.randint(1, 6),
            labels={"app.kubernetes.io/name": role, "app.kubernetes.io/instance": name},
            spec=spec,
            wanted=pool.resource if pool is not None and pool.resource else "cpu",
            placements=[self.place(candidates) for _ in range(replicas)],
        )

    def pool(self) -> tuple[Pool | None, list[Node]]:
        """A GPU pool for about a third of apps (weighted by its nodes), and where replicas go."""
        index, rng = self.index, self.rng
        if index.gpu_resources and rng.random() < 1 / 3:
            offering = index.by_resource[
                index.gpu_resources[rng.randrange(len(index.gpu_resources))]
            ]
            pool = offering[rng.randrange(len(offering))].pool
            return pool, index.by_pool[pool.name]
        return None, index.cpu or index.nodes

    def place(self, candidates: list[Node]) -> tuple[Node | None, str]:
        rng = self.rng
        node = candidates[rng.randrange(len(candidates))] if candidates else None
        phase = "Running" if rng.random() < 0.9 else "Pending"
        if phase == "Pending" and rng.random() < 0.5:
            node = None  # not scheduled
        return node, phase if node is not None else "Pending"

    def template_spec(self, role: str, ns: str, pool: Pool | None, kind: str) -> Obj:
        spec = self.gen.pod_spec(role, ns, pool)
        spec["restartPolicy"] = "Never" if kind == "Job" else "Always"
        return spec

    # ---- objects ----------------------------------------------------------

    def objects(
        self, app: App, first_pod: int, total_nodes: int
    ) -> tuple[list[Obj], Iterator[Obj]]:
        """The app's controller objects, and its pods (made one at a time as they are read)."""
        builder = {
            "Deployment": self.deployment,
            "StatefulSet": self.stateful_set,
            "Job": self.job,
            "Pod": self.bare,
        }[app.kind]
        controllers, pod_meta = builder(app)
        return controllers, self.pods(app, pod_meta, first_pod, total_nodes)

    def _metadata(self, app: App, name: str, uid: str, labels: dict[str, str]) -> Obj:
        return {
            "name": name,
            "namespace": app.namespace,
            "uid": uid,
            "generation": app.generation,
            "creationTimestamp": app.created,
            "labels": labels,
        }

    def deployment(self, app: App) -> tuple[list[Obj], PodMeta]:
        n, ready = app.replicas, app.ready
        template_hash = self.safe(10)
        revision = str(self.rng.randint(1, app.generation))
        rs_name, rs_uid = f"{app.name}-{template_hash}", self.gen.uid()
        rs_labels = app.labels | {"pod-template-hash": template_hash}
        deployment: Obj = {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": self._metadata(app, app.name, app.uid, app.labels)
            | {"annotations": {"deployment.kubernetes.io/revision": revision}},
            "spec": {
                "replicas": n,
                "selector": {"matchLabels": app.labels},
                "template": {"metadata": {"labels": app.labels}, "spec": app.spec},
                "strategy": {
                    "type": "RollingUpdate",
                    "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"},
                },
                "revisionHistoryLimit": 10,
                "progressDeadlineSeconds": 600,
            },
            "status": {
                "observedGeneration": app.generation,
                "replicas": n,
                "updatedReplicas": n,
                "readyReplicas": ready,
                "availableReplicas": ready,
            },
        }
        rs_meta = self._metadata(app, rs_name, rs_uid, rs_labels) | {"generation": 1}
        rs_meta["annotations"] = {
            "deployment.kubernetes.io/desired-replicas": str(n),
            "deployment.kubernetes.io/max-replicas": str(n + math.ceil(n / 4)),
            "deployment.kubernetes.io/revision": revision,
        }
        rs_meta["ownerReferences"] = [owner_reference("apps/v1", "Deployment", app.name, app.uid)]
        replica_set: Obj = {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": rs_meta,
            "spec": {
                "replicas": n,
                "selector": {"matchLabels": rs_labels},
                "template": {"metadata": {"labels": rs_labels}, "spec": app.spec},
            },
            "status": {
                "observedGeneration": 1,
                "replicas": n,
                "fullyLabeledReplicas": n,
                "readyReplicas": ready,
                "availableReplicas": ready,
            },
        }
        owner = owner_reference("apps/v1", "ReplicaSet", rs_name, rs_uid)
        return [deployment, replica_set], self._generated(rs_name, rs_labels, owner)

    def stateful_set(self, app: App) -> tuple[list[Obj], PodMeta]:
        n, ready = app.replicas, app.ready
        revision = f"{app.name}-{self.safe(10)}"
        stateful_set: Obj = {
            "apiVersion": "apps/v1",
            "kind": "StatefulSet",
            "metadata": self._metadata(app, app.name, app.uid, app.labels),
            "spec": {
                "replicas": n,
                "selector": {"matchLabels": app.labels},
                "serviceName": app.name,
                "template": {"metadata": {"labels": app.labels}, "spec": app.spec},
                "podManagementPolicy": "OrderedReady",
                "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}},
                "revisionHistoryLimit": 10,
            },
            "status": {
                "observedGeneration": app.generation,
                "replicas": n,
                "readyReplicas": ready,
                "currentReplicas": n,
                "updatedReplicas": n,
                "availableReplicas": ready,
                "currentRevision": revision,
                "updateRevision": revision,
            },
        }
        owner = owner_reference("apps/v1", "StatefulSet", app.name, app.uid)

        def meta(i: int) -> PodIdentity:
            name = f"{app.name}-{i}"
            labels = app.labels | {
                "apps.kubernetes.io/pod-index": str(i),
                "controller-revision-hash": revision,
                "statefulset.kubernetes.io/pod-name": name,
            }
            return PodIdentity(name, None, labels, owner)

        return [stateful_set], meta

    def job(self, app: App) -> tuple[list[Obj], PodMeta]:
        n = app.replicas
        labels = app.labels | {
            "batch.kubernetes.io/controller-uid": app.uid,
            "batch.kubernetes.io/job-name": app.name,
            "controller-uid": app.uid,
            "job-name": app.name,
        }
        job: Obj = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": self._metadata(app, app.name, app.uid, app.labels) | {"generation": 1},
            "spec": {
                "parallelism": n,
                "completions": n,
                "backoffLimit": 6,
                "completionMode": "NonIndexed",
                "suspend": False,
                "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": app.uid}},
                "template": {"metadata": {"labels": labels}, "spec": app.spec},
            },
            "status": {"startTime": app.created, "active": n, "ready": app.ready, "succeeded": 0},
        }
        owner = owner_reference("batch/v1", "Job", app.name, app.uid)
        return [job], self._generated(app.name, labels, owner)

    def bare(self, app: App) -> tuple[list[Obj], PodMeta]:
        return [], lambda i: PodIdentity(app.name, None, dict(app.labels), None)

    def _generated(self, prefix: str, labels: dict[str, str], owner: Obj) -> PodMeta:
        """Pods named ``<prefix>-<5 characters>``, as a ReplicaSet or Job names them."""
        taken: set[str] = set()

        def meta(i: int) -> PodIdentity:
            while (name := f"{prefix}-{self.safe(5)}") in taken:
                pass
            taken.add(name)
            return PodIdentity(name, f"{prefix}-", dict(labels), owner)

        return meta

    def pods(self, app: App, meta: PodMeta, first_pod: int, total_nodes: int) -> Iterator[Obj]:
        # A deep copy of the template's spec per pod: parsing its JSON is one C call,
        # several times faster than copy.deepcopy.
        template = json.dumps(app.spec)
        for i, (node, phase) in enumerate(app.placements):
            name, generate_name, labels, owner = meta(i)
            spec = json.loads(template)
            if node is not None:
                spec["nodeName"] = node.name
            created = self.gen.timestamp(app.first_day + 1)
            metadata: Obj = {"name": name}
            if generate_name is not None:
                metadata["generateName"] = generate_name
            metadata |= {
                "namespace": app.namespace,
                "uid": self.gen.uid(),
                "creationTimestamp": created,
                "labels": labels,
            }
            if owner is not None:
                metadata["ownerReferences"] = [dict(owner)]
            status = self.gen.pod_status(
                phase, node, created, first_pod + i, app.wanted, total_nodes
            )
            yield {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": metadata,
                "spec": spec,
                "status": status,
            }


def write_apps(
    gen: ClusterGen,
    index: NodeIndex,
    tenants: list[str],
    pods: int,
    item: Callable[[Obj], None],
) -> int:
    """Write apps until there are ``pods`` pods; the number of controller objects written."""
    apps = AppGen(gen, index, tenants)
    written = controllers = number = 0
    while written < pods:
        app = apps.app(number, pods - written)
        owners, replicas = apps.objects(app, written, len(index.nodes))
        for obj in owners:
            item(obj)
        for pod in replicas:
            item(pod)
        controllers += len(owners)
        written += app.replicas
        number += 1
    return controllers
