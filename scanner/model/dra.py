"""DRA: a pod's resource claims, resolved to ResourceClaims, templates and DeviceClasses.

docs/platform-model.md ("DRA"): a pod also consumes GPUs when it references a
ResourceClaim or ResourceClaimTemplate whose device requests use a GPU
DeviceClass: ``gpu.nvidia.com`` or ``mig.nvidia.com`` (the NVIDIA DRA driver's
classes, GPU by name even when the DeviceClass object is not in scope), or any
DeviceClass whose CEL selectors compare ``device.driver`` with ``gpu.nvidia.com``.

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


_MISSING = _Claim(found=False, device_classes=(), gpu=False, ref="")


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
        names its requests use), ``gpu``, ``path`` (``spec.resourceClaims[0]``) and
        ``ref`` (``namespace/Kind/name`` of the claim object, ``""`` when not found).
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
                cached = _Claim(True, classes, gpu, obj.ref.logical_name)
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
    v1), and in every ``firstAvailable[]`` alternative (the scheduler may pick any).
    """
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


def _enumerate(value: object) -> Iterator[tuple[int, Mapping[str, Any]]]:
    """(index, item) for the mapping items of a list; anything else yields nothing."""
    if isinstance(value, list):
        for index, item in enumerate(value):
            if isinstance(item, Mapping):
                yield index, item


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""
