from __future__ import annotations

from typing import Any

import pytest

from scanner.inventory import KubeObject, LineMap, Origin
from scanner.model.workloads import GPU_RESOURCE, build_workloads, selected_labels, template_facts


def _required(expressions: list[dict[str, Any]]) -> dict[str, Any]:
    """Node affinity with one required term of ``expressions``."""
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": expressions}]
            }
        }
    }


def obj(body: dict[str, Any]) -> KubeObject:
    return KubeObject(body, Origin("test.yaml"), LineMap({}))


def deployment(pod_spec: Any, namespace: str | None = "ml") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "train"}
    if namespace is not None:
        meta["namespace"] = namespace
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": meta,
        "spec": {"template": {"metadata": {"labels": {"app": "t"}}, "spec": pod_spec}},
    }


@pytest.mark.parametrize(
    ("kind", "body", "path"),
    [
        ("Pod", {"spec": {"containers": []}}, "spec"),
        ("Deployment", {"spec": {"template": {"spec": {"containers": []}}}}, "spec.template.spec"),
        ("DaemonSet", {"spec": {"template": {"spec": {"containers": []}}}}, "spec.template.spec"),
        (
            "CronJob",
            {"spec": {"jobTemplate": {"spec": {"template": {"spec": {"containers": []}}}}}},
            "spec.jobTemplate.spec.template.spec",
        ),
    ],
)
def test_pod_spec_path_per_kind(kind: str, body: dict[str, Any], path: str) -> None:
    workloads, invalid = build_workloads(
        [obj({"apiVersion": "v1", "kind": kind, "metadata": {"name": "x"}, **body})]
    )
    assert not invalid
    assert workloads[0].facts["podSpecPath"] == path


def test_containers_of_every_type_have_their_own_path() -> None:
    spec = {
        "initContainers": [{"name": "fetch", "image": "busybox"}],
        "containers": [{"name": "a"}, {"name": "b"}],
        "ephemeralContainers": [{"name": "debug"}],
    }
    [workload], _ = build_workloads([obj(deployment(spec))])
    got = [(c["name"], c["type"], c["path"]) for c in workload.facts["containers"]]
    assert got == [
        ("fetch", "initContainer", "spec.template.spec.initContainers[0]"),
        ("a", "container", "spec.template.spec.containers[0]"),
        ("b", "container", "spec.template.spec.containers[1]"),
        ("debug", "ephemeralContainer", "spec.template.spec.ephemeralContainers[0]"),
    ]


@pytest.mark.parametrize(
    ("name", "gpu"),
    [
        ("nvidia.com/gpu", True),
        ("nvidia.com/gpu.shared", True),
        ("nvidia.com/mig-1g.10gb", True),
        ("nvidia.com/mig-3g.40gb.shared", True),
        # The device plugin's MIG names: "mig-" + profile, "+" written ".".
        ("nvidia.com/mig-1g.24gb-me", True),
        ("nvidia.com/mig-1g.24gb-me.shared", True),
        ("nvidia.com/mig-1g.10gb.me", True),
        ("nvidia.com/mig-2g.48gb.me.all", True),
        ("nvidia.com/mig-1g.10gb+me", False),  # not a Kubernetes resource name
        ("nvidia.com/mig-", False),
        ("nvidia.com/gpu-foo", False),
        ("amd.com/gpu", False),
        ("cpu", False),
    ],
)
def test_gpu_resource_names(name: str, gpu: bool) -> None:
    assert bool(GPU_RESOURCE.match(name)) is gpu


def test_gpu_request_in_an_init_container_makes_a_gpu_workload() -> None:
    spec = {
        "initContainers": [
            {
                "name": "warm",
                "resources": {"requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": 1}},
            }
        ],
        "containers": [{"name": "main"}],
    }
    [workload], _ = build_workloads([obj(deployment(spec))])
    assert workload.is_gpu
    [entry] = workload.facts["gpuResources"]
    assert entry == {
        "name": "nvidia.com/gpu",
        "container": "warm",
        "containerPath": "spec.template.spec.initContainers[0]",
        "hasLimit": True,
        "hasRequest": True,
        "limit": "1",
        "request": "1",
        "limitCount": 1,
        "requestCount": 1,
        "limitPath": "spec.template.spec.initContainers[0].resources.limits['nvidia.com/gpu']",
        "requestPath": "spec.template.spec.initContainers[0].resources.requests['nvidia.com/gpu']",
    }


def test_non_gpu_workload() -> None:
    [workload], _ = build_workloads(
        [obj(deployment({"containers": [{"name": "a", "resources": {"limits": {"cpu": "1"}}}]}))]
    )
    assert not workload.is_gpu
    assert workload.facts["gpuResources"] == []


