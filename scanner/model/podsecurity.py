"""Pod Security facts: what each container effectively runs with, and the pod's volumes.

Kubernetes resolves some security settings between the pod and the container
(a container value wins over the pod's); the model does that resolution once so
rules such as PG303 only compare values. Every container gets ``security``:

* ``allowPrivilegeEscalation``: true unless the container sets it to ``false``
  (the kernel default lets a process gain privileges); ``allowPrivilegeEscalationSet``:
  the container sets it at all;
* ``runAsNonRoot``: the effective value (false when neither sets it) and
  ``runAsNonRootFrom``: ``container``, ``pod`` or ``""`` (unset);
* ``seccompProfileType``: the effective ``seccompProfile.type`` (``""`` when unset)
  and ``seccompProfileFrom`` likewise;
* ``capabilitiesDrop`` / ``capabilitiesAdd``: the container's capability lists.

Every workload gets ``volumes``: each pod volume with ``name``, ``type`` (its
volume source: ``hostPath``, ``emptyDir``, ...; a volume naming no source is an
``emptyDir``, as the API server defaults it), ``path`` (``spec.volumes[2]``),
``typePath`` (``spec.volumes[2].hostPath``) and ``hostPath`` (the host
directory of a hostPath volume, else ``""``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from scanner.inventory import as_mapping, join_path
from scanner.model.workloads import Join, Workload, join_complete

RESTRICTED_VOLUME_TYPES: tuple[str, ...] = (
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "persistentVolumeClaim",
    "projected",
    "secret",
)
"""Volume types Pod Security ``restricted`` allows (Kubernetes "Pod Security Standards")."""

VOLUME_SOURCES: frozenset[str] = frozenset(
    {
        *RESTRICTED_VOLUME_TYPES,
        "awsElasticBlockStore",
        "azureDisk",
        "azureFile",
        "cephfs",
        "cinder",
        "fc",
        "flexVolume",
        "flocker",
        "gcePersistentDisk",
        "gitRepo",
        "glusterfs",
        "hostPath",
        "image",
        "iscsi",
        "nfs",
        "photonPersistentDisk",
        "portworxVolume",
        "quobyte",
        "rbd",
        "scaleIO",
        "storageos",
        "vsphereVolume",
    }
)
"""Every ``corev1.VolumeSource`` field."""


def attach_pod_security(workloads: Sequence[Workload]) -> Join:
    """Set ``security`` on every container and ``volumes`` on every workload
    (``join_complete``)."""
    return join_complete(workloads, _pod_security)


def _pod_security(workload: Workload) -> None:
    facts = workload.facts
    pod_spec = facts["podSpec"]
    pod_context = as_mapping(pod_spec.get("securityContext"))
    for container in facts["containers"]:
        container["security"] = container_security(container, pod_context)
    facts["volumes"] = volumes(pod_spec, facts["podSpecPath"])


_NOTHING_SET: dict[str, Any] = {
    "allowPrivilegeEscalation": True,
    "allowPrivilegeEscalationSet": False,
    "runAsNonRoot": False,
    "runAsNonRootFrom": "",
    "seccompProfileType": "",
    "seccompProfileFrom": "",
    "capabilitiesDrop": [],
    "capabilitiesAdd": [],
}
"""The facts of a container when neither it nor its pod sets a securityContext: shared
by all such containers (facts are read-only), since in a large cluster most are."""


def container_security(
    container: Mapping[str, Any], pod_context: Mapping[str, Any]
) -> dict[str, Any]:
    """``containers[i].security`` (see the module docstring)."""
    context = as_mapping(container.get("securityContext"))
    if not context and not pod_context:
        return _NOTHING_SET
    escalation = context.get("allowPrivilegeEscalation")
    non_root, non_root_from = _inherited(
        context.get("runAsNonRoot"), pod_context.get("runAsNonRoot"), bool
    )
    seccomp, seccomp_from = _inherited(
        as_mapping(context.get("seccompProfile")).get("type"),
        as_mapping(pod_context.get("seccompProfile")).get("type"),
        str,
    )
    capabilities = as_mapping(context.get("capabilities"))
    return {
        "allowPrivilegeEscalation": escalation is not False,
        "allowPrivilegeEscalationSet": isinstance(escalation, bool),
        "runAsNonRoot": non_root is True,
        "runAsNonRootFrom": non_root_from,
        "seccompProfileType": seccomp if isinstance(seccomp, str) else "",
        "seccompProfileFrom": seccomp_from,
        "capabilitiesDrop": _strings(capabilities.get("drop")),
        "capabilitiesAdd": _strings(capabilities.get("add")),
    }


def _inherited(own: object, pod: object, kind: type) -> tuple[Any, str]:
    """The container's value when it sets one (of ``kind``, non-empty), else the pod's."""
    if isinstance(own, kind) and own != "":
        return own, "container"
    if isinstance(pod, kind) and pod != "":
        return pod, "pod"
    return None, ""


def volumes(pod_spec: Mapping[str, Any], pod_path: str) -> list[dict[str, Any]]:
    """``workload.volumes`` (see the module docstring)."""
    found: list[dict[str, Any]] = []
    items = pod_spec.get("volumes")
    if not isinstance(items, list):
        return found
    for index, volume in enumerate(items):
        if not isinstance(volume, Mapping):
            continue
        keys = [key for key in volume if isinstance(key, str) and key != "name"]
        sources = [key for key in keys if key in VOLUME_SOURCES]
        kind = sources[0] if sources else keys[0] if keys else "emptyDir"
        path = join_path(join_path(pod_path, "volumes"), index)
        host = as_mapping(volume.get("hostPath")).get("path")
        found.append(
            {
                "name": volume.get("name") if isinstance(volume.get("name"), str) else "",
                "type": kind,
                "path": path,
                "typePath": join_path(path, kind),
                "hostPath": host if kind == "hostPath" and isinstance(host, str) else "",
            }
        )
    return found


def _strings(value: object) -> list[str]:
    return [item for item in value if isinstance(item, str)] if isinstance(value, list) else []
