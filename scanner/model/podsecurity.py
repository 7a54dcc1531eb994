"""Pod Security facts: the values the Pod Security Standards read, with their field paths.

Pod Security admission (``k8s.io/pod-security-admission/policy``, ``check_*.go``)
reads a few settings that Kubernetes resolves between the pod and the container (a
container value wins over the pod's), and many that it judges where they are
written. The model does the resolution and the extraction once, so rules such as
PG303 only compare values with the allowed ones.

Every container gets ``security``, its effective settings:

* ``allowPrivilegeEscalation``: true unless the container sets it to ``false``
  (the kernel default lets a process gain privileges); ``allowPrivilegeEscalationSet``:
  the container sets it at all;
* ``runAsNonRoot``: the effective value (false when neither sets it) and
  ``runAsNonRootFrom``: ``container``, ``pod`` or ``""`` (unset);
* ``seccompProfileType``: the effective ``seccompProfile.type`` and
  ``seccompProfileFrom`` likewise. A ``seccompProfile`` without a type is set (to
  ``""``), as in ``check_seccompProfile_restricted.go``: only an absent profile is
  inherited;
* ``capabilitiesDrop`` / ``capabilitiesAdd``: the container's capability lists;
* ``misspelt``: unknown securityContext fields close to a known one (``field``,
  ``suggestion``, ``path``): ``allowPrivilegedEscalation`` for
  ``allowPrivilegeEscalation``, which the API server drops, leaving the control unset.

Every workload gets ``volumes``: each pod volume with ``name``, ``type`` (its
volume source: ``hostPath``, ``emptyDir``, ...; a volume naming no source is an
``emptyDir``, as the API server defaults it), ``path`` (``spec.volumes[2]``),
``typePath`` (``spec.volumes[2].hostPath``) and ``hostPath`` (the host
directory of a hostPath volume, else ``""``).

And ``podSecurity``, what is judged where it is written (lists hold only entries
that set something, so most are empty):

* ``path``: the pod's ``securityContext`` path; ``misspelt``: as a container's;
* ``windows``: ``spec.os.name`` is ``windows`` (Pod Security exempts such pods from
  its Linux-only restricted controls); ``userNamespace``: ``spec.hostUsers`` is
  ``false`` (the pod runs in a user namespace);
* the pod's own ``runAsNonRootSet`` / ``runAsNonRoot`` and ``seccompProfileSet`` /
  ``seccompProfileType`` (a bad pod value is rejected even when every container
  overrides it);
* ``contexts``: each security context, the pod's then the containers', that sets
  a field judged per setter: ``owner`` (``the pod``, ``container 'train'``), ``path``,
  ``runAsUserSet`` / ``runAsUser``, ``procMountSet`` / ``procMount``,
  ``appArmorProfileSet`` / ``appArmorProfileType``, ``seLinuxType`` /
  ``seLinuxUser`` / ``seLinuxRole`` (``""`` when unset) and ``hostProcess``;
* ``sysctls``: each pod sysctl's ``name`` and ``path`` (of the name);
* ``appArmorAnnotations``: each ``container.apparmor.security.beta.kubernetes.io/*``
  annotation of the pod (template) with ``key``, ``value`` and ``path``;
* ``hostPorts``: each container port that sets ``hostPort`` (``owner``, ``hostPort``,
  ``path``);
* ``probeHosts``: each probe or lifecycle handler that sets ``httpGet.host`` or
  ``tcpSocket.host`` (``owner``, ``handler`` such as ``livenessProbe.httpGet``,
  ``host``, ``path``).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Final

from scanner.inventory import as_mapping, is_mapping, join_path
from scanner.model.workloads import Join, Workload, join_complete

RESTRICTED_VOLUME_TYPES: tuple[str, ...] = (
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "image",
    "persistentVolumeClaim",
    "projected",
    "secret",
)
"""Volume types Pod Security ``restricted`` allows (``check_restrictedVolumes.go``;
``image`` since Kubernetes 1.33, at every policy version)."""

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

APPARMOR_ANNOTATION_PREFIX: Final = "container.apparmor.security.beta.kubernetes.io/"

PER_SETTER_FIELDS: Final = frozenset(
    {"runAsUser", "procMount", "appArmorProfile", "seLinuxOptions", "windowsOptions"}
)
"""securityContext fields judged per setter (pod and each container), without inheritance."""

PROBES: Final = ("livenessProbe", "readinessProbe", "startupProbe")
LIFECYCLE_HANDLERS: Final = ("postStart", "preStop")
HOST_ACTIONS: Final = ("httpGet", "tcpSocket")
"""Where ``check_hostProbesAndhostLifecycle.go`` looks for a ``host``."""
_HANDLER_FIELDS: Final = frozenset({*PROBES, "lifecycle"})


def attach_pod_security(workloads: Sequence[Workload]) -> Join:
    """Set ``security`` on every container and ``volumes`` and ``podSecurity`` on every
    workload (``join_complete``)."""
    return join_complete(workloads, _pod_security)


def _pod_security(workload: Workload) -> None:
    facts = workload.facts
    pod_spec = facts["podSpec"]
    pod_path = facts["podSpecPath"]
    pod_context = as_mapping(pod_spec.get("securityContext"))
    for container in facts["containers"]:
        container["security"] = container_security(container, pod_context)
    facts["volumes"] = volumes(pod_spec, pod_path)
    facts["podSecurity"] = pod_security(
        pod_spec, pod_path, facts["containers"], facts["podAnnotations"]
    )


CONTAINER_CONTEXT_FIELDS: Final = frozenset(
    {
        "allowPrivilegeEscalation",
        "appArmorProfile",
        "capabilities",
        "privileged",
        "procMount",
        "readOnlyRootFilesystem",
        "runAsGroup",
        "runAsNonRoot",
        "runAsUser",
        "seLinuxOptions",
        "seccompProfile",
        "windowsOptions",
    }
)
"""``corev1.SecurityContext``: a container's securityContext fields."""
POD_CONTEXT_FIELDS: Final = frozenset(
    {
        "appArmorProfile",
        "fsGroup",
        "fsGroupChangePolicy",
        "runAsGroup",
        "runAsNonRoot",
        "runAsUser",
        "seLinuxChangePolicy",
        "seLinuxOptions",
        "seccompProfile",
        "supplementalGroups",
        "supplementalGroupsPolicy",
        "sysctls",
        "windowsOptions",
    }
)
"""``corev1.PodSecurityContext``: the pod's securityContext fields."""
_MAX_MISSPELT: Final = 8
_MAX_FIELD_NAME: Final = 64
"""Unknown fields looked at per context, and the longest name compared: the hints cost
no more on a hostile securityContext."""


