"""Builder for the workloads of the benchmark corpus: Deployments,
StatefulSets, Jobs, CronJobs and DaemonSets of 60-120 lines.

About a third ask for GPUs (``nvidia.com/gpu`` 1-8, ``nvidia.com/mig-1g.10gb``
or ``nvidia.com/gpu.shared``); most of those set ``runtimeClassName: nvidia``,
select a SKU and tolerate ``nvidia.com/gpu``. A few containers run privileged.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from benchmarks.emit import count_lines
from benchmarks.manifests import ENV_NAMES, ENV_VALUES, Dice, Obj, Team

WORKLOAD_KINDS = ("Deployment", "StatefulSet", "Job", "CronJob", "DaemonSet")
MIG_RESOURCE = "nvidia.com/mig-1g.10gb"
GPU_RESOURCES = ("nvidia.com/gpu", "nvidia.com/gpu.shared", MIG_RESOURCE)
SKUS = ("h100", "a100", "l4")
MIG_SKUS = ("h100", "a100")
MIN_WORKLOAD_LINES = 60
MAX_WORKLOAD_LINES = 120

_SIDECARS = (
    ("envoy", "envoyproxy/envoy:v1.30.2"),
    ("log-shipper", "fluent/fluent-bit:3.0.7"),
    ("metrics", "prom/statsd-exporter:v0.26.1"),
)
_CPU = ("100m", "250m", "500m", "1", "2", "4", "8", "16")
_MEM = ("256Mi", "512Mi", "1Gi", "2Gi", "4Gi", "8Gi", "16Gi", "32Gi", "64Gi")


class GpuRequest(NamedTuple):
    resource: str
    amount: int
    sku: str


def gpu_request(dice: Dice) -> GpuRequest | None:
    """What a GPU workload asks for (about one in three), or None for a CPU one."""
    if not dice.chance(1 / 3):
        return None
    roll = dice.rng.random()
    if roll < 0.7:
        count = dice.rng.choice((1, 1, 1, 2, 2, 4, 4, 8))
        return GpuRequest("nvidia.com/gpu", count, dice.pick(SKUS))
    if roll < 0.85:
        return GpuRequest(MIG_RESOURCE, dice.rng.randint(1, 7), dice.pick(MIG_SKUS))
    return GpuRequest("nvidia.com/gpu.shared", dice.rng.randint(1, 4), dice.pick(("l4", "a100")))


def probe(dice: Dice, port: int, path: str) -> Obj:
    return {
        "httpGet": {"path": path, "port": port},
        "initialDelaySeconds": dice.rng.choice((5, 10, 30, 60)),
        "periodSeconds": dice.rng.choice((10, 15, 30)),
        "timeoutSeconds": dice.rng.choice((1, 3, 5)),
        "failureThreshold": dice.rng.choice((3, 5, 10)),
    }


def env(dice: Dice, count: int) -> list[Obj]:
    # Consecutive names from a random start: no name repeats in one container.
    start = dice.rng.randrange(len(ENV_NAMES))
    env: list[Obj] = []
    for i in range(count):
        name = ENV_NAMES[(start + i) % len(ENV_NAMES)]
        if i >= len(ENV_NAMES):
            name = f"{name}_{i // len(ENV_NAMES)}"
        env.append({"name": name, "value": dice.pick(ENV_VALUES)})
    return env


def container(
    dice: Dice,
    name: str,
    image: str,
    port: int,
    gpu: GpuRequest | None,
    privileged: bool,
    batch: bool,
) -> Obj:
    requests: Obj = {"cpu": dice.quantity(_CPU), "memory": dice.quantity(_MEM)}
    limits: Obj = {
        "cpu": dice.quantity(_CPU, at_least=requests["cpu"]),
        "memory": dice.quantity(_MEM, at_least=requests["memory"]),
    }
    if gpu is not None:
        resource, count, _ = gpu
        limits[resource] = str(count) if dice.chance(0.2) else count
        if dice.chance(0.5):
            requests[resource] = count
    container: Obj = {"name": name, "image": image, "imagePullPolicy": "IfNotPresent"}
    if batch:
        container["command"] = ["python", "-m", f"{name.replace('-', '_')}.main"]
        container["args"] = [
            f"--config=/etc/{name}/config.yaml",
            f"--shard={dice.rng.randint(0, 63)}",
        ]
    else:
        container["args"] = [f"--port={port}", "--metrics-port=9090"]
        container["ports"] = [
            {"name": "http", "containerPort": port, "protocol": "TCP"},
            {"name": "metrics", "containerPort": 9090, "protocol": "TCP"},
        ]
    container["env"] = [
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {
            "name": "POD_NAMESPACE",
            "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}},
        },
    ]
    if dice.chance(0.4):
        container["env"].append(
            {
                "name": "API_TOKEN",
                "valueFrom": {"secretKeyRef": {"name": f"{name}-secrets", "key": "token"}},
            }
        )
    container["resources"] = {"requests": requests, "limits": limits}
    if not batch:
        container["livenessProbe"] = probe(dice, port, "/healthz")
        container["readinessProbe"] = probe(dice, port, "/readyz")
    mounts = [{"name": "config", "mountPath": f"/etc/{name}", "readOnly": True}]
    mounts.append({"name": "tmp", "mountPath": "/tmp"})
    if gpu is not None:
        mounts.append({"name": "dshm", "mountPath": "/dev/shm"})
    container["volumeMounts"] = mounts
    if privileged:
        container["securityContext"] = {"privileged": True, "runAsUser": 0}
    else:
        sc: Obj = {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": dice.chance(0.7),
            "capabilities": {"drop": ["ALL"]},
        }
        if dice.chance(0.85):
            sc["runAsNonRoot"] = True
        container["securityContext"] = sc
    return container


def pod_spec(
    dice: Dice,
    team: Team,
    ns: str,
    app: str,
    name: str,
    kind: str,
    gpu: GpuRequest | None,
) -> Obj:
    batch = kind in ("Job", "CronJob")
    port = dice.rng.choice((8080, 8000, 9000, 50051))
    privileged = (kind == "DaemonSet" and dice.chance(0.25)) or dice.chance(0.005)
    spec: Obj = {"serviceAccountName": dice.pick(team.service_accounts)}
    if gpu is not None and dice.chance(0.85):
        spec["runtimeClassName"] = "nvidia"
    if gpu is not None and dice.chance(0.85):
        spec["nodeSelector"] = {"sku": gpu.sku}
    elif dice.chance(0.3):
        spec["nodeSelector"] = {"kubernetes.io/os": "linux"}
    if batch:
        spec["restartPolicy"] = dice.pick(("Never", "OnFailure"))
    spec["priorityClassName"] = dice.pick(("batch-low", "standard", "serving-high"))
    spec["terminationGracePeriodSeconds"] = dice.rng.choice((30, 60, 120))
    pod_sc: Obj = {"fsGroup": 2000, "seccompProfile": {"type": "RuntimeDefault"}}
    if not privileged:
        pod_sc = {"runAsNonRoot": True, "runAsUser": 1000 + dice.rng.randrange(1000), **pod_sc}
    spec["securityContext"] = pod_sc
    tolerations: list[Obj] = []
    if gpu is not None and dice.chance(0.9):
        tolerations.append({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"})
    if dice.chance(0.3):
        tolerations.append(
            {
                "key": "pool",
                "operator": "Equal",
                "value": f"{team.name}-pool",
                "effect": "NoSchedule",
            }
        )
    if tolerations:
        spec["tolerations"] = tolerations
    if gpu is not None and dice.chance(0.5):
        spec["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": "sku", "operator": "In", "values": [gpu.sku]},
                                {
                                    "key": "nvidia.com/gpu.product",
                                    "operator": "Exists",
                                },
                            ]
                        }
                    ]
                }
            }
        }
    elif not batch and kind != "DaemonSet" and dice.chance(0.6):
        spec["affinity"] = {
            "podAntiAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 100,
                        "podAffinityTerm": {
                            "topologyKey": "kubernetes.io/hostname",
                            "labelSelector": {"matchLabels": {"app.kubernetes.io/instance": name}},
                        },
                    }
                ]
            }
        }
    main = container(dice, app, dice.image(team.name, app), port, gpu, privileged, batch)
    containers = [main]
    if not batch and dice.chance(0.3):
        side_name, side_image = _SIDECARS[dice.rng.randrange(len(_SIDECARS))]
        side = {
            "name": side_name,
            "image": side_image if dice.chance(0.5) else f"{side_image}@{dice.digest()}",
            "resources": {
                "requests": {"cpu": "50m", "memory": "64Mi"},
                "limits": {"cpu": "200m", "memory": "128Mi"},
            },
            "securityContext": {
                "allowPrivilegeEscalation": False,
                "capabilities": {"drop": ["ALL"]},
            },
        }
        containers.append(side)
    spec["containers"] = containers
    if dice.chance(0.2):
        spec["initContainers"] = [
            {
                "name": "fetch-weights",
                "image": dice.image(team.name, "weights-fetcher"),
                "args": ["--dest=/models", f"--model={dice.pick(ENV_VALUES)}"],
                "volumeMounts": [{"name": "tmp", "mountPath": "/models"}],
            }
        ]
    volumes: list[Obj] = [
        {"name": "config", "configMap": {"name": f"{app}-config"}},
        {"name": "tmp", "emptyDir": {}},
    ]
    if gpu is not None:
        volumes.append({"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "8Gi"}})
    spec["volumes"] = volumes
    return spec


def workload(dice: Dice, team: Team, ns: str, app: str, name: str, kind: str) -> Obj:
    gpu = gpu_request(dice)
    labels = {
        "app.kubernetes.io/name": app,
        "app.kubernetes.io/instance": name,
        "app.kubernetes.io/version": f"{dice.rng.randint(1, 5)}.{dice.rng.randint(0, 30)}",
        "app.kubernetes.io/component": dice.pick(("server", "worker", "trainer", "agent")),
        "app.kubernetes.io/part-of": app,
        "app.kubernetes.io/managed-by": dice.pick(("helm", "kustomize", "argocd")),
        "team": team.name,
    }
    annotations: Obj = {
        "poolgate.io/owner": f"{team.name}@acme.example",
        "deployment.kubernetes.io/revision": str(dice.rng.randint(1, 90)),
    }
    if dice.chance(0.02):
        annotations["poolgate.io/ignore"] = "PG501=vendor image is pinned by the vendor"
    pod_meta: Obj = {
        "labels": {k: labels[k] for k in ("app.kubernetes.io/name", "app.kubernetes.io/instance")},
        "annotations": {
            "prometheus.io/scrape": "true",
            "prometheus.io/port": "9090",
            "kubectl.kubernetes.io/default-container": app,
        },
    }
    pod = {"metadata": pod_meta, "spec": pod_spec(dice, team, ns, app, name, kind, gpu)}
    selector = {"matchLabels": dict(pod_meta["labels"])}
    spec: Obj
    if kind == "Deployment":
        spec = {
            "replicas": dice.rng.randint(1, 12),
            "revisionHistoryLimit": 5,
            "selector": selector,
            "strategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 0},
            },
            "template": pod,
        }
    elif kind == "StatefulSet":
        spec = {
            "replicas": dice.rng.randint(1, 5),
            "serviceName": name,
            "podManagementPolicy": "Parallel",
            "selector": selector,
            "template": pod,
            "volumeClaimTemplates": [
                {
                    "metadata": {"name": "data"},
                    "spec": {
                        "accessModes": ["ReadWriteOnce"],
                        "storageClassName": "premium-rwo",
                        "resources": {"requests": {"storage": dice.pick(("50Gi", "200Gi", "1Ti"))}},
                    },
                }
            ],
        }
    elif kind == "DaemonSet":
        spec = {
            "selector": selector,
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}},
            "template": pod,
        }
    elif kind == "Job":
        spec = {
            "backoffLimit": dice.rng.randint(0, 6),
            "completions": dice.rng.randint(1, 8),
            "parallelism": dice.rng.randint(1, 4),
            "ttlSecondsAfterFinished": 86400,
            "template": pod,
        }
    else:
        spec = {
            "schedule": f"{dice.rng.randint(0, 59)} {dice.rng.randint(0, 23)} * * *",
            "concurrencyPolicy": "Forbid",
            "successfulJobsHistoryLimit": 3,
            "failedJobsHistoryLimit": 1,
            "jobTemplate": {"spec": {"backoffLimit": dice.rng.randint(0, 4), "template": pod}},
        }
    api = "batch/v1" if kind in ("Job", "CronJob") else "apps/v1"
    obj: Obj = {
        "apiVersion": api,
        "kind": kind,
        "metadata": {
            "name": name,
            "namespace": ns,
            "labels": labels,
            "annotations": annotations,
        },
        "spec": spec,
    }
    _fit_lines(dice, obj, pod["spec"]["containers"][0], _optional_parts(obj, pod, gpu))
    return obj


def _fit_lines(dice: Dice, obj: Obj, main: Obj, optional: list[tuple[Any, Any]]) -> None:
    """Bring the object to a random length in 60-120 lines.

    Optional parts (``(dict, key)`` or ``(list, item)``) are dropped in a
    random order while the object is longer than the target; then the main
    container gets plain env vars (two lines each) up to the target.
    """
    target = dice.rng.randint(MIN_WORKLOAD_LINES + 1, MAX_WORKLOAD_LINES - 1)
    lines = count_lines(obj)
    dice.rng.shuffle(optional)
    for holder, key in optional:
        if lines <= target:
            break
        if isinstance(holder, dict):
            lines -= count_lines({key: holder.pop(key)})
        else:
            holder.remove(key)
            lines -= count_lines([key])
    if lines < target - 1:
        main["env"].extend(env(dice, (target - lines) // 2))


def _optional_parts(obj: Obj, pod: Obj, gpu: GpuRequest | None) -> list[tuple[Any, Any]]:
    """Parts of a workload that real manifests often leave out."""
    parts: list[tuple[Any, Any]] = []
    meta = obj["metadata"]
    for key in (
        "app.kubernetes.io/version",
        "app.kubernetes.io/component",
        "app.kubernetes.io/managed-by",
    ):
        parts.append((meta["labels"], key))
    parts.append((meta["annotations"], "deployment.kubernetes.io/revision"))
    parts.append((pod["metadata"], "annotations"))
    for key in (
        "strategy",
        "revisionHistoryLimit",
        "podManagementPolicy",
        "updateStrategy",
        "successfulJobsHistoryLimit",
        "failedJobsHistoryLimit",
        "ttlSecondsAfterFinished",
    ):
        if key in obj["spec"]:
            parts.append((obj["spec"], key))
    spec = pod["spec"]
    for key in ("affinity", "initContainers", "priorityClassName", "terminationGracePeriodSeconds"):
        if key in spec:
            parts.append((spec, key))
    if gpu is None and "tolerations" in spec:
        parts.append((spec, "tolerations"))
    containers = spec["containers"]
    parts.extend((containers, side) for side in containers[1:])
    main = containers[0]
    for key in ("livenessProbe", "readinessProbe", "args", "imagePullPolicy"):
        if key in main:
            parts.append((main, key))
    if "ports" in main:
        parts.append((main["ports"], main["ports"][1]))
    parts.extend((main["env"], entry) for entry in main["env"][1:])
    return parts
