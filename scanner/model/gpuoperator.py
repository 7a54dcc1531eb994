"""What the GPU Operator does with a ClusterPolicy's toolkit: ``cluster.gpuOperator`` (PG110).

The operator's defaults change with its version, so they are claimed only for a
known version (unknown: no claim). From the operator's source
(``api/nvidia/v1/clusterpolicy_types.go``, ``controllers/object_controls.go``):

* ``spec.cdi.enabled`` unset means off before v25.10.0 and on from v25.10.0
  (``CDIConfigSpec.IsEnabled``; the CRD default became true).
* With CDI on, the operator sets on the toolkit container
  ``NVIDIA_RUNTIME_SET_AS_DEFAULT=false`` (``transformToolkitCtrForCDI``), with
  ``CDI_ENABLED``, ``NVIDIA_CTR_RUNTIME_MODE=cdi`` and ``CRIO_CONFIG_MODE=config``;
  from v25.10.0, with CDI off on CRI-O, ``CRIO_CONFIG_MODE=hook`` (an OCI prestart
  hook run for every container). ``spec.toolkit.env`` is applied after these, so an
  entry of the same name wins.
* The container runtime is detected from the GPU Nodes
  (``status.nodeInfo.containerRuntimeVersion``; containerd when any runs it), not
  read from ``spec.operator.defaultRuntime``, which is deprecated; a scan without
  Nodes takes that field as the author's statement of the runtime.

The version comes from the chart's labels on the ClusterPolicy
(``app.kubernetes.io/version``, else ``helm.sh/chart: gpu-operator-<version>``), else
from the image tag of the operator's Deployment in scope (``.../gpu-operator:v25.10.0``:
an audit sees it). Development builds (``main-latest``) are no version.
"""

from __future__ import annotations

import re
from typing import Any, Final

from scanner.inventory import KubeObject, as_mapping
from scanner.model.deviceplugin import CLUSTER_POLICY
from scanner.model.index import ObjectIndex

CDI_DEFAULT_ON: Final = (25, 10, 0)
"""The first operator version whose unset ``cdi.enabled`` means on."""
_VERSION = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)$")
_CHART = re.compile(r"^gpu-operator-(v?\d+\.\d+\.\d+)$")
_IMAGE = re.compile(r"(?:^|/)gpu-operator:(?P<tag>[^@/:]+)(?:@sha256:[0-9a-f]+)?$")
_RUNTIMES: Final = (("containerd", "containerd"), ("cri-o", "crio"), ("docker", "docker"))
_CDI_ENV: Final = (
    ("CDI_ENABLED", "true"),
    ("NVIDIA_RUNTIME_SET_AS_DEFAULT", "false"),
    ("NVIDIA_CTR_RUNTIME_MODE", "cdi"),
    ("CRIO_CONFIG_MODE", "config"),
)


def operator_facts(index: ObjectIndex) -> dict[str, dict[str, Any]]:
    """ClusterPolicy ref -> ``version`` ("" unknown), ``versionSource``, ``cdi``
    (``on``/``off``/"" unknown), ``cdiSource``, ``runtime`` (``containerd``/``crio``/
    ``docker``/"" unknown), ``runtimeSource`` and ``operatorEnv``: what the operator sets
    on the toolkit container before ``spec.toolkit.env`` (``[{name, value}]``)."""
    policies = [o for o in index.kind(CLUSTER_POLICY) if o.api_version.startswith("nvidia.com/")]
    if not policies:
        return {}
    image_version = _image_version(index)
    node_runtime = _node_runtime(index)
    return {
        policy.ref.logical_name: _policy_facts(policy, image_version, node_runtime)
        for policy in policies
    }


def _policy_facts(
    policy: KubeObject, image_version: tuple[str, str], node_runtime: str
) -> dict[str, Any]:
    version, version_source = _label_version(policy) or image_version
    spec = as_mapping(policy.body.get("spec"))
    enabled = as_mapping(spec.get("cdi")).get("enabled")
    if isinstance(enabled, bool):
        cdi, cdi_source = ("on" if enabled else "off"), "spec.cdi.enabled"
    elif version:
        on = _parse(version) >= CDI_DEFAULT_ON
        cdi, cdi_source = ("on" if on else "off"), f"the default of GPU Operator {version}"
    else:
        cdi, cdi_source = "", ""
    declared = str(as_mapping(spec.get("operator")).get("defaultRuntime") or "")
    if node_runtime:
        runtime, runtime_source = node_runtime, "the GPU Nodes"
    elif declared in ("containerd", "crio", "docker"):
        runtime, runtime_source = declared, "spec.operator.defaultRuntime"
    else:
        runtime, runtime_source = "", ""
    env: list[tuple[str, str]] = []
    if cdi == "on":
        env = list(_CDI_ENV)
    elif cdi == "off" and runtime == "crio" and version and _parse(version) >= CDI_DEFAULT_ON:
        env = [("CRIO_CONFIG_MODE", "hook")]
    return {
        "version": version,
        "versionSource": version_source,
        "cdi": cdi,
        "cdiSource": cdi_source,
        "runtime": runtime,
        "runtimeSource": runtime_source,
        "operatorEnv": [{"name": name, "value": value} for name, value in env],
    }


def _label_version(policy: KubeObject) -> tuple[str, str] | None:
    labels = as_mapping(policy.metadata.get("labels"))
    version = str(labels.get("app.kubernetes.io/version") or "")
    if _VERSION.match(version):
        return version, "label app.kubernetes.io/version"
    chart = _CHART.match(str(labels.get("helm.sh/chart") or ""))
    if chart:
        return chart.group(1), "label helm.sh/chart"
    return None


def _image_version(index: ObjectIndex) -> tuple[str, str]:
    """The one version the operator Deployments in scope run, else ("", "")."""
    found: set[str] = set()
    for deployment in index.kind("Deployment"):
        spec = as_mapping(
            as_mapping(as_mapping(deployment.body.get("spec")).get("template")).get("spec")
        )
        containers = spec.get("containers")
        for container in containers if isinstance(containers, list) else ():
            image = str(as_mapping(container).get("image") or "")
            match = _IMAGE.search(image)
            if match and _VERSION.match(match.group("tag")):
                found.add(match.group("tag"))
    if len(found) == 1:
        return found.pop(), "the operator's image"
    return "", ""


def _node_runtime(index: ObjectIndex) -> str:
    """The runtime the operator detects: containerd when any GPU Node runs it, else
    the last one recognised; "" when no GPU Node shows one."""
    runtime = ""
    for node in index.kind("Node"):
        labels = as_mapping(node.metadata.get("labels"))
        if str(labels.get("nvidia.com/gpu.present")) != "true":
            continue
        info = as_mapping(as_mapping(node.body.get("status")).get("nodeInfo"))
        text = str(info.get("containerRuntimeVersion") or "")
        for prefix, name in _RUNTIMES:
            if text.startswith(prefix):
                runtime = name
        if runtime == "containerd":
            break
    return runtime


def _parse(version: str) -> tuple[int, ...]:
    match = _VERSION.match(version)
    return tuple(int(part) for part in match.groups()) if match else ()
