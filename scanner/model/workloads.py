"""Workloads: every pod-template-bearing object, reduced to the facts rules read.

``Workload.facts`` is the CEL variable ``workload``; ``scanner.model.facts``
(``WorkloadFacts``) declares each of its facts, docs/facts.md lists them. A GPU workload
CRD with several pod templates is one workload per template, each with its own
``podSpecPath``; which kinds carry pod templates, and where, is the table in
``scanner.kinds``.

A controlled workload's facts are computed in two steps. A live cluster has a pod per
replica, and nearly every pod is controlled: the template rules skip it, and the rules
about running instances (PG201, PG603) read only a few facts before their condition
decides. So the model gives a controlled workload its *instance facts* at once
(``INSTANCE_FACTS``, the facts ``scanner.model.facts`` declares per instance: the
identity of the object, ``podSpec``, ``gpu``, ``draClaims``, ``pending``, ``controlled``;
then ``ns``, ``runningNode``, ``runningShared``, ``trustDomain`` and ``poolsKnown`` from
the model's joins) and the rest when a rule needs it (``Workload.complete``, called
by the engine as ``scanner.evaluate.optimize.projection`` decides): the template facts,
then the joins that ``build_model`` registered (targets, service account, RuntimeClass,
pod security, signatures). Complete facts
are the same as those computed at once (``build_model(defer=False)``); the tests
compare the two on live snapshots, the only input with controlled workloads.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Final, NamedTuple

from scanner.inventory import InvalidDocument, KubeObject, is_mapping, join_path
from scanner.kinds import CONTAINER_FIELDS, INLINE_CONTAINER_NAME, PodTemplate, workload_kind
from scanner.model.controllers import top_controllers
from scanner.model.dra import DraResolver
from scanner.model.facts import WorkloadFacts, table
from scanner.model.index import ObjectIndex
from scanner.model.quantity import is_zero, positive_count
from scanner.model.selectors import label_value
from scanner.model.sharing import gpu_sharing
from scanner.model.targeting import required_terms

GPU_RESOURCE = re.compile(
    r"^nvidia\.com/(?:gpu|gpu\.shared|mig-[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?)$"
)
"""Resource names that make a container a GPU consumer (docs/platform-model.md):
``nvidia.com/mig-<profile>`` takes any profile Kubernetes accepts in a resource name
(a qualified name: alphanumerics, ``-``, ``_``, ``.``), for the device plugin names MIG
resources ``"mig-" + profile`` with ``+`` written ``.``: ``mig-1g.10gb.me``,
``mig-1g.24gb-me``, ``mig-2g.48gb.me.all``, and ``.shared`` when renamed."""

_DIGEST_PINNED = re.compile(r"@sha256:[0-9a-f]{64}$")
"""An image pinned by digest (PG501). Computed here once: cel-cpp recompiles a
``matches()`` pattern on every call, so once per container otherwise."""


class Workload(NamedTuple):
    """A pod-template-bearing object and its derived facts (the CEL ``workload``).
    A named tuple, like ``Subject``: a live cluster has one per replica pod."""

    obj: KubeObject
    facts: WorkloadFacts
    """Mutable while the model is built (joins add facts), and while ``complete()`` adds
    a deferred workload's other facts (in a forked child, only the child's copy);
    never changed once complete. Only the instance facts until then."""
    deferred: Deferred | None = None
    """How to compute the rest of a controlled workload's facts (module docstring)."""

    @property
    def is_gpu(self) -> bool:
        return bool(self.facts["gpu"])

    def complete(self) -> WorkloadFacts:
        """Every fact of the workload, computing the deferred ones on the first call."""
        deferred = self.deferred
        if deferred is not None and not deferred.done:
            deferred.done = True
            template = deferred.template
            self.facts.update(
                template_facts(
                    template.spec,
                    template.metadata,
                    template.path,
                    template.container_fields,
                    template.gpu_node_selector,
                )
            )
            for join in deferred.joins:
                join(self)
        return self.facts


