"""Objects of kinds poolgate does not model that hold pods: found, named, not passed.

A custom resource whose pod templates poolgate does not know (an Argo Workflow, a
Kubeflow TrainJob, an in-house CRD) is not checked; the report says so rather than
passing it as clean. One bounded walk of the object looks for two things:

* **GPU asks**: container-shaped parts, a mapping whose ``resources`` (``limits`` or
  ``requests``) sits beside a ``name`` or ``image``, or a Kubeflow TrainJob's
  ``resourcesPerNode``, that ask for a GPU resource (``nvidia.com/*``: whole GPUs, MIG
  slices, shared replicas, HAMi's memory and cores; ``amd.com/gpu``) with a quantity
  other than zero, or that name a DRA claim (``resources.claims``). Such an object is a
  GPU workload poolgate did not check: a warning names its kind and every such path.
* **Pod specs**: a mapping whose ``containers`` list holds a container with an
  ``image`` (a Knative Revision, a Seldon deployment): a warning names the first.

Kubernetes' own groups are never searched: their pod templates are all modelled, and
what else asks for GPUs there (a ResourceQuota's ``hard``, a LimitRange, a ConfigMap's
text) is not a workload. Karpenter's ``NodePool.spec.limits`` and Kueue's
``ClusterQueue`` quotas are not container-shaped, so they are not workloads either.
The walk is bounded in depth and in the mappings and lists it visits; an object it
cannot search to its end is reported as not searched, never as clean. The exit code
does not change: these are warnings.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any, Final, NamedTuple

from scanner.inventory import KubeObject, SourceWarning, is_mapping, join_path
from scanner.kinds import kubernetes_group, workload_kind
from scanner.model.quantity import is_zero

MAX_NODES: Final = 10_000
"""Mappings and lists visited per object: a CRD's pods sit a few levels down, and a
huge object is reported as not searched rather than walked to its end."""
MAX_DEPTH: Final = 64
"""Keys followed from the object's root; deeper parts count as not searched."""
GPU_PATHS_NAMED: Final = 5
"""GPU paths named in one warning; the rest are counted."""
UNCHECKED_SHOWN: Final = 20
"""Objects of one kind named one by one in the warnings; the rest are counted in one
more: a cluster with a thousand Knative revisions gets 21 lines."""

_RESOURCE_FIELDS: Final = (("resources", True), ("resourcesPerNode", False))
"""Fields holding a container's resource requirements, and whether a ``name`` or an
``image`` must stand beside them (a TrainJob's ``trainer`` may name neither: the
runtime's image runs)."""


class GpuAsk(NamedTuple):
    """A container-shaped part that asks for GPUs: its path and what it asks for."""

    path: str
    names: tuple[str, ...]
    """GPU resource names, sorted, then ``DRA claim`` when it names one."""


class Found(NamedTuple):
    """What the walk found in one object."""

    gpu: tuple[GpuAsk, ...]
    pod_spec: str | None
    complete: bool
    """False when the walk stopped at ``MAX_NODES`` or ``MAX_DEPTH``."""


def is_gpu_resource(name: object) -> bool:
    """A resource name that asks for a GPU or a part of one, whatever the device
    plugin's configuration (``nvidia.com/gpu``, ``nvidia.com/mig-1g.10gb``,
    ``nvidia.com/gpu.shared``, ``nvidia.com/gpumem``, ``amd.com/gpu``)."""
    return isinstance(name, str) and (name.startswith("nvidia.com/") or name == "amd.com/gpu")


def search(kind: str, api_version: str, body: Mapping[str, Any]) -> Found | None:
    """What an object of a kind poolgate does not model holds; None for the kinds it
    models (when they hold a pod template) and for Kubernetes' own groups."""
    if kubernetes_group(api_version):
        return None
    entry = workload_kind(kind, api_version)
    if entry is not None and any(True for _ in entry.templates(body)):
        return None
    asks: list[GpuAsk] = []
    pod_spec: str | None = None
    pending: list[tuple[tuple[str | int, ...], object]] = [((), body)]
    seen = 0
    complete = True
    while pending:
        keys, value = pending.pop()
        seen += 1
        if seen > MAX_NODES or len(keys) > MAX_DEPTH:
            complete = False
            break
        if isinstance(value, Mapping):
            if keys:
                ask = _gpu_ask(value)
                if ask:
                    asks.append(GpuAsk(_path(keys), ask))
                if pod_spec is None and _pod_spec_shaped(value):
                    pod_spec = _path(keys)
            children: Iterable[tuple[Any, object]] = value.items()
        elif isinstance(value, list):
            children = enumerate(value)
        else:
            continue
        pending.extend(
            ((*keys, key), item)
            for key, item in reversed(list(children))
            if isinstance(item, Mapping | list)
        )
    return Found(tuple(asks), pod_spec, complete)


