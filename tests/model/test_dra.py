"""DRA: pod resource claims resolved to claims, templates and GPU DeviceClasses."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from scanner.inventory import KubeObject, LineMap, Origin
from scanner.model.dra import DraResolver, selects_gpu_driver
from scanner.model.index import ObjectIndex
from scanner.model.workloads import Workload, build_workloads
from scanner.sources.yaml.document import parse_stream

DRA_FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "crds" / "dra.yaml"


def obj(body: dict[str, Any]) -> KubeObject:
    return KubeObject(body, Origin("test.yaml"), LineMap({}))


def build(objects: list[KubeObject], *, index: bool = True) -> list[Workload]:
    workloads, invalid = build_workloads(objects, ObjectIndex(objects) if index else None)
    assert not invalid
    return workloads


def claim_template(name: str, device_class: str, namespace: str | None = "ml") -> KubeObject:
    meta = {"name": name} if namespace is None else {"name": name, "namespace": namespace}
    return obj(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": meta,
            "spec": {
                "spec": {
                    "devices": {
                        "requests": [{"name": "r", "exactly": {"deviceClassName": device_class}}]
                    }
                }
            },
        }
    )


def pod(claims: list[dict[str, Any]], namespace: str | None = "ml") -> KubeObject:
    meta = {"name": "p"} if namespace is None else {"name": "p", "namespace": namespace}
    return obj(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": meta,
            "spec": {"resourceClaims": claims, "containers": [{"name": "main"}]},
        }
    )


def test_fixture_claims_resolve_by_kind_namespace_and_device_class() -> None:
    inventory = parse_stream(DRA_FIXTURE.read_text(encoding="utf-8"), "fixtures/crds/dra.yaml")
    [workload] = build(inventory.objects)
    got = {
        claim["name"]: (
            claim["claimName"],
            claim["template"],
            claim["found"],
            claim["deviceClasses"],
            claim["gpu"],
        )
        for claim in workload.facts["draClaims"]
    }
    assert got == {
        "gpu": ("single-gpu", True, True, ["gpu.nvidia.com"], True),
        "shared": ("shared-h100", False, True, ["h100-80gb"], True),
        "nic": ("nic", True, True, ["rdma-nic"], False),
        "fallback": ("mig-or-nic", True, True, ["rdma-nic", "mig.nvidia.com"], True),
        "missing": ("not-in-this-repo", False, False, [], False),
        "legacy": ("single-gpu", True, True, ["gpu.nvidia.com"], True),
    }
    first, *_, missing, _ = workload.facts["draClaims"]
    assert first["path"] == "spec.resourceClaims[0]"
    assert first["ref"] == "research/ResourceClaimTemplate/single-gpu"
    assert missing["ref"] == ""
    assert workload.facts["gpu"] and workload.facts["gpuViaDra"]
    assert workload.facts["gpuResources"] == []
    line, _ = workload.obj.position(first["path"])
    assert DRA_FIXTURE.read_text().splitlines()[line - 1].strip() == "- name: gpu"


def test_non_gpu_claim_leaves_the_pod_a_non_gpu_workload() -> None:
    objects = [
        claim_template("nic", "rdma-nic"),
        pod([{"name": "nic", "resourceClaimTemplateName": "nic"}]),
    ]
    [workload] = build(objects)
    [claim] = workload.facts["draClaims"]
    assert claim["found"] and claim["deviceClasses"] == ["rdma-nic"] and not claim["gpu"]
    assert not workload.facts["gpu"] and not workload.facts["gpuViaDra"]


def test_claims_resolve_only_within_the_namespace() -> None:
    objects = [
        claim_template("gpu", "gpu.nvidia.com", namespace="other"),
        pod([{"name": "gpu", "resourceClaimTemplateName": "gpu"}]),
    ]
    [workload] = build(objects)
    [claim] = workload.facts["draClaims"]
    assert not claim["found"] and not workload.facts["gpu"]


@pytest.mark.parametrize(
    ("claim_namespace", "pod_namespace"),
    [(None, None), ("default", None), (None, "default"), ("default", "default")],
)
def test_manifests_without_a_namespace_meet_in_default(
    claim_namespace: str | None, pod_namespace: str | None
) -> None:
    objects = [
        claim_template("gpu", "gpu.nvidia.com", namespace=claim_namespace),
        pod([{"name": "gpu", "resourceClaimTemplateName": "gpu"}], namespace=pod_namespace),
    ]
    [workload] = build(objects)
    assert workload.facts["draClaims"][0]["found"] and workload.facts["gpuViaDra"]


def test_a_claim_kind_from_another_api_group_is_not_resolved() -> None:
    lookalike = claim_template("gpu", "gpu.nvidia.com")
    body = dict(lookalike.body, apiVersion="claims.example.com/v1")
    objects = [obj(body), pod([{"name": "gpu", "resourceClaimTemplateName": "gpu"}])]
    [workload] = build(objects)
    assert not workload.facts["draClaims"][0]["found"]


def test_without_an_index_nothing_is_found() -> None:
    objects = [
        claim_template("gpu", "gpu.nvidia.com"),
        pod([{"name": "gpu", "resourceClaimTemplateName": "gpu"}]),
    ]
    [workload] = build(objects, index=False)
    [claim] = workload.facts["draClaims"]
    assert claim["template"] and not claim["found"] and not claim["gpu"]
    assert not workload.facts["gpu"]


def test_v1beta1_resource_claim_with_a_direct_device_class_name() -> None:
    claim = obj(
        {
            "apiVersion": "resource.k8s.io/v1beta1",
            "kind": "ResourceClaim",
            "metadata": {"name": "slice", "namespace": "ml"},
            "spec": {"devices": {"requests": [{"name": "m", "deviceClassName": "mig.nvidia.com"}]}},
        }
    )
    [workload] = build([claim, pod([{"name": "m", "resourceClaimName": "slice"}])])
    [fact] = workload.facts["draClaims"]
    assert not fact["template"] and fact["found"] and fact["gpu"]
    assert fact["ref"] == "ml/ResourceClaim/slice"


def device_class(name: str, expression: str, api_version: str = "resource.k8s.io/v1") -> KubeObject:
    return obj(
        {
            "apiVersion": api_version,
            "kind": "DeviceClass",
            "metadata": {"name": name},
            "spec": {"selectors": [{"cel": {"expression": expression}}]},
        }
    )


def test_device_class_gpu_by_name_or_by_driver_selector() -> None:
    objects = [
        device_class("a100", 'device.driver == "gpu.nvidia.com"'),
        device_class("passthrough", 'device.driver == "vfio.gpu.nvidia.com"'),
        device_class("foreign", 'device.driver == "gpu.nvidia.com"', "example.com/v1"),
    ]
    resolver = DraResolver(ObjectIndex(objects))
    assert resolver.is_gpu_class("a100")
    assert not resolver.is_gpu_class("passthrough")
    assert not resolver.is_gpu_class("foreign")
    assert not resolver.is_gpu_class("absent")
    assert DraResolver().is_gpu_class("gpu.nvidia.com")
    assert DraResolver().is_gpu_class("mig.nvidia.com")
    assert not DraResolver().is_gpu_class("a100")


@pytest.mark.parametrize(
    ("expression", "gpu"),
    [
        ('device.driver == "gpu.nvidia.com"', True),
        ("device.driver=='gpu.nvidia.com'", True),
        ("'gpu.nvidia.com' == device.driver", True),
        ('device.driver in ["example.com", "gpu.nvidia.com"]', True),
        ('device.driver == "vfio.gpu.nvidia.com"', False),
        ('device.driver == "compute-domain.nvidia.com"', False),
        ('device.attributes["gpu.nvidia.com"].index == 0', False),
        ('device.driver == "gpu.nvidia.com.evil"', False),
        # read from the parse, not the text
        ('device.driver == r"gpu.nvidia.com" // the GPU driver', True),
        ('device.driver == """gpu.nvidia.com"""', True),
        ('// device.driver == "gpu.nvidia.com"\ndevice.driver == "x"', False),
        ('device.driver == "x" || "device.driver == \'gpu.nvidia.com\'" == ""', False),
        ('[1].all(device, device.driver == "gpu.nvidia.com")', False),  # another variable
        ('device.driver == "gpu.nvidia.com" &&', False),  # not CEL
    ],
)
def test_gpu_driver_selector(expression: str, gpu: bool) -> None:
    assert selects_gpu_driver(expression) is gpu


def test_entries_without_a_reference_are_skipped() -> None:
    [workload] = build([pod([{"name": "x"}, "garbage", {"name": "y", "source": {}}])])
    assert workload.facts["draClaims"] == []


def test_dra_in_a_crd_template_uses_the_template_path() -> None:
    job = obj(
        {
            "apiVersion": "kubeflow.org/v1",
            "kind": "PyTorchJob",
            "metadata": {"name": "j", "namespace": "ml"},
            "spec": {
                "pytorchReplicaSpecs": {
                    "Worker": {
                        "template": {
                            "spec": {
                                "resourceClaims": [
                                    {"name": "gpu", "resourceClaimTemplateName": "gpu"}
                                ],
                                "containers": [{"name": "pytorch"}],
                            }
                        }
                    }
                }
            },
        }
    )
    [workload] = build([claim_template("gpu", "gpu.nvidia.com"), job])
    [claim] = workload.facts["draClaims"]
    assert claim["path"] == "spec.pytorchReplicaSpecs.Worker.template.spec.resourceClaims[0]"
    assert workload.facts["gpuViaDra"] and workload.facts["template"] == "Worker"