INSTANCE_FACTS: Final = frozenset(
    name for name, declared in table(WorkloadFacts).items() if declared.fact.instance
)
"""The facts a deferred workload has before ``complete()``
(scanner/evaluate/optimize/projection.py relies on the list being exact; a test compares
it with the facts)."""

Join = Callable[[Workload], None]
"""A model join for one workload: sets facts that depend on other objects."""


class Deferred:
    """The template of a controlled workload whose remaining facts wait for a rule, and
    the joins to run then (the list ``build_model`` fills once the workloads exist)."""

    __slots__ = ("done", "joins", "template")

    def __init__(self, template: PodTemplate, joins: Sequence[Join]) -> None:
        self.template = template
        self.joins = joins
        self.done = False


def join_complete(workloads: Iterable[Workload], join: Join) -> Join:
    """Apply ``join`` to every workload whose facts are complete; return it for the
    deferred ones, which run it when they complete."""
    for workload in workloads:
        if workload.deferred is None:
            join(workload)
    return join


def build_workloads(
    objects: Iterable[KubeObject],
    index: ObjectIndex | None = None,
    later: list[Join] | None = None,
) -> tuple[list[Workload], list[InvalidDocument]]:
    """Every workload among ``objects``, one per pod template; pod specs that are not
    mappings become PG003. ``index`` (all objects of the run) resolves DRA claims and
    controllers; without it no claim or controller is found.

    ``later``: the joins that complete deferred workloads, which the caller appends
    once it has built them; with it, controlled workloads get their instance facts
    now and the rest on ``complete()``. Without it every workload is computed in full.
    """
    dra = DraResolver(index)
    found: list[tuple[KubeObject, PodTemplate]] = []
    invalid: list[InvalidDocument] = []
    for obj in objects:
        entry = workload_kind(obj.kind, obj.api_version)
        if entry is None:
            continue
        for template in entry.templates(obj.body):
            pod_spec, path = template.spec, template.path
            if is_mapping(pod_spec):
                found.append((obj, template))
            elif pod_spec is not None:
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
    tops = top_controllers([obj for obj, _ in found], index) if index is not None else {}
    workloads: list[Workload] = []
    names: dict[int, str] = {}  # id(top controller) -> "Kind/name", shared by its replicas
    for obj, template in found:
        top = tops.get(id(obj))
        deferred = None
        if top is not None and later is not None:
            facts = instance_facts(
                obj,
                template.spec,
                template.path,
                template.template,
                template.container_fields,
                dra,
                template.metadata,
            )
            deferred = Deferred(template, later)
        else:
            facts = workload_facts(
                obj,
                template.spec,
                template.metadata,
                template.path,
                template=template.template,
                container_fields=template.container_fields,
                gpu_node_selector=template.gpu_node_selector,
                dra=dra,
            )
        if top is not None:
            facts["controlled"] = True
            name = names.get(id(top))
            if name is None:
                name = names[id(top)] = f"{top.kind}/{top.name}"
            facts["controller"] = name
        workloads.append(Workload(obj, facts, deferred))
    return workloads, invalid


def instance_facts(
    obj: KubeObject,
    pod_spec: Mapping[str, Any],
    path: str,
    template: str = "",
    container_fields: tuple[str, ...] = (),
    dra: DraResolver | None = None,
    pod_meta: Mapping[str, Any] | None = None,
) -> WorkloadFacts:
    """The facts every workload gets at once (see the module docstring). ``pod_meta``:
    the pod template's metadata (a Pod's own when None)."""
    ref = obj.ref  # the identity, read once
    namespace = ref.namespace
    dra_claims = (dra or DraResolver()).claims(pod_spec, path, namespace or "default")
    gpu_via_dra = bool(dra_claims) and any(claim["gpu"] for claim in dra_claims)
    uses_gpu = gpu_via_dra or _uses_gpu(pod_spec, container_fields)
    sharing = gpu_sharing(
        pod_spec, obj.metadata if pod_meta is None else pod_meta, path, uses_gpu, dra_claims
    )
    return {
        "apiVersion": ref.api_version,
        "kind": ref.kind,
        "name": ref.name,
        "namespace": namespace or "default",
        "namespaceSet": bool(namespace),
        "template": template,
        "podSpec": pod_spec,
        "podSpecPath": path,
        "gpu": uses_gpu or sharing["mode"] == "fractional",
        "gpuViaDra": gpu_via_dra,
        "gpuSharing": sharing,
        "draClaims": dra_claims,
        "pending": ref.kind == "Pod" and _phase(obj.body) == "Pending",
        "controlled": False,  # build_workloads sets them from scanner.model.controllers
        "controller": "",
    }