def _gpu_ask(part: Mapping[str, Any]) -> tuple[str, ...]:
    """The GPU resources (and ``DRA claim``) a container-shaped ``part`` asks for."""
    asked: set[str] = set()
    claims = False
    for field_name, needs_identity in _RESOURCE_FIELDS:
        resources = part.get(field_name)
        if not is_mapping(resources):
            continue
        if needs_identity and "name" not in part and "image" not in part:
            continue
        for section in (resources.get("limits"), resources.get("requests")):
            if is_mapping(section):
                asked.update(
                    key
                    for key, value in section.items()
                    if is_gpu_resource(key) and not is_zero(value)
                )
        listed = resources.get("claims")
        claims = claims or (isinstance(listed, list) and bool(listed))
    return (*sorted(asked), *(("DRA claim",) if claims else ()))


def _pod_spec_shaped(part: Mapping[str, Any]) -> bool:
    containers = part.get("containers")
    return isinstance(containers, list) and any(
        is_mapping(c) and isinstance(c.get("image"), str) for c in containers
    )


def _path(keys: tuple[str | int, ...]) -> str:
    path = ""
    for key in keys:
        path = join_path(path, key)
    return path


def unchecked_pod_specs(objects: Iterable[KubeObject]) -> list[SourceWarning]:
    """A warning for each reported object of a kind poolgate does not model that asks
    for GPUs, holds a pod spec, or could not be searched to its end (``search``), at
    most ``UNCHECKED_SHOWN`` per kind, then one counting the rest."""
    warnings: list[SourceWarning] = []
    found: Counter[tuple[str, str]] = Counter()
    for obj in objects:
        api_version = obj.body.get("apiVersion")
        # Kubernetes' own groups first: asked of every pod, answered from a cache.
        if not isinstance(api_version, str) or kubernetes_group(api_version):
            continue
        if obj.context_only:
            continue
        result = search(obj.kind, api_version, obj.body)
        if result is None:
            continue
        warning = _warning(obj, api_version, result)
        if warning is None:
            continue
        kind = (api_version, obj.kind)
        found[kind] += 1
        if found[kind] <= UNCHECKED_SHOWN:
            warnings.append(warning)
    warnings += [
        SourceWarning(
            "",
            f"{count - UNCHECKED_SHOWN} more {kind} objects ({api_version}) hold pods or GPU "
            "requests that were not checked",
        )
        for (api_version, kind), count in found.items()
        if count > UNCHECKED_SHOWN
    ]
    return warnings


def _warning(obj: KubeObject, api_version: str, result: Found) -> SourceWarning | None:
    who = f"{obj.kind} {obj.name or '(unnamed)'} ({api_version})"
    if result.gpu:
        first = result.gpu[0]
        named = "; ".join(
            f"{', '.join(ask.names)} at {ask.path}" for ask in result.gpu[:GPU_PATHS_NAMED]
        )
        more = len(result.gpu) - GPU_PATHS_NAMED
        message = (
            f"GPU workload not checked: {who} asks for {named}"
            + (f" (and {more} more)" if more > 0 else "")
            + ", and poolgate does not model this kind"
        )
        path = first.path
    elif not result.complete:
        message = (
            f"{who} was not searched for pods and GPU requests to its end (more than "
            f"{MAX_NODES} mappings and lists, or deeper than {MAX_DEPTH}): not checked"
        )
        path = result.pod_spec or ""
    elif result.pod_spec is not None:
        message = (
            f"{who} has a pod spec at {result.pod_spec} that was not checked: poolgate "
            "does not know where this kind keeps its pod templates"
        )
        path = result.pod_spec
    else:
        return None
    line, column = obj.position(path) if path else obj.position("")
    return SourceWarning(obj.origin.uri, message, line, column)
