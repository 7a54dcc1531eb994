"""What the GPU Operator makes of a ClusterPolicy: version, CDI, runtime (PG110)."""

from __future__ import annotations

from typing import Any

from scanner.model.gpuoperator import operator_facts
from scanner.model.index import ObjectIndex
from scanner.sources.yaml.document import parse_stream


def _facts(*documents: str) -> dict[str, Any]:
    inventory = parse_stream("---\n".join(documents), "t.yaml")
    [facts] = operator_facts(ObjectIndex(inventory.objects)).values()
    return facts


def _policy(labels: str = "{}", spec: str = "{}") -> str:
    return f"apiVersion: nvidia.com/v1\nkind: ClusterPolicy\nmetadata:\n  name: p\n  labels: {labels}\nspec: {spec}\n"


def _operator(image: str, name: str = "gpu-operator") -> str:
    return f"""\
apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}, namespace: gpu-operator}}
spec:
  template:
    spec:
      containers: [{{name: op, image: "{image}"}}]
"""


def _node(name: str, runtime: str) -> str:
    return f"""\
apiVersion: v1
kind: Node
metadata: {{name: {name}, labels: {{nvidia.com/gpu.present: "true"}}}}
status: {{nodeInfo: {{containerRuntimeVersion: "{runtime}"}}}}
"""


def test_the_version_comes_from_the_chart_labels_then_the_operator_image() -> None:
    labelled = _facts(
        _policy('{app.kubernetes.io/version: "v25.10.0"}'), _operator("x/gpu-operator:v24.9.2")
    )
    assert (labelled["version"], labelled["cdi"]) == ("v25.10.0", "on")
    chart = _facts(_policy("{helm.sh/chart: gpu-operator-v25.3.1}"))
    assert (chart["version"], chart["cdi"], chart["versionSource"]) == (
        "v25.3.1",
        "off",
        "label helm.sh/chart",
    )
    image = _facts(_policy(), _operator("nvcr.io/nvidia/gpu-operator:v25.10.1"))
    assert (image["version"], image["cdi"]) == ("v25.10.1", "on")
    assert _facts(_policy('{app.kubernetes.io/version: "main-latest"}'))["cdi"] == ""


def test_two_operator_versions_in_scope_are_no_version() -> None:
    facts = _facts(
        _policy(),
        _operator("nvcr.io/nvidia/gpu-operator:v25.10.1"),
        _operator("nvcr.io/nvidia/gpu-operator:v24.9.2", name="old"),
    )
    assert (facts["version"], facts["cdi"]) == ("", "")


def test_an_explicit_cdi_setting_needs_no_version() -> None:
    assert _facts(_policy(spec="{cdi: {enabled: false}}"))["cdi"] == "off"
    on = _facts(_policy(spec="{cdi: {enabled: true}}"))
    assert on["cdi"] == "on"
    assert {"name": "NVIDIA_RUNTIME_SET_AS_DEFAULT", "value": "false"} in on["operatorEnv"]


def test_the_runtime_is_the_gpu_nodes_then_the_declared_one() -> None:
    spec = "{operator: {defaultRuntime: crio}, cdi: {enabled: false}}"
    labels = '{app.kubernetes.io/version: "v25.10.0"}'
    declared = _facts(_policy(labels, spec))
    assert (declared["runtime"], declared["runtimeSource"]) == (
        "crio",
        "spec.operator.defaultRuntime",
    )
    assert declared["operatorEnv"] == [{"name": "CRIO_CONFIG_MODE", "value": "hook"}]
    # containerd when any GPU Node runs it, as the operator decides.
    nodes = _facts(
        _policy(labels, spec), _node("a", "cri-o://1.30"), _node("b", "containerd://1.7.2")
    )
    assert (nodes["runtime"], nodes["operatorEnv"]) == ("containerd", [])