def workload_facts(
    obj: KubeObject,
    pod_spec: Mapping[str, Any],
    pod_meta: Mapping[str, Any],
    path: str,
    *,
    template: str = "",
    container_fields: tuple[str, ...] = (),
    gpu_node_selector: tuple[tuple[str, str], ...] = (),
    dra: DraResolver | None = None,
) -> WorkloadFacts:
    """The CEL ``workload`` of one pod template (see the module docstring), before the
    model's joins.

    ``container_fields`` are pod-spec keys holding one container inline (KServe's
    ``predictor.model``); ``gpu_node_selector`` what a webhook adds to the
    ``nodeSelector`` of a pod asking for ``nvidia.com/gpu`` (``PodTemplate``);
    ``dra`` resolves the pod's resource claims.
    """
    facts = instance_facts(obj, pod_spec, path, template, container_fields, dra, pod_meta)
    facts.update(template_facts(pod_spec, pod_meta, path, container_fields, gpu_node_selector))
    return facts


def template_facts(
    pod_spec: Mapping[str, Any],
    pod_meta: Mapping[str, Any],
    path: str,
    container_fields: tuple[str, ...] = (),
    gpu_node_selector: tuple[tuple[str, str], ...] = (),
) -> WorkloadFacts:
    """The facts of a pod template that are not instance facts."""
    containers = list(_containers(pod_spec, path, container_fields))
    gpu_resources = [entry for container in containers for entry in _gpu_entries(container)]
    selected = selected_labels(pod_spec)
    if gpu_node_selector and any(
        entry["name"] == "nvidia.com/gpu" and entry["hasLimit"]
        for entry in gpu_resources
        if entry["containerPath"] in _listed_containers(containers)
    ):
        for key, value in gpu_node_selector:
            selected[key] = _narrowed(selected.get(key), [value])
    return {
        "podLabels": _string_map(pod_meta.get("labels")),
        "podAnnotations": _string_map(pod_meta.get("annotations")),
        "containers": containers,
        "gpuResources": gpu_resources,
        "gpuPodCounts": pod_gpu_counts(containers, gpu_resources),
        "runtimeClassName": _text(pod_spec.get("runtimeClassName")),
        "serviceAccountName": _text(
            pod_spec.get("serviceAccountName") or pod_spec.get("serviceAccount")
        ),
        "selectedLabels": selected,
        "tolerations": [t for t in _list(pod_spec.get("tolerations")) if is_mapping(t)],
    }


def _listed_containers(containers: Sequence[Mapping[str, Any]]) -> set[str]:
    """Paths of the pod's main containers (``spec.containers`` and inline ones): the ones
    KServe's webhook looks at."""
    return {c["path"] for c in containers if c["type"] == "container"}


def _phase(body: Mapping[str, Any]) -> object:
    status = body.get("status")
    return status.get("phase") if is_mapping(status) else None


def _containers(
    pod_spec: Mapping[str, Any], pod_path: str, inline_fields: tuple[str, ...] = ()
) -> Iterator[dict[str, Any]]:
    for field_name, container_type in CONTAINER_FIELDS:
        if field_name == "containers":
            # Inline containers (KServe framework specs) run beside the listed ones.
            for inline in inline_fields:
                container = pod_spec.get(inline)
                if is_mapping(container):
                    yield _container(
                        container,
                        join_path(pod_path, inline),
                        container_type,
                        INLINE_CONTAINER_NAME,
                    )
        list_path = join_path(pod_path, field_name)
        for index, container in enumerate(_list(pod_spec.get(field_name))):
            if is_mapping(container):
                yield _container(container, join_path(list_path, index), container_type)


