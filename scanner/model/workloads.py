"""Workloads: every pod-template-bearing object, reduced to the facts rules read.

``Workload.facts`` is the CEL variable ``workload``:

* ``kind``, ``apiVersion``, ``name``, ``namespace`` (``default`` when the manifest
  sets none, as ``kubectl apply`` would) and ``namespaceSet``;
* ``podSpec`` (the raw pod spec) and ``podSpecPath`` (``spec.template.spec``);
* ``podLabels`` and ``podAnnotations`` of the pod template;
* ``containers``: every container, init container and ephemeral container, each
  the raw container fields plus ``path`` (``spec.template.spec.containers[1]``) and
  ``type`` (``container``, ``initContainer``, ``ephemeralContainer``);
* ``gpu``: whether any container requests or limits a GPU resource, and
  ``gpuResources``: one entry per GPU resource per container (see ``_gpu_entries``);
* ``runtimeClassName`` and ``serviceAccountName`` (empty when unset);
* ``selectedLabels``: node label key -> allowed values that every placement must
  satisfy (``nodeSelector``, or a key every required node-affinity term pins with ``In``);
* ``tolerations``: the pod's tolerations as written.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from scanner.inventory import InvalidDocument, KubeObject, join_path
from scanner.kinds import CONTAINER_FIELDS, POD_SPEC_PATHS
from scanner.model.quantity import positive_count

GPU_RESOURCE = re.compile(r"^nvidia\.com/(?:gpu|gpu\.shared|mig-[A-Za-z0-9.]+?(?:\.shared)?)$")
"""Resource names that make a container a GPU consumer (RULES.md, "GPU workload")."""

_REQUIRED_TERMS = ("nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution")


@dataclass(frozen=True, slots=True)
class Workload:
    """A pod-template-bearing object and its derived facts (the CEL ``workload``)."""

    obj: KubeObject
    facts: Mapping[str, Any]

    @property
    def is_gpu(self) -> bool:
        return bool(self.facts["gpu"])


def build_workloads(
    objects: Iterable[KubeObject],
) -> tuple[list[Workload], list[InvalidDocument]]:
    """Every workload among ``objects``; pod specs that are not mappings become PG003."""
    workloads: list[Workload] = []
    invalid: list[InvalidDocument] = []
    for obj in objects:
        keys = POD_SPEC_PATHS.get(obj.kind)
        if keys is None:
            continue
        pod_spec, pod_meta, path = _descend(obj.body, keys)
        if not isinstance(pod_spec, Mapping):
            if pod_spec is not None:
                line, column = obj.position(path)
                invalid.append(
                    InvalidDocument(
                        "PG003",
                        f"{obj.kind} {obj.name or '(unnamed)'}: "
                        f"pod spec at {path} is not a mapping",
                        obj.origin,
                        line,
                        column,
                        obj.ref,
                        path,
                    )
                )
            continue
        workloads.append(Workload(obj, workload_facts(obj, pod_spec, pod_meta, path)))
    return workloads, invalid


def _descend(body: Mapping[str, Any], keys: tuple[str, ...]) -> tuple[Any, Any, str]:
    """Follow ``keys`` into ``body``: (pod spec, pod template metadata, pod spec path)."""
    node: Any = body
    parent: Any = None
    path = ""
    for key in keys:
        if not isinstance(node, Mapping):
            return None, None, path
        parent = node
        node = node.get(key)
        path = join_path(path, key)
    meta = parent.get("metadata") if isinstance(parent, Mapping) and len(keys) > 1 else None
    if len(keys) == 1:  # a Pod: its own metadata is the pod's
        meta = body.get("metadata")
    return node, meta if isinstance(meta, Mapping) else {}, path


def workload_facts(
    obj: KubeObject, pod_spec: Mapping[str, Any], pod_meta: Mapping[str, Any], path: str
) -> dict[str, Any]:
    containers = list(_containers(pod_spec, path))
    gpu_resources = [entry for container in containers for entry in _gpu_entries(container)]
    namespace = obj.namespace
    return {
        "apiVersion": obj.api_version,
        "kind": obj.kind,
        "name": obj.name,
        "namespace": namespace or "default",
        "namespaceSet": bool(namespace),
        "podSpec": pod_spec,
        "podSpecPath": path,
        "podLabels": _string_map(pod_meta.get("labels")),
        "podAnnotations": _string_map(pod_meta.get("annotations")),
        "containers": containers,
        "gpu": bool(gpu_resources),
        "gpuResources": gpu_resources,
        "runtimeClassName": _text(pod_spec.get("runtimeClassName")),
        "serviceAccountName": _text(
            pod_spec.get("serviceAccountName") or pod_spec.get("serviceAccount")
        ),
        "selectedLabels": selected_labels(pod_spec),
        "tolerations": [t for t in _list(pod_spec.get("tolerations")) if isinstance(t, Mapping)],
    }


def _containers(pod_spec: Mapping[str, Any], pod_path: str) -> Iterator[dict[str, Any]]:
    for field_name, container_type in CONTAINER_FIELDS:
        list_path = join_path(pod_path, field_name)
        for index, container in enumerate(_list(pod_spec.get(field_name))):
            if not isinstance(container, Mapping):
                continue
            facts = dict(container)
            facts["path"] = join_path(list_path, index)
            facts["type"] = container_type
            facts["name"] = _text(container.get("name"))
            yield facts


def _gpu_entries(container: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One entry per GPU resource the container names in ``limits`` or ``requests``.

    Entry: ``name``, ``container``, ``containerPath``, ``hasLimit``/``hasRequest``,
    ``limit``/``request`` (as written, stringified), ``limitCount``/``requestCount``
    (the positive whole number, or 0 when the quantity is not one) and
    ``limitPath``/``requestPath``.
    """
    resources = container.get("resources")
    if not isinstance(resources, Mapping):
        return []
    path = join_path(container["path"], "resources")
    limits = resources.get("limits")
    requests = resources.get("requests")
    limits = limits if isinstance(limits, Mapping) else {}
    requests = requests if isinstance(requests, Mapping) else {}
    names = sorted(
        {key for key in (*limits, *requests) if isinstance(key, str) and GPU_RESOURCE.match(key)}
    )
    return [
        {
            "name": name,
            "container": container["name"],
            "containerPath": container["path"],
            "hasLimit": name in limits,
            "hasRequest": name in requests,
            "limit": _quantity_text(limits.get(name)),
            "request": _quantity_text(requests.get(name)),
            "limitCount": positive_count(limits.get(name)),
            "requestCount": positive_count(requests.get(name)),
            "limitPath": join_path(join_path(path, "limits"), name),
            "requestPath": join_path(join_path(path, "requests"), name),
        }
        for name in names
    ]