def misspelt(context: Mapping[str, Any], known: frozenset[str], path: str) -> list[dict[str, str]]:
    """Unknown fields of a securityContext that look like a known one (the API server
    drops an unknown field, so ``allowPrivilegedEscalation: false`` leaves the control
    unset): ``field``, ``suggestion``, ``path``."""
    unknown = [key for key in context if isinstance(key, str) and key not in known]
    found: list[dict[str, str]] = []
    for key in unknown[:_MAX_MISSPELT]:
        if len(key) > _MAX_FIELD_NAME:
            continue
        close = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.75)
        if close:
            found.append({"field": key, "suggestion": close[0], "path": join_path(path, key)})
    return found


_NOTHING_SET: dict[str, Any] = {
    "allowPrivilegeEscalation": True,
    "allowPrivilegeEscalationSet": False,
    "runAsNonRoot": False,
    "runAsNonRootFrom": "",
    "seccompProfileType": "",
    "seccompProfileFrom": "",
    "capabilitiesDrop": [],
    "capabilitiesAdd": [],
    "misspelt": [],
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
        context.get("seccompProfile"), pod_context.get("seccompProfile"), Mapping
    )
    capabilities = as_mapping(context.get("capabilities"))
    return {
        "allowPrivilegeEscalation": escalation is not False,
        "allowPrivilegeEscalationSet": isinstance(escalation, bool),
        "runAsNonRoot": non_root is True,
        "runAsNonRootFrom": non_root_from,
        "seccompProfileType": _text(as_mapping(seccomp).get("type")),
        "seccompProfileFrom": seccomp_from,
        "capabilitiesDrop": _strings(capabilities.get("drop")),
        "capabilitiesAdd": _strings(capabilities.get("add")),
        "misspelt": misspelt(context, CONTAINER_CONTEXT_FIELDS, _context_path(container))
        if context
        else [],
    }


def _context_path(container: Mapping[str, Any]) -> str:
    return join_path(_text(container.get("path")), "securityContext")


def _inherited(own: object, pod: object, kind: type) -> tuple[Any, str]:
    """The container's value when it sets one (of ``kind``), else the pod's."""
    if isinstance(own, kind):
        return own, "container"
    if isinstance(pod, kind):
        return pod, "pod"
    return None, ""