def _container(
    container: Mapping[str, Any], path: str, container_type: str, default_name: str = ""
) -> dict[str, Any]:
    facts = dict(container)
    facts["path"] = path
    facts["type"] = container_type
    facts["name"] = _text(container.get("name")) or default_name
    image = container.get("image")
    facts["digestPinned"] = isinstance(image, str) and _DIGEST_PINNED.search(image) is not None
    return facts


def pod_gpu_counts(
    containers: Sequence[Mapping[str, Any]], entries: Sequence[Mapping[str, Any]]
) -> dict[str, dict[str, int]]:
    """GPU resource -> ``pod``: how many the pod needs from one node, as the scheduler
    adds up a pod's requests (its containers and sidecars, init containers with
    ``restartPolicy: Always``, run together; each other init container runs alone
    beside the sidecars declared before it; the pod needs the larger of the two), and
    ``container``: the most one container asks for. Only whole counts in ``limits``
    (``limitCount``) add up."""
    if not entries:  # most pods: no GPU
        return {}
    by_path: dict[str, list[Mapping[str, Any]]] = {}
    for entry in entries:
        by_path.setdefault(entry["containerPath"], []).append(entry)
    running: dict[str, int] = {}  # containers and sidecars
    sidecars: dict[str, int] = {}  # sidecars declared so far
    alone: dict[str, int] = {}  # the largest init container with the sidecars before it
    for container in containers:
        counts = [(e["name"], e["limitCount"]) for e in by_path.get(container["path"], ())]
        sidecar = (
            container["type"] == "initContainer" and container.get("restartPolicy") == "Always"
        )
        if container["type"] == "container" or sidecar:
            for name, count in counts:
                running[name] = running.get(name, 0) + count
        if sidecar:
            for name, count in counts:
                sidecars[name] = sidecars.get(name, 0) + count
        elif container["type"] == "initContainer":
            for name, count in counts:
                alone[name] = max(alone.get(name, 0), count + sidecars.get(name, 0))
    largest: dict[str, int] = {}
    for entry in entries:
        largest[entry["name"]] = max(largest.get(entry["name"], 0), entry["limitCount"])
    return {
        name: {"pod": max(running.get(name, 0), alone.get(name, 0)), "container": largest[name]}
        for name in sorted(largest)
    }


