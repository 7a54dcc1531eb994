"""DRA: a pod's resource claims, resolved to ResourceClaims, templates and DeviceClasses.

docs/platform-model.md ("DRA"): a pod also consumes GPUs when it references a
ResourceClaim or ResourceClaimTemplate whose device requests use a GPU
DeviceClass: ``gpu.nvidia.com`` or ``mig.nvidia.com`` (the NVIDIA DRA driver's
classes, GPU by name even when the DeviceClass object is not in scope), or any
DeviceClass whose CEL selectors compare ``device.driver`` with ``gpu.nvidia.com``.

Claims of the older ``resource.k8s.io`` versions (``v1alpha2``, Kubernetes 1.27 to
1.30) name a ResourceClass (``spec.resourceClassName``) instead of device requests;
a ResourceClass is a GPU class by name as above, or when its ``driverName`` is
``gpu.resource.nvidia.com`` (the NVIDIA DRA driver of that time) or ``gpu.nvidia.com``.
ResourceClass objects are read in a scan; an audit does not list them (Kubernetes 1.31
removed the API), so there only the class names above make a GPU claim.

A DeviceClass with ``spec.extendedResourceName`` (Kubernetes 1.34, DRA extended
resources) lets pods ask for that name as an extended resource
(``nvidia.com/gpu: 1``) and have DRA allocate it, on nodes whose device plugin does not
advertise it: ``extended_resources`` names them, and a pool that does not advertise
such a name is not short of it (PG106).

Claims resolve within the pod's namespace; a manifest without a namespace is in
``default``, as ``kubectl apply`` would put it. Every claim and class is resolved
once per run, however many pod templates reference it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

from scanner.cel.analysis import analyze
from scanner.errors import CelError
from scanner.inventory import KubeObject, join_path
from scanner.kinds import DEVICE_CLASS_KIND, DRA_GROUP, api_group
from scanner.model.index import ObjectIndex

GPU_DEVICE_CLASSES: frozenset[str] = frozenset({"gpu.nvidia.com", "mig.nvidia.com"})
"""DeviceClass names that are GPU classes whether or not the object is in scope."""

GPU_DRIVER: Final = "gpu.nvidia.com"
RESOURCE_CLASS_KIND: Final = "ResourceClass"
"""The v1alpha2 class a claim's ``resourceClassName`` names."""
GPU_CLASS_DRIVERS: Final = frozenset({"gpu.resource.nvidia.com", GPU_DRIVER})
"""ResourceClass ``driverName`` values of NVIDIA GPU drivers."""


def extended_resources(index: ObjectIndex) -> frozenset[str]:
    """The extended resource names DeviceClasses in scope serve through DRA
    (``spec.extendedResourceName``)."""
    names = set()
    for device_class in index.kind(DEVICE_CLASS_KIND):
        spec = device_class.body.get("spec")
        name = spec.get("extendedResourceName") if isinstance(spec, Mapping) else None
        if isinstance(name, str) and name and api_group(device_class.api_version) == DRA_GROUP:
            names.add(name)
    return frozenset(names)


def selects_gpu_driver(expression: str) -> bool:
    """Whether a DeviceClass selector expression picks devices of the NVIDIA GPU driver:
    it compares ``device.driver`` with ``"gpu.nvidia.com"`` (``==``, either side, or ``in``
    a list), read from its parse (``scanner.cel.analysis``), not evaluated.
    ``vfio.gpu.nvidia.com`` and ``compute-domain.nvidia.com`` are other drivers, and
    an expression that does not parse selects nothing this reading recognises."""
    try:
        compared = analyze(expression, keep=False).compared
    except CelError:  # not CEL (a ParseError)
        return False
    return ("device", ("driver",), GPU_DRIVER) in compared


@dataclass(frozen=True, slots=True)
class _Claim:
    found: bool
    device_classes: tuple[str, ...]
    gpu: bool
    ref: str
    sharing: str = ""


_MISSING = _Claim(found=False, device_classes=(), gpu=False, ref="")

_STRATEGIES: Final = {"TimeSlicing": "time-slicing", "MPS": "mps"}
"""The NVIDIA DRA driver's ``GpuConfig.sharing.strategy`` values, as sharing modes."""