def selected_labels(pod_spec: Mapping[str, Any]) -> dict[str, list[str]]:
    """Node label keys every placement of the pod must carry, with the allowed values.

    ``nodeSelector`` pins one value. Required node-affinity terms are ORed, so a key
    counts only when every term pins it with operator ``In``; ``Exists``, ``NotIn``
    and preferred terms do not select anything.
    """
    selected: dict[str, list[str]] = {}
    terms = _required_terms(pod_spec)
    if terms:
        per_term = [_term_in_values(term) for term in terms]
        for key in set.intersection(*(set(values) for values in per_term)):
            allowed: list[str] = []
            for values in per_term:
                allowed.extend(v for v in values[key] if v not in allowed)
            selected[key] = allowed
    node_selector = pod_spec.get("nodeSelector")
    if isinstance(node_selector, Mapping):
        for key, value in node_selector.items():
            if isinstance(key, str):
                selected[key] = [_scalar_text(value)]
    return selected


def _required_terms(pod_spec: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    node: Any = pod_spec.get("affinity")
    for key in _REQUIRED_TERMS:
        if not isinstance(node, Mapping):
            return []
        node = node.get(key)
    if not isinstance(node, Mapping):
        return []
    return [term for term in _list(node.get("nodeSelectorTerms")) if isinstance(term, Mapping)]


def _term_in_values(term: Mapping[str, Any]) -> dict[str, list[str]]:
    pinned: dict[str, list[str]] = {}
    for expression in _list(term.get("matchExpressions")):
        if not isinstance(expression, Mapping) or expression.get("operator") != "In":
            continue
        key = expression.get("key")
        if isinstance(key, str):
            pinned[key] = [_scalar_text(v) for v in _list(expression.get("values"))]
    return pinned


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _scalar_text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


def _quantity_text(value: object) -> str:
    return "" if value is None else _scalar_text(value)


def _string_map(value: object) -> dict[str, str]:
    if not isinstance(value, Mapping):
        return {}
    return {str(k): _scalar_text(v) for k, v in value.items()}
