"""Workloads from GPU workload CRDs: one workload per pod template, each at its own path.

The fixtures in fixtures/crds/ mark every pod spec line with ``# pod-spec: <template>``,
so each test also proves the path lands on the right line of the real file.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from scanner.inventory import KubeObject, LineMap, Origin
from scanner.kinds import (
    CORE_WORKLOAD_KINDS,
    CRD_WORKLOAD_KINDS,
    WORKLOAD_KINDS,
    api_group,
    workload_kind,
)
from scanner.model.workloads import Workload, build_workloads
from scanner.sources.yaml.document import parse_stream

CRDS = Path(__file__).resolve().parents[2] / "fixtures" / "crds"
MARKER = re.compile(r"#\s*pod-spec:(?P<template>.*)$")


def load(name: str) -> list[KubeObject]:
    inventory = parse_stream((CRDS / name).read_text(encoding="utf-8"), f"fixtures/crds/{name}")
    assert not inventory.invalid
    return inventory.objects


def workloads_of(name: str) -> list[Workload]:
    workloads, invalid = build_workloads(load(name))
    assert not invalid
    return workloads


def obj(body: dict[str, Any]) -> KubeObject:
    return KubeObject(body, Origin("test.yaml"), LineMap({}))


CRD_FILES = sorted(path.name for path in CRDS.glob("*.yaml") if path.name != "lookalikes.yaml")


@pytest.mark.parametrize("name", CRD_FILES)
def test_every_marked_pod_spec_is_a_workload_at_its_line(name: str) -> None:
    marked = {
        (match.group("template").strip(), number)
        for number, line in enumerate((CRDS / name).read_text().splitlines(), start=1)
        if (match := MARKER.search(line))
    }
    found = {
        (w.facts["template"], w.obj.position(w.facts["podSpecPath"])[0]) for w in workloads_of(name)
    }
    assert marked and found == marked


def c(path: str, name: str, type_: str = "container") -> tuple[str, str, str]:
    return (path, name, type_)


EXPECTED: dict[str, list[tuple[str, str, list[tuple[str, str, str]], bool]]] = {
    "pytorchjob.yaml": [
        (
            "Master",
            "spec.pytorchReplicaSpecs.Master.template.spec",
            [c("spec.pytorchReplicaSpecs.Master.template.spec.containers[0]", "pytorch")],
            True,
        ),
        (
            "Worker",
            "spec.pytorchReplicaSpecs.Worker.template.spec",
            [
                c(
                    "spec.pytorchReplicaSpecs.Worker.template.spec.initContainers[0]",
                    "fetch-weights",
                    "initContainer",
                ),
                c("spec.pytorchReplicaSpecs.Worker.template.spec.containers[0]", "pytorch"),
            ],
            True,
        ),
    ],
    "tfjob.yaml": [
        (
            "PS",
            "spec.tfReplicaSpecs.PS.template.spec",
            [c("spec.tfReplicaSpecs.PS.template.spec.containers[0]", "tensorflow")],
            False,
        ),
        (
            "Worker",
            "spec.tfReplicaSpecs.Worker.template.spec",
            [c("spec.tfReplicaSpecs.Worker.template.spec.containers[0]", "tensorflow")],
            True,
        ),
    ],
    "mpijob.yaml": [
        (
            "Launcher",
            "spec.mpiReplicaSpecs.Launcher.template.spec",
            [c("spec.mpiReplicaSpecs.Launcher.template.spec.containers[0]", "launcher")],
            False,
        ),
        (
            "Worker",
            "spec.mpiReplicaSpecs.Worker.template.spec",
            [c("spec.mpiReplicaSpecs.Worker.template.spec.containers[0]", "worker")],
            True,
        ),
    ],
    "raycluster.yaml": [
        (
            "headGroupSpec",
            "spec.headGroupSpec.template.spec",
            [c("spec.headGroupSpec.template.spec.containers[0]", "ray-head")],
            False,
        ),
        (
            "workerGroupSpecs[0]",
            "spec.workerGroupSpecs[0].template.spec",
            [c("spec.workerGroupSpecs[0].template.spec.containers[0]", "ray-worker")],
            False,
        ),
        (
            "workerGroupSpecs[1]",
            "spec.workerGroupSpecs[1].template.spec",
            [c("spec.workerGroupSpecs[1].template.spec.containers[0]", "ray-worker")],
            True,
        ),
    ],
    "rayjob.yaml": [
        (
            "headGroupSpec",
            "spec.rayClusterSpec.headGroupSpec.template.spec",
            [c("spec.rayClusterSpec.headGroupSpec.template.spec.containers[0]", "ray-head")],
            False,
        ),
        (
            "workerGroupSpecs[0]",
            "spec.rayClusterSpec.workerGroupSpecs[0].template.spec",
            [
                c(
                    "spec.rayClusterSpec.workerGroupSpecs[0].template.spec.containers[0]",
                    "ray-worker",
                )
            ],
            True,
        ),
        (
            "submitterPodTemplate",
            "spec.submitterPodTemplate.spec",
            [c("spec.submitterPodTemplate.spec.containers[0]", "submitter")],
            False,
        ),
    ],
    "rayservice.yaml": [
        (
            "headGroupSpec",
            "spec.rayClusterConfig.headGroupSpec.template.spec",
            [c("spec.rayClusterConfig.headGroupSpec.template.spec.containers[0]", "ray-head")],
            False,
        ),
        (
            "workerGroupSpecs[0]",
            "spec.rayClusterConfig.workerGroupSpecs[0].template.spec",
            [
                c(
                    "spec.rayClusterConfig.workerGroupSpecs[0].template.spec.containers[0]",
                    "ray-worker",
                )
            ],
            True,
        ),
    ],
    "jobset.yaml": [
        (
            "replicatedJobs[0]",
            "spec.replicatedJobs[0].template.spec.template.spec",
            [c("spec.replicatedJobs[0].template.spec.template.spec.containers[0]", "driver")],
            False,
        ),
        (
            "replicatedJobs[1]",
            "spec.replicatedJobs[1].template.spec.template.spec",
            [c("spec.replicatedJobs[1].template.spec.template.spec.containers[0]", "trainer")],
            True,
        ),
    ],
    "leaderworkerset.yaml": [
        (
            "leaderTemplate",
            "spec.leaderWorkerTemplate.leaderTemplate.spec",
            [c("spec.leaderWorkerTemplate.leaderTemplate.spec.containers[0]", "vllm-leader")],
            True,
        ),
        (
            "workerTemplate",
            "spec.leaderWorkerTemplate.workerTemplate.spec",
            [c("spec.leaderWorkerTemplate.workerTemplate.spec.containers[0]", "vllm-worker")],
            True,
        ),
    ],
    "inferenceservice.yaml": [
        ("predictor", "spec.predictor", [c("spec.predictor.model", "kserve-container")], True),
        (
            "transformer",
            "spec.transformer",
            [c("spec.transformer.containers[0]", "tokenizer")],
            False,
        ),
    ],
    "inferenceservice-multinode.yaml": [
        (
            "predictor",
            "spec.predictor",
            [c("spec.predictor.containers[0]", "kserve-container")],
            True,
        ),
        (
            "predictor.workerSpec",
            "spec.predictor.workerSpec",
            [c("spec.predictor.workerSpec.containers[0]", "worker-container")],
            True,
        ),
        ("explainer", "spec.explainer", [c("spec.explainer.art", "kserve-container")], False),
    ],
    "rollout.yaml": [
        ("", "spec.template.spec", [c("spec.template.spec.containers[0]", "ranker")], True),
    ],
    "llminferenceservice.yaml": [
        (
            "template",
            "spec.template",
            [c("spec.template.containers[0]", "main")],
            True,
        ),
        ("worker", "spec.worker", [c("spec.worker.containers[0]", "main")], True),
        (
            "prefill.template",
            "spec.prefill.template",
            [c("spec.prefill.template.containers[0]", "main")],
            True,
        ),
        (
            "router.scheduler.template",
            "spec.router.scheduler.template",
            [c("spec.router.scheduler.template.containers[0]", "main")],
            False,
        ),
    ],
    "trainingruntime.yaml": [
        *(
            (
                name,
                f"spec.template.spec.replicatedJobs[{index}].template.spec.template.spec",
                [
                    c(
                        f"spec.template.spec.replicatedJobs[{index}].template.spec.template.spec"
                        ".containers[0]",
                        name,
                    )
                ],
                name == "node",
            )
            for index, name in enumerate(("dataset-initializer", "model-initializer", "node"))
        ),
        (
            "replicatedJobs[0]",
            "spec.template.spec.replicatedJobs[0].template.spec.template.spec",
            [
                c(
                    "spec.template.spec.replicatedJobs[0].template.spec.template.spec"
                    ".containers[0]",
                    "launcher",
                )
            ],
            False,
        ),
    ],
    "kubeflow-jobs.yaml": [
        (
            "Worker",
            "spec.paddleReplicaSpecs.Worker.template.spec",
            [c("spec.paddleReplicaSpecs.Worker.template.spec.containers[0]", "paddle")],
            True,
        ),
        (
            "Master",
            "spec.xgbReplicaSpecs.Master.template.spec",
            [c("spec.xgbReplicaSpecs.Master.template.spec.containers[0]", "xgboost")],
            False,
        ),
        (
            "Worker",
            "spec.jaxReplicaSpecs.Worker.template.spec",
            [c("spec.jaxReplicaSpecs.Worker.template.spec.containers[0]", "jax")],
            True,
        ),
    ],
    "volcano-job.yaml": [
        (
            "mpimaster",
            "spec.tasks[0].template.spec",
            [c("spec.tasks[0].template.spec.containers[0]", "mpimaster")],
            False,
        ),
        (
            "tasks[1]",
            "spec.tasks[1].template.spec",
            [c("spec.tasks[1].template.spec.containers[0]", "mpiworker")],
            True,
        ),
    ],
    "notebook.yaml": [
        ("", "spec.template.spec", [c("spec.template.spec.containers[0]", "jupyter-gpu")], True),
    ],
}


def test_every_crd_fixture_has_expectations() -> None:
    assert set(EXPECTED) == set(CRD_FILES) - {"dra.yaml"}
    kinds = {w.obj.kind for name in EXPECTED for w in workloads_of(name)}
    assert kinds == CRD_WORKLOAD_KINDS


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_templates_paths_containers_and_gpu(name: str) -> None:
    got = [
        (
            w.facts["template"],
            w.facts["podSpecPath"],
            [(x["path"], x["name"], x["type"]) for x in w.facts["containers"]],
            w.is_gpu,
        )
        for w in workloads_of(name)
    ]
    assert got == EXPECTED[name]


def test_gpu_resource_paths_point_at_the_quantity_line() -> None:
    text = (CRDS / "inferenceservice.yaml").read_text().splitlines()
    [predictor, _] = workloads_of("inferenceservice.yaml")
    [entry] = predictor.facts["gpuResources"]
    assert entry["limitPath"] == "spec.predictor.model.resources.limits['nvidia.com/gpu']"
    assert entry["container"] == "kserve-container" and entry["limitCount"] == 1
    line, _ = predictor.obj.position(entry["limitPath"])
    assert text[line - 1].strip() == "nvidia.com/gpu: 1"


def test_mig_resource_in_a_rollout() -> None:
    [rollout] = workloads_of("rollout.yaml")
    assert [e["name"] for e in rollout.facts["gpuResources"]] == ["nvidia.com/mig-1g.10gb"]


def test_kserve_pods_carry_object_and_component_labels() -> None:
    predictor, transformer = workloads_of("inferenceservice.yaml")
    assert predictor.facts["podLabels"] == {"team": "serving", "tier": "gpu"}
    assert transformer.facts["podLabels"] == {"team": "serving"}
    assert predictor.facts["serviceAccountName"] == "llama-serving"
    assert predictor.facts["runtimeClassName"] == ""


def test_pod_template_metadata_and_pod_fields_per_template() -> None:
    master, worker = workloads_of("pytorchjob.yaml")
    assert master.facts["podLabels"] == {"team": "research"}
    assert worker.facts["podLabels"] == {}
    assert master.facts["runtimeClassName"] == "nvidia"
    assert worker.facts["runtimeClassName"] == ""
    assert master.facts["namespace"] == worker.facts["namespace"] == "research"
    assert master.facts["kind"] == "PyTorchJob" and master.facts["name"] == "llama-finetune"


def test_same_kind_from_another_api_group_is_not_a_workload() -> None:
    assert workloads_of("lookalikes.yaml") == []


@pytest.mark.parametrize(
    ("kind", "api_version", "known"),
    [
        ("PyTorchJob", "kubeflow.org/v1", True),
        ("PyTorchJob", "ml.example.com/v1", False),
        ("MPIJob", "kubeflow.org/v2beta1", True),
        ("Rollout", "argoproj.io/v1alpha1", True),
        ("Rollout", "rollouts.kruise.io/v1alpha1", False),
        ("InferenceService", "serving.kserve.io/v1beta1", True),
        ("InferenceService", "serving.kubeflow.org/v1alpha2", False),
        ("RayCluster", "ray.io/v1alpha1", True),
        ("JobSet", "jobset.x-k8s.io/v1alpha2", True),
        ("LeaderWorkerSet", "leaderworkerset.x-k8s.io/v1", True),
        ("LLMInferenceService", "serving.kserve.io/v1alpha1", True),
        ("ClusterTrainingRuntime", "trainer.kubeflow.org/v1alpha1", True),
        ("TrainJob", "trainer.kubeflow.org/v1alpha1", False),  # patches, no pod template
        # Knative's Service is left to the unmodelled-kind warning: rules name kinds
        # without groups, and a rule over core Services must not audit Knative's.
        ("Service", "serving.knative.dev/v1", False),
        ("Job", "batch.volcano.sh/v1alpha1", True),
        ("Job", "batch/v1", True),
        ("Deployment", "apps/v1", True),
        ("Deployment", "v1", True),  # core kinds are recognised by kind alone, as before
        ("ConfigMap", "v1", False),
        ("PyTorchJob", "", False),
    ],
)
def test_kinds_match_by_kind_and_api_group(kind: str, api_version: str, known: bool) -> None:
    assert (workload_kind(kind, api_version) is not None) is known


def test_named_kind_sets() -> None:
    assert CORE_WORKLOAD_KINDS | CRD_WORKLOAD_KINDS == WORKLOAD_KINDS
    assert {"Job"} == CORE_WORKLOAD_KINDS & CRD_WORKLOAD_KINDS  # Volcano's, by its group
    assert "Deployment" in CORE_WORKLOAD_KINDS and "PyTorchJob" in CRD_WORKLOAD_KINDS
    assert api_group("apps/v1") == "apps" and api_group("v1") == ""


def test_core_kinds_have_no_template_name() -> None:
    [workload], _ = build_workloads(
        [obj({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {}})]
    )
    assert workload.facts["template"] == ""


def test_a_template_pod_spec_that_is_not_a_mapping_is_pg003_and_the_others_still_count() -> None:
    body = {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": "rc"},
        "spec": {
            "headGroupSpec": {"template": {"spec": {"containers": []}}},
            "workerGroupSpecs": [{"template": {"spec": ["not", "a", "map"]}}],
        },
    }
    workloads, [invalid] = build_workloads([obj(body)])
    assert [w.facts["template"] for w in workloads] == ["headGroupSpec"]
    assert invalid.rule_id == "PG003"
    assert invalid.path == "spec.workerGroupSpecs[0].template.spec"
    assert "RayCluster rc" in invalid.message


KF, RAY, JOBSET = "kubeflow.org/v1", "ray.io/v1", "jobset.x-k8s.io/v1alpha2"


@pytest.mark.parametrize(
    ("kind", "api_version", "spec"),
    [
        ("PyTorchJob", KF, {"pytorchReplicaSpecs": []}),
        ("PyTorchJob", KF, {"pytorchReplicaSpecs": {"Worker": "x"}}),
        ("PyTorchJob", KF, {"pytorchReplicaSpecs": {"Worker": {"template": {"spec": None}}}}),
        ("RayCluster", RAY, {"workerGroupSpecs": {"a": 1}}),
        ("RayCluster", RAY, {"workerGroupSpecs": ["x", None]}),
        ("JobSet", JOBSET, {"replicatedJobs": [{"template": []}]}),
        ("LeaderWorkerSet", "leaderworkerset.x-k8s.io/v1", "x"),
        ("InferenceService", "serving.kserve.io/v1beta1", {"predictor": None}),
        ("Rollout", "argoproj.io/v1alpha1", {"workloadRef": {"name": "d"}}),
    ],
)
def test_malformed_or_absent_templates_are_quietly_not_workloads(
    kind: str, api_version: str, spec: Any
) -> None:
    body = {"apiVersion": api_version, "kind": kind, "metadata": {"name": "x"}, "spec": spec}
    workloads, invalid = build_workloads([obj(body)])
    assert workloads == [] and invalid == []


def test_kserve_component_that_is_not_a_mapping_is_pg003() -> None:
    body = {
        "apiVersion": "serving.kserve.io/v1beta1",
        "kind": "InferenceService",
        "metadata": {"name": "isvc"},
        "spec": {"predictor": ["bad"]},
    }
    workloads, [invalid] = build_workloads([obj(body)])
    assert workloads == [] and invalid.path == "spec.predictor"


def test_kserve_framework_container_with_its_own_name_and_odd_fields() -> None:
    body = {
        "apiVersion": "serving.kserve.io/v1beta1",
        "kind": "InferenceService",
        "metadata": {"name": "isvc"},
        "spec": {
            "predictor": {
                "triton": {"name": "triton", "securityContext": {"privileged": True}},
                "sklearn": "not a container",
                "initContainers": [{"name": "warm"}],
                "containers": [{"name": "sidecar"}],
            }
        },
    }
    [workload], _ = build_workloads([obj(body)])
    assert [(x["name"], x["path"]) for x in workload.facts["containers"]] == [
        ("warm", "spec.predictor.initContainers[0]"),
        ("triton", "spec.predictor.triton"),
        ("sidecar", "spec.predictor.containers[0]"),
    ]
    assert workload.facts["containers"][1]["securityContext"] == {"privileged": True}