def _gpu_entries(container: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One entry per GPU resource the container names in ``limits`` or ``requests``.

    Entry: ``name``, ``container``, ``containerPath``, ``hasLimit``/``hasRequest``,
    ``limit``/``request`` (as written, stringified), ``limitCount``/``requestCount``
    (the positive whole number, or 0 when the quantity is not one) and
    ``limitPath``/``requestPath``.
    """
    names = _gpu_names(container)
    if not names:
        return []
    resources = container["resources"]
    path = join_path(container["path"], "resources")
    limits = resources.get("limits")
    requests = resources.get("requests")
    limits = limits if is_mapping(limits) else {}
    requests = requests if is_mapping(requests) else {}
    return [
        {
            "name": name,
            "container": container["name"],
            "containerPath": container["path"],
            "hasLimit": name in limits,
            "hasRequest": name in requests,
            "limit": label_value(limits.get(name)),
            "request": label_value(requests.get(name)),
            "limitCount": positive_count(limits.get(name)),
            "requestCount": positive_count(requests.get(name)),
            "limitPath": join_path(join_path(path, "limits"), name),
            "requestPath": join_path(join_path(path, "requests"), name),
        }
        for name in names
    ]


def _uses_gpu(pod_spec: Mapping[str, Any], inline_fields: tuple[str, ...]) -> bool:
    """Whether a container of the pod spec (those ``_containers`` yields) names a GPU
    resource, without building container facts: it runs on every replica pod."""
    for field_name in _CONTAINER_LISTS:
        containers = pod_spec.get(field_name)
        if isinstance(containers, list):
            for container in containers:
                if _names_gpu(container):
                    return True
    return bool(inline_fields) and any(map(_names_gpu, map(pod_spec.get, inline_fields)))


_CONTAINER_LISTS: Final = tuple(field_name for field_name, _ in CONTAINER_FIELDS)


def _names_gpu(container: object) -> bool:
    """``bool(_gpu_names(container))`` for a container mapping, without building the
    list."""
    if not is_mapping(container):
        return False
    resources = container.get("resources")
    if not resources or not is_mapping(resources):
        return False
    for section in (resources.get("limits"), resources.get("requests")):
        if section and is_mapping(section):
            for key, value in section.items():
                if (
                    isinstance(key, str)
                    and key.startswith("nvidia.com/")
                    and GPU_RESOURCE.match(key)
                    and not is_zero(value)  # a count of zero asks for none (_gpu_names)
                ):
                    return True
    return False


def _is_gpu_resource(key: object) -> bool:
    return isinstance(key, str) and key.startswith("nvidia.com/") and bool(GPU_RESOURCE.match(key))


def _gpu_names(container: Mapping[str, Any]) -> list[str]:
    """The GPU resource names a container asks for, sorted: named in ``limits`` or
    ``requests`` with a quantity other than zero in either. ``nvidia.com/gpu: 0`` (a
    chart's default for a CPU build) is admitted and allocates no device: the
    container runs on any node."""
    resources = container.get("resources")
    if not is_mapping(resources):
        return []
    names: set[str] = set()
    for section in (resources.get("limits"), resources.get("requests")):
        if is_mapping(section):
            names.update(
                key
                for key, value in section.items()
                if _is_gpu_resource(key) and not is_zero(value)
            )
    return sorted(names)


def selected_labels(pod_spec: Mapping[str, Any]) -> dict[str, list[str]]:
    """Node label keys every placement of the pod must carry, with the allowed values.

    ``nodeSelector`` pins one value. Required node-affinity terms are ORed, so a key
    counts only when every term pins it with operator ``In``; ``Exists``, ``NotIn``
    and preferred terms do not select anything. What must hold together narrows the
    values, as the scheduler does: ``nodeSelector`` and node affinity, and the
    expressions of one term. A key whose values narrow to none stays, with none: no
    node can carry it.
    """
    selected: dict[str, list[str]] = {}
    terms = required_terms(pod_spec)
    if terms:
        per_term = [_term_in_values(term) for term in terms]
        for key in set.intersection(*(set(values) for values in per_term)):
            allowed: list[str] = []
            for values in per_term:
                allowed.extend(v for v in values[key] if v not in allowed)
            selected[key] = allowed
    node_selector = pod_spec.get("nodeSelector")
    if is_mapping(node_selector):
        for key, value in node_selector.items():
            if isinstance(key, str):
                selected[key] = _narrowed(selected.get(key), [label_value(value)])
    return selected


def _term_in_values(term: Mapping[str, Any]) -> dict[str, list[str]]:
    """Keys the term pins with ``In``, narrowed by its other ``In`` and ``NotIn``
    expressions on the same key (a term's expressions all hold)."""
    pinned: dict[str, list[str]] = {}
    excluded: dict[str, set[str]] = {}
    for expression in _list(term.get("matchExpressions")):
        if not is_mapping(expression):
            continue
        key, operator = expression.get("key"), expression.get("operator")
        if not isinstance(key, str) or operator not in ("In", "NotIn"):
            continue
        values = [label_value(v) for v in _list(expression.get("values"))]
        if operator == "In":
            pinned[key] = _narrowed(pinned.get(key), values)
        else:
            excluded.setdefault(key, set()).update(values)
    return {
        key: [value for value in values if value not in excluded.get(key, ())]
        for key, values in pinned.items()
    }


def _narrowed(allowed: list[str] | None, values: list[str]) -> list[str]:
    """The values of ``values`` that ``allowed`` (None: no constraint yet) also allows."""
    return values if allowed is None else [value for value in allowed if value in values]


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _string_map(value: object) -> dict[str, str]:
    if not is_mapping(value):
        return {}
    return {str(k): label_value(v) for k, v in value.items()}