def pod_security(
    pod_spec: Mapping[str, Any],
    pod_path: str,
    containers: Sequence[Mapping[str, Any]],
    annotations: Mapping[str, str],
) -> dict[str, Any]:
    """``workload.podSecurity`` (see the module docstring)."""
    context = as_mapping(pod_spec.get("securityContext"))
    context_path = join_path(pod_path, "securityContext")
    non_root = context.get("runAsNonRoot")
    seccomp = context.get("seccompProfile")
    contexts = [_context(context, context_path, "the pod")] if _judged(context) else []
    host_ports: list[dict[str, Any]] = []
    probe_hosts: list[dict[str, Any]] = []
    for container in containers:
        # Most containers set none of these: test cheaply before building anything.
        own = container.get("securityContext")
        if is_mapping(own) and _judged(own):
            path = join_path(container["path"], "securityContext")
            contexts.append(_context(own, path, _owner(container)))
        if "ports" in container:
            host_ports.extend(_host_ports(container))
        if not _HANDLER_FIELDS.isdisjoint(container.keys()):
            probe_hosts.extend(_probe_hosts(container))
    return {
        "path": context_path,
        "misspelt": misspelt(context, POD_CONTEXT_FIELDS, context_path) if context else [],
        "windows": as_mapping(pod_spec.get("os")).get("name") == "windows",
        "userNamespace": pod_spec.get("hostUsers") is False,
        "runAsNonRootSet": isinstance(non_root, bool),
        "runAsNonRoot": non_root is True,
        "seccompProfileSet": is_mapping(seccomp),
        "seccompProfileType": _text(as_mapping(seccomp).get("type")),
        "contexts": contexts,
        "sysctls": list(_sysctls(context, context_path)) if "sysctls" in context else [],
        "appArmorAnnotations": [
            {"key": key, "value": value, "path": _annotation_path(pod_spec, pod_path, key)}
            for key, value in annotations.items()
            if key.startswith(APPARMOR_ANNOTATION_PREFIX)
        ]
        if annotations
        else [],
        "hostPorts": host_ports,
        "probeHosts": probe_hosts,
    }


def _judged(context: Mapping[str, Any]) -> bool:
    return not PER_SETTER_FIELDS.isdisjoint(context.keys())


def _owner(container: Mapping[str, Any]) -> str:
    """How messages name a container: ``container 'train'``."""
    return f"{container['type']} '{container['name']}'"


def _context(context: Mapping[str, Any], path: str, owner: str) -> dict[str, Any]:
    """One security context's fields that Pod Security judges per setter."""
    run_as_user = context.get("runAsUser")
    user_set = isinstance(run_as_user, int) and not isinstance(run_as_user, bool)
    apparmor = context.get("appArmorProfile")
    selinux = as_mapping(context.get("seLinuxOptions"))
    return {
        "owner": owner,
        "path": path,
        "runAsUserSet": user_set,
        "runAsUser": run_as_user if user_set else 0,
        "procMountSet": isinstance(context.get("procMount"), str),
        "procMount": _text(context.get("procMount")),
        "appArmorProfileSet": is_mapping(apparmor),
        "appArmorProfileType": _text(as_mapping(apparmor).get("type")),
        "seLinuxType": _text(selinux.get("type")),
        "seLinuxUser": _text(selinux.get("user")),
        "seLinuxRole": _text(selinux.get("role")),
        "hostProcess": as_mapping(context.get("windowsOptions")).get("hostProcess") is True,
    }


def _sysctls(context: Mapping[str, Any], context_path: str) -> Iterator[dict[str, Any]]:
    items = context.get("sysctls")
    if not isinstance(items, list):
        return
    list_path = join_path(context_path, "sysctls")
    for index, item in enumerate(items):
        if is_mapping(item):
            path = join_path(join_path(list_path, index), "name")
            yield {"name": _text(item.get("name")), "path": path}


def _host_ports(container: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    ports = container.get("ports")
    if not isinstance(ports, list):
        return
    for index, port in enumerate(ports):
        host_port = as_mapping(port).get("hostPort")
        if isinstance(host_port, int) and not isinstance(host_port, bool):
            path = join_path(join_path(container["path"], "ports"), index)
            yield {
                "owner": _owner(container),
                "hostPort": host_port,
                "path": join_path(path, "hostPort"),
            }


def _probe_hosts(container: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    for probe in PROBES:
        yield from _handler_hosts(container, probe, container.get(probe))
    lifecycle = container.get("lifecycle")
    if is_mapping(lifecycle):
        for name in LIFECYCLE_HANDLERS:
            yield from _handler_hosts(container, f"lifecycle.{name}", lifecycle.get(name))


def _handler_hosts(
    container: Mapping[str, Any], handler: str, body: object
) -> Iterator[dict[str, Any]]:
    if not is_mapping(body):
        return
    for action in HOST_ACTIONS:
        host = as_mapping(body.get(action)).get("host")
        if isinstance(host, str):
            yield {
                "owner": _owner(container),
                "handler": f"{handler}.{action}",
                "host": host,
                "path": f"{container['path']}.{handler}.{action}.host",
            }


def _annotation_path(pod_spec: Mapping[str, Any], pod_path: str, key: str) -> str:
    """Where the pod (template)'s annotation ``key`` is written: the template's
    ``metadata`` beside its ``spec``, or (KServe components, whose pod fields are
    inline) the component's own ``annotations`` or else the object's."""
    if pod_path == "spec":
        metadata = "metadata"
    elif pod_path.endswith(".spec"):
        metadata = pod_path[: -len("spec")] + "metadata"
    elif key in as_mapping(pod_spec.get("annotations")):
        return join_path(join_path(pod_path, "annotations"), key)
    else:
        metadata = "metadata"
    return join_path(join_path(metadata, "annotations"), key)


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


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _strings(value: object) -> list[str]:
    return [item for item in value if isinstance(item, str)] if isinstance(value, list) else []
