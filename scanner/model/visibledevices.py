"""Containers that choose their own GPUs through ``NVIDIA_VISIBLE_DEVICES`` (PG307).

The NVIDIA Container Toolkit gives a container the GPUs its ``NVIDIA_VISIBLE_DEVICES``
names (``all``, indexes or UUIDs) whatever it asked the scheduler for, unless the
toolkit is told to ignore the variable in unprivileged containers
(docs/platform-model.md, "NVIDIA_VISIBLE_DEVICES"). The value a container ends up
with follows Kubernetes: an ``env`` entry overrides ``envFrom``, a later entry an
earlier one, a later ``envFrom`` source an earlier one. A value from a ConfigMap is
read when that ConfigMap is in scope; one from a Secret, a field reference, a
ConfigMap out of scope or a ``$(VAR)`` expansion was not seen, so it is not judged.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from scanner.inventory import KubeObject, as_mapping, is_mapping, join_path
from scanner.model.index import ObjectIndex
from scanner.model.workloads import Join, Workload, join_complete

VARIABLE: Final = "NVIDIA_VISIBLE_DEVICES"
NO_GPU: Final = frozenset({"", "void", "none"})
"""Values that give no GPU: ``void`` and empty (no GPU, no driver), ``none`` (the
driver's libraries, no device)."""
UNPRIVILEGED_SWITCH: Final = "ACCEPT_NVIDIA_VISIBLE_DEVICES_ENVVAR_WHEN_UNPRIVILEGED"
DEVICE_LIST_STRATEGY: Final = "DEVICE_LIST_STRATEGY"
_MAX_ENV: Final = 10_000
"""Env entries read per container: a hostile list costs no more than this."""


def envvar_ignored(index: ObjectIndex) -> bool:
    """Whether the GPU Operator ClusterPolicy in scope makes the toolkit ignore the
    variable in unprivileged containers: ``spec.toolkit.env`` sets the switch to
    ``false`` and ``spec.devicePlugin.env`` lists ``volume-mounts`` among its device-list
    strategies (how the device plugin then passes a pod's GPUs). No ClusterPolicy:
    the toolkit's default, which honours the variable."""
    kinds = index.kind("ClusterPolicy")
    policies = [obj for obj in kinds if obj.api_version.startswith("nvidia.com/")]
    if not policies:
        return False
    spec = as_mapping(policies[0].body.get("spec"))
    toolkit = _env_values(as_mapping(spec.get("toolkit")).get("env"))
    plugin = _env_values(as_mapping(spec.get("devicePlugin")).get("env"))
    strategies = {part.strip() for part in plugin.get(DEVICE_LIST_STRATEGY, "").split(",")}
    return toolkit.get(UNPRIVILEGED_SWITCH, "").strip().lower() == "false" and (
        "volume-mounts" in strategies
    )


def attach_visible_devices(workloads: Sequence[Workload], index: ObjectIndex) -> Join:
    """Set ``workload.visibleDevices`` on every workload (``join_complete``)."""
    ignored = envvar_ignored(index)

    def join(workload: Workload) -> None:
        namespace = workload.obj.ref.namespace
        found: list[dict[str, Any]] = []
        for container in workload.facts["containers"]:
            setting = container_setting(container, namespace, index)
            if setting is None:
                continue
            value, path = setting
            if value.strip() in NO_GPU:
                continue
            privileged = as_mapping(container.get("securityContext")).get("privileged") is True
            found.append(
                {
                    "container": container["name"],
                    "type": container["type"],
                    "value": value,
                    "path": path,
                    "ignored": ignored and not privileged,
                }
            )
        workload.facts["visibleDevices"] = found

    return join_complete(workloads, join)


def container_setting(
    container: Mapping[str, Any], namespace: str, index: ObjectIndex
) -> tuple[str, str] | None:
    """The container's value of the variable and where it is set, or None when it sets
    none or its value was not seen."""
    base = container["path"]
    env = container.get("env")
    if isinstance(env, list):
        for position in range(min(len(env), _MAX_ENV) - 1, -1, -1):
            entry = env[position]
            if is_mapping(entry) and entry.get("name") == VARIABLE:
                path = join_path(join_path(base, "env"), position)
                return _entry_value(entry, path, namespace, index)
    sources = container.get("envFrom")
    if isinstance(sources, list):
        for position in range(min(len(sources), _MAX_ENV) - 1, -1, -1):
            source = sources[position]
            if not is_mapping(source):
                continue
            found = _source_value(source, namespace, index)
            if found is _UNSEEN:
                return None  # a later source not seen may set it and win
            if isinstance(found, str):
                return found, join_path(join_path(base, "envFrom"), position)
    return None


_UNSEEN: Final = object()
"""An ``envFrom`` source whose keys were not seen (a Secret, a ConfigMap out of scope)."""


def _entry_value(
    entry: Mapping[str, Any], path: str, namespace: str, index: ObjectIndex
) -> tuple[str, str] | None:
    value_from = entry.get("valueFrom")
    if is_mapping(value_from):
        ref = as_mapping(value_from.get("configMapKeyRef"))
        data = _config_map_data(ref.get("name"), namespace, index)
        key = ref.get("key")
        value = data.get(key) if data is not None and isinstance(key, str) else None
        return (value, join_path(path, "valueFrom")) if isinstance(value, str) else None
    value = entry.get("value", "")
    if not isinstance(value, str) or "$(" in value:
        return None  # a number is refused by the API server; an expansion was not seen
    return value, join_path(path, "value")


def _source_value(source: Mapping[str, Any], namespace: str, index: ObjectIndex) -> object:
    """The variable's value from one ``envFrom`` source, None when the source is seen
    and does not set it, ``_UNSEEN`` when the source was not seen."""
    if "configMapRef" not in source:
        return _UNSEEN if "secretRef" in source else None
    ref = as_mapping(source.get("configMapRef"))
    data = _config_map_data(ref.get("name"), namespace, index)
    if data is None:
        return _UNSEEN
    prefix = source.get("prefix", "")
    if not isinstance(prefix, str) or not VARIABLE.startswith(prefix):
        return None
    value = data.get(VARIABLE[len(prefix) :])
    return value if isinstance(value, str) else None


def _config_map_data(name: object, namespace: str, index: ObjectIndex) -> Mapping[str, Any] | None:
    if not isinstance(name, str) or not name:
        return None
    obj: KubeObject | None = index.get("ConfigMap", namespace, name)
    return as_mapping(obj.body.get("data")) if obj is not None else None


def _env_values(env: object) -> dict[str, str]:
    """An ``env`` list as name -> literal value (the last entry of a name wins)."""
    values: dict[str, str] = {}
    for entry in env[:_MAX_ENV] if isinstance(env, list) else ():
        if is_mapping(entry) and isinstance(entry.get("name"), str):
            value = entry.get("value")
            values[entry["name"]] = value if isinstance(value, str) else str(value)
    return values