class DraResolver:
    """Resolves pod ``resourceClaims`` against the run's objects, with a cache."""

    def __init__(self, index: ObjectIndex | None = None) -> None:
        self._index = index
        self._claims: dict[tuple[str, str, str], _Claim] = {}
        self._classes: dict[str, bool] = {}

    def claims(
        self, pod_spec: Mapping[str, Any], pod_path: str, namespace: str
    ) -> list[dict[str, Any]]:
        """One fact per pod ``resourceClaims[]`` entry that references a claim.

        Entry: ``name`` (the pod's name for the claim, which containers use in
        ``resources.claims``), ``claimName`` (the ResourceClaim or
        ResourceClaimTemplate it references), ``template`` (True for a template),
        ``found`` (the object is in the scan), ``deviceClasses`` (the DeviceClass
        names its requests use), ``gpu``, ``sharing`` (``claim_sharing``), ``path``
        (``spec.resourceClaims[0]``) and ``ref`` (``namespace/Kind/name`` of the claim
        object, ``""`` when not found).
        """
        facts: list[dict[str, Any]] = []
        entries = pod_spec.get("resourceClaims")
        if not entries:  # the common case: no DRA at all
            return facts
        list_path = join_path(pod_path, "resourceClaims")
        for index, entry in _enumerate(entries):
            reference = _reference(entry)
            if reference is None:
                continue
            kind, claim_name = reference
            claim = self._claim(kind, namespace, claim_name)
            facts.append(
                {
                    "name": _text(entry.get("name")),
                    "claimName": claim_name,
                    "template": kind == "ResourceClaimTemplate",
                    "found": claim.found,
                    "deviceClasses": list(claim.device_classes),
                    "gpu": claim.gpu,
                    "sharing": claim.sharing,
                    "path": join_path(list_path, index),
                    "ref": claim.ref,
                }
            )
        return facts

    def _claim(self, kind: str, namespace: str, name: str) -> _Claim:
        key = (kind, namespace, name)
        cached = self._claims.get(key)
        if cached is None:
            obj = self._lookup(kind, namespace, name)
            if obj is None:
                cached = _MISSING
            else:
                spec = obj.body.get("spec")
                if kind == "ResourceClaimTemplate":
                    spec = spec.get("spec") if isinstance(spec, Mapping) else None
                classes = tuple(dict.fromkeys(_device_class_names(spec)))
                gpu = any(self.is_gpu_class(name) for name in classes)
                cached = _Claim(True, classes, gpu, obj.ref.logical_name, claim_sharing(spec))
            self._claims[key] = cached
        return cached

    def _lookup(self, kind: str, namespace: str, name: str) -> KubeObject | None:
        if self._index is None:
            return None
        obj = self._index.get(kind, namespace, name)
        if obj is None and namespace == "default":
            obj = self._index.get(kind, "", name)
        if obj is None or api_group(obj.api_version) != DRA_GROUP:
            return None
        return obj

    def is_gpu_class(self, name: str) -> bool:
        """Whether DeviceClass ``name`` selects NVIDIA GPUs (by name, or by its selectors)."""
        known = self._classes.get(name)
        if known is None:
            known = name in GPU_DEVICE_CLASSES or self._selects_gpu_driver(name)
            self._classes[name] = known
        return known

    def _selects_gpu_driver(self, name: str) -> bool:
        if self._index is None:
            return False
        resource_class = self._index.get(RESOURCE_CLASS_KIND, "", name)
        if (
            resource_class is not None
            and api_group(resource_class.api_version) == DRA_GROUP
            and resource_class.body.get("driverName") in GPU_CLASS_DRIVERS
        ):
            return True
        device_class = self._index.get(DEVICE_CLASS_KIND, "", name)
        if device_class is None or api_group(device_class.api_version) != DRA_GROUP:
            return False
        spec = device_class.body.get("spec")
        selectors = spec.get("selectors") if isinstance(spec, Mapping) else None
        for _, selector in _enumerate(selectors):
            cel = selector.get("cel")
            expression = cel.get("expression") if isinstance(cel, Mapping) else None
            if isinstance(expression, str) and selects_gpu_driver(expression):
                return True
        return False


def _reference(entry: Mapping[str, Any]) -> tuple[str, str] | None:
    """(kind, name) a pod claim entry references; ``source.*`` is the pre-1.28 form."""
    for holder in (entry, entry.get("source")):
        if not isinstance(holder, Mapping):
            continue
        for field_name, kind in (
            ("resourceClaimName", "ResourceClaim"),
            ("resourceClaimTemplateName", "ResourceClaimTemplate"),
        ):
            value = holder.get(field_name)
            if isinstance(value, str) and value:
                return kind, value
    return None


def _device_class_names(claim_spec: object) -> Iterator[str]:
    """DeviceClass names of a claim spec's ``devices.requests[]``.

    ``deviceClassName`` directly (v1alpha3, v1beta1), under ``exactly`` (v1beta2,
    v1), and in every ``firstAvailable[]`` alternative (the scheduler may pick any);
    a v1alpha2 claim's ``resourceClassName`` (a ResourceClass).
    """
    old = claim_spec.get("resourceClassName") if isinstance(claim_spec, Mapping) else None
    if isinstance(old, str) and old:
        yield old
    devices = claim_spec.get("devices") if isinstance(claim_spec, Mapping) else None
    requests = devices.get("requests") if isinstance(devices, Mapping) else None
    for _, request in _enumerate(requests):
        exactly = request.get("exactly")
        alternatives = [request, exactly if isinstance(exactly, Mapping) else {}]
        alternatives += [sub for _, sub in _enumerate(request.get("firstAvailable"))]
        for alternative in alternatives:
            name = alternative.get("deviceClassName")
            if isinstance(name, str) and name:
                yield name


def claim_sharing(claim_spec: object) -> str:
    """How the NVIDIA DRA driver shares the GPUs of a claim: the ``sharing.strategy`` of
    a ``GpuConfig`` (or ``MigDeviceConfig``) among the claim's opaque ``devices.config``
    for driver ``gpu.nvidia.com`` (``TimeSlicing`` -> ``time-slicing``, ``MPS`` ->
    ``mps``); ``""`` when it sets none. The containers and pods that share the claim
    share its GPUs: all in the claim's namespace."""
    devices = claim_spec.get("devices") if isinstance(claim_spec, Mapping) else None
    configs = devices.get("config") if isinstance(devices, Mapping) else None
    for _, config in _enumerate(configs):
        opaque = config.get("opaque")
        if not isinstance(opaque, Mapping) or opaque.get("driver") != GPU_DRIVER:
            continue
        parameters = opaque.get("parameters")
        sharing = parameters.get("sharing") if isinstance(parameters, Mapping) else None
        strategy = sharing.get("strategy") if isinstance(sharing, Mapping) else None
        if isinstance(strategy, str) and strategy in _STRATEGIES:
            return _STRATEGIES[strategy]
    return ""


def _enumerate(value: object) -> Iterator[tuple[int, Mapping[str, Any]]]:
    """(index, item) for the mapping items of a list; anything else yields nothing."""
    if isinstance(value, list):
        for index, item in enumerate(value):
            if isinstance(item, Mapping):
                yield index, item


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""