def test_namespace_defaults_to_default() -> None:
    [workload], _ = build_workloads([obj(deployment({"containers": []}, namespace=None))])
    assert workload.facts["namespace"] == "default"
    assert workload.facts["namespaceSet"] is False


def test_pod_spec_that_is_not_a_mapping_is_pg003() -> None:
    workloads, [invalid] = build_workloads([obj(deployment(["not", "a", "map"]))])
    assert workloads == []
    assert invalid.rule_id == "PG003"
    assert invalid.path == "spec.template.spec"


def test_missing_pod_spec_is_silently_not_a_workload() -> None:
    workloads, invalid = build_workloads(
        [obj({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "x"}})]
    )
    assert workloads == [] and invalid == []


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"nodeSelector": {"sku": "h100"}}, {"sku": ["h100"]}),
        (
            {
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {
                                    "matchExpressions": [
                                        {"key": "sku", "operator": "In", "values": ["a100"]}
                                    ]
                                },
                                {
                                    "matchExpressions": [
                                        {"key": "sku", "operator": "In", "values": ["h100"]},
                                        {"key": "zone", "operator": "In", "values": ["a"]},
                                    ]
                                },
                            ]
                        }
                    }
                }
            },
            {"sku": ["a100", "h100"]},
        ),
        (
            {
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {
                                    "matchExpressions": [
                                        {"key": "sku", "operator": "In", "values": ["a100"]}
                                    ]
                                },
                                {
                                    "matchExpressions": [
                                        {"key": "zone", "operator": "In", "values": ["a"]}
                                    ]
                                },
                            ]
                        }
                    }
                }
            },
            {},
        ),
        (
            {
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {"matchExpressions": [{"key": "sku", "operator": "Exists"}]},
                            ]
                        }
                    }
                }
            },
            {},
        ),
        (
            {
                "affinity": {
                    "nodeAffinity": {
                        "preferredDuringSchedulingIgnoredDuringExecution": [
                            {
                                "weight": 1,
                                "preference": {
                                    "matchExpressions": [
                                        {"key": "sku", "operator": "In", "values": ["a100"]}
                                    ]
                                },
                            }
                        ]
                    }
                }
            },
            {},
        ),
        ({"nodeSelector": "garbage", "affinity": ["garbage"]}, {}),
        # nodeSelector and node affinity must both hold: the values narrow.
        (
            {
                "nodeSelector": {"sku": "h100"},
                "affinity": _required(
                    [{"key": "sku", "operator": "In", "values": ["a100", "h100"]}]
                ),
            },
            {"sku": ["h100"]},
        ),
        (
            {
                "nodeSelector": {"sku": "l4"},
                "affinity": _required(
                    [{"key": "sku", "operator": "In", "values": ["a100", "h100"]}]
                ),
            },
            {"sku": []},
        ),
        # NotIn in the same term removes values (found in review).
        (
            {
                "affinity": _required(
                    [
                        {"key": "sku", "operator": "In", "values": ["a100", "h100"]},
                        {"key": "sku", "operator": "NotIn", "values": ["h100"]},
                    ]
                )
            },
            {"sku": ["a100"]},
        ),
        # The expressions of one term are ANDed.
        (
            {
                "affinity": _required(
                    [
                        {"key": "sku", "operator": "In", "values": ["a100", "h100"]},
                        {"key": "sku", "operator": "In", "values": ["h100", "l4"]},
                    ]
                )
            },
            {"sku": ["h100"]},
        ),
    ],
)
def test_selected_labels(spec: dict[str, Any], expected: dict[str, list[str]]) -> None:
    assert selected_labels(spec) == expected


def test_pod_gpu_counts_add_up_as_the_scheduler_does() -> None:
    """Containers and sidecars run together; an init container runs alone beside the
    sidecars declared before it; the larger wins. Zero and malformed counts add 0."""

    gpu = "nvidia.com/gpu"

    def container(name: str, gpus: object, **extra: Any) -> dict[str, Any]:
        return {"name": name, "image": "x", "resources": {"limits": {gpu: gpus}}, **extra}

    spec = {
        "initContainers": [
            container("first", 5),
            container("proxy", 1, restartPolicy="Always"),
            container("warm", 6),
        ],
        "containers": [container("a", 2), container("b", "two")],
    }
    facts = template_facts(spec, {}, "spec")
    # running: 2 + 0 + sidecar 1 = 3; alone: max(5, 6 + 1) = 7
    assert facts["gpuPodCounts"] == {gpu: {"pod": 7, "container": 6}}
