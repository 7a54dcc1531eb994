"""Objects of kinds poolgate does not model: GPU asks and pod specs are found and named.

Issue 24, item 5: a KServe LLMInferenceService and a Kubeflow TrainJob asking for GPUs
gave "no findings" and exit 0 with no word. fixtures/unmodelled/ holds GPU workloads of
such kinds (each GPU line marked ``# gpu: <names> at <path>``) and GPU resource names
that are not workloads (NodePool limits, quotas, ConfigMap text, a count of zero).
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from scanner.inventory import KubeObject, LineMap, Origin
from scanner.model.unmodelled import (
    MAX_DEPTH,
    MAX_NODES,
    UNCHECKED_SHOWN,
    is_gpu_resource,
    search,
    unchecked_pod_specs,
)
from scanner.sources.yaml.document import parse_stream

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
MARK = re.compile(r"#\s*gpu:\s*(?P<names>.+?) at (?P<path>\S+)$")


def load(path: Path) -> list[KubeObject]:
    inventory = parse_stream(path.read_text(encoding="utf-8"), path.name)
    assert not inventory.invalid
    return inventory.objects


def obj(body: dict[str, Any]) -> KubeObject:
    return KubeObject(body, Origin("test.yaml"), LineMap({}))


def test_every_gpu_ask_of_an_unmodelled_kind_is_named_at_its_line() -> None:
    path = FIXTURES / "unmodelled" / "gpu-workloads.yaml"
    marked = {
        (match.group("names"), match.group("path"), number)
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        if (match := MARK.search(line))
    }
    objects = load(path)
    found = set()
    for item in objects:
        result = search(item.kind, item.api_version, item.body)
        assert result is not None and result.complete
        for ask in result.gpu:
            found.add((", ".join(ask.names), ask.path, item.position(ask.path)[0]))
    assert marked and found == marked
    warnings = unchecked_pod_specs(objects)
    assert [w.line for w in warnings] == sorted(line for *_, line in marked)[:-1]  # one per object
    assert warnings[0].message == (
        "GPU workload not checked: Workflow finetune (argoproj.io/v1alpha1) asks for "
        "nvidia.com/gpu at spec.templates[2].container, and poolgate does not model this kind"
    )
    assert warnings[1].message.startswith(
        "GPU workload not checked: TrainJob multi-node (trainer.kubeflow.org/v1alpha1) asks "
        "for nvidia.com/gpu at spec.trainer,"
    )
    assert "asks for amd.com/gpu at spec.runner; DRA claim at spec.helper," in warnings[3].message


def test_gpu_resource_names_that_are_not_workloads_are_not_reported() -> None:
    objects = load(FIXTURES / "unmodelled" / "not-workloads.yaml")
    assert len(objects) == 5
    assert unchecked_pod_specs(objects) == []


@pytest.mark.parametrize(
    ("name", "gpu"),
    [
        ("nvidia.com/gpu", True),
        ("nvidia.com/gpu.shared", True),
        ("nvidia.com/mig-3g.40gb", True),
        ("nvidia.com/gpumem", True),  # HAMi
        ("amd.com/gpu", True),
        ("amd.com/cpu", False),
        ("requests.nvidia.com/gpu", False),  # a ResourceQuota key
        ("cpu", False),
        (7, False),
    ],
)
def test_gpu_resource_names(name: object, gpu: bool) -> None:
    assert is_gpu_resource(name) is gpu


def test_kinds_poolgate_models_and_kubernetes_groups_are_not_searched() -> None:
    crds = FIXTURES / "crds"
    for name in ("llminferenceservice.yaml", "trainingruntime.yaml", "volcano-job.yaml"):
        for item in load(crds / name):
            assert search(item.kind, item.api_version, item.body) is None
    pod = {"spec": {"containers": [{"image": "x", "resources": {"limits": {"nvidia.com/gpu": 1}}}]}}
    assert search("Pod", "v1", pod) is None
    assert search("Whatever", "apps/v1", pod) is None
    # A modelled kind with no pod template (an LLMInferenceService left to its presets)
    # is searched like any other.
    bare = {"spec": {"model": {"uri": "hf://x"}}}
    result = search("LLMInferenceService", "serving.kserve.io/v1alpha1", bare)
    assert result is not None and result.gpu == () and result.pod_spec is None


def test_a_pod_spec_without_gpus_is_still_named() -> None:
    knative_revision = {
        "apiVersion": "serving.knative.dev/v1",
        "kind": "Revision",
        "metadata": {"name": "r1"},
        "spec": {"containers": [{"image": "ghcr.io/acme/app:1"}]},
    }
    [warning] = unchecked_pod_specs([obj(knative_revision)])
    assert warning.message == (
        "Revision r1 (serving.knative.dev/v1) has a pod spec at spec that was not checked: "
        "poolgate does not know where this kind keeps its pod templates"
    )
    # Container patches without an image (the Prometheus operator's) are not pod specs.
    prometheus = {"spec": {"containers": [{"name": "prometheus", "args": ["--x"]}]}}
    result = search("Prometheus", "monitoring.coreos.com/v1", prometheus)
    assert result is not None and result.pod_spec is None and result.gpu == ()


def test_an_in_house_crd_named_like_a_modelled_one_is_searched() -> None:
    lookalike = next(
        o
        for o in load(FIXTURES / "crds" / "lookalikes.yaml")
        if o.api_version == "ml.example.com/v1"
    )
    result = search(lookalike.kind, lookalike.api_version, lookalike.body)
    assert result is not None
    assert result.pod_spec == "spec.pytorchReplicaSpecs.Worker.template.spec"


def seldon(name: str) -> dict[str, Any]:
    container = {"name": "m", "image": "x", "resources": {"limits": {"nvidia.com/gpu": 1}}}
    return {
        "apiVersion": "machinelearning.seldon.io/v1",
        "kind": "SeldonDeployment",
        "metadata": {"name": name, "namespace": "ml"},
        "spec": {"predictors": [{"componentSpecs": [{"spec": {"containers": [container]}}]}]},
    }


def test_twenty_per_kind_then_a_count_and_context_objects_are_not_reported() -> None:
    objects = [obj(seldon(f"s{index:02}")) for index in range(25)]
    warnings = unchecked_pod_specs([*objects, replace(obj(seldon("ctx")), context_only=True)])
    assert len(warnings) == UNCHECKED_SHOWN + 1
    assert warnings[0].message.startswith("GPU workload not checked: SeldonDeployment s00 ")
    assert warnings[-1].message == (
        "5 more SeldonDeployment objects (machinelearning.seldon.io/v1) hold pods or GPU "
        "requests that were not checked"
    )


def test_many_gpu_paths_are_named_five_then_counted() -> None:
    container = {"name": "w", "resources": {"limits": {"nvidia.com/gpu": 1}}}
    body = {"apiVersion": "x.io/v1", "kind": "Fleet", "metadata": {"name": "f"}}
    body["spec"] = {"workers": [dict(container) for _ in range(8)]}
    [warning] = unchecked_pod_specs([obj(body)])
    assert warning.message.count("nvidia.com/gpu at spec.workers[") == 5
    assert "(and 3 more)" in warning.message


def _nested(depth: int, leaf: object) -> dict[str, Any]:
    value: object = leaf
    for _ in range(depth):
        value = {"a": value}
    return {"apiVersion": "x.io/v1", "kind": "Deep", "metadata": {"name": "d"}, "spec": value}


def test_the_walk_is_bounded_and_an_object_it_could_not_finish_is_reported() -> None:
    gpu = {"name": "w", "resources": {"limits": {"nvidia.com/gpu": 1}}}
    # Within the bounds a deep GPU container is found...
    shallow = _nested(MAX_DEPTH - 3, gpu)
    result = search("Deep", "x.io/v1", shallow)
    assert result is not None and result.complete and len(result.gpu) == 1
    # ...past them the object is reported as not searched, never passed as clean.
    for body in (
        _nested(MAX_DEPTH + 5, gpu),
        {
            "apiVersion": "x.io/v1",
            "kind": "Wide",
            "metadata": {"name": "w"},
            "spec": {"items": [[{}] for _ in range(MAX_NODES)] + [gpu]},
        },
    ):
        result = search(str(body["kind"]), "x.io/v1", body)
        assert result is not None and not result.complete
        [warning] = unchecked_pod_specs([obj(body)])
        assert "was not searched for pods and GPU requests to its end" in warning.message


def test_a_knative_service_asking_for_a_gpu_is_warned_about() -> None:
    """Knative's Service is not modelled (its kind name is core Service's, and rules
    name kinds without groups), so its GPU pods get the warning."""
    service = {
        "apiVersion": "serving.knative.dev/v1",
        "kind": "Service",
        "metadata": {"name": "whisper", "namespace": "team-a"},
        "spec": {
            "template": {
                "spec": {
                    "containers": [
                        {
                            "image": "ghcr.io/acme/whisper:1",
                            "resources": {"limits": {"nvidia.com/gpu": 1}},
                        }
                    ]
                }
            }
        },
    }
    [warning] = unchecked_pod_specs([obj(service)])
    assert warning.message == (
        "GPU workload not checked: Service whisper (serving.knative.dev/v1) asks for "
        "nvidia.com/gpu at spec.template.spec.containers[0], and poolgate does not model "
        "this kind"
    )
