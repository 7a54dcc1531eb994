"""How a workload shares the GPUs it gets: ``workload.gpuSharing``.

Besides the pool's own sharing (time-slicing or MPS set for its nodes), a pod may take
a share of one GPU that the scheduler or a device plugin puts beside other pods:

* ``fractional``: the KAI scheduler's (and Run:ai's) ``gpu-fraction`` or
  ``gpu-memory`` pod annotation, with a quantity above zero (such a pod asks for no
  ``nvidia.com/gpu``, and is a GPU workload all the same); HAMi's
  ``nvidia.com/gpumem``, ``nvidia.com/gpumem-percentage`` or ``nvidia.com/gpucores``
  beside a GPU request. Fractional pods of different tenants share GPUs on any pool
  (``scanner.model.pools``, PG201).
* ``time-slicing`` / ``mps``: a DRA claim's ``GpuConfig`` sharing strategy
  (``scanner.model.dra.claim_sharing``); the pods sharing one claim share its GPUs, all
  in the claim's namespace.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Final

from scanner.inventory import is_mapping, join_path
from scanner.kinds import CONTAINER_FIELDS
from scanner.model.quantity import is_zero, parse_quantity

FRACTION_ANNOTATIONS: Final = ("gpu-fraction", "gpu-memory")
"""Pod annotations that ask the KAI scheduler (and Run:ai, its origin) for a share of
one GPU: a fraction (``"0.5"``) or an amount of GPU memory. Such a pod asks for no
``nvidia.com/gpu``; the scheduler places it on a GPU other such pods share."""

HAMI_RESOURCES: Final = frozenset(
    {"nvidia.com/gpumem", "nvidia.com/gpumem-percentage", "nvidia.com/gpucores"}
)
"""HAMi's resources for a share of a GPU's memory or cores: HAMi places several such
containers on one GPU."""


def gpu_sharing(
    pod_spec: Mapping[str, Any],
    pod_meta: Mapping[str, Any],
    path: str,
    uses_gpu: bool,
    claims: Sequence[Mapping[str, Any]],
) -> dict[str, str]:
    """How the pod shares the GPUs it gets (``WorkloadFacts.gpuSharing``): ``mode``,
    ``by`` and ``path``. Runs on every replica pod: the usual pod, with no annotation
    of the two and no GPU, costs two lookups."""
    annotations = pod_meta.get("annotations")
    if annotations and is_mapping(annotations):
        for key in FRACTION_ANNOTATIONS:
            share = parse_quantity(annotations.get(key))
            if share is not None and share > 0:
                where = join_path(join_path(_metadata_path(path), "annotations"), key)
                return {"mode": "fractional", "by": f"annotation {key}", "path": where}
    if uses_gpu:
        for container, container_path in _container_maps(pod_spec, path):
            found = _hami_resource(container)
            if found is not None:
                section, name = found
                where = join_path(join_path(container_path, "resources"), section)
                return {"mode": "fractional", "by": f"resource {name}", "path": where}
        for claim in claims:
            if claim["sharing"]:
                by = f"DRA claim {claim['claimName']}"
                return {"mode": claim["sharing"], "by": by, "path": claim["path"]}
    return {"mode": "", "by": "", "path": ""}


def _metadata_path(pod_spec_path: str) -> str:
    """Where the pod template's metadata is: beside its ``spec``."""
    if pod_spec_path == "spec":
        return "metadata"
    if pod_spec_path.endswith(".spec"):
        return pod_spec_path[: -len("spec")] + "metadata"
    return pod_spec_path  # a KServe component: the pod's fields are inlined


def _container_maps(pod_spec: Mapping[str, Any], path: str) -> Iterator[tuple[Any, str]]:
    for field_name, _ in CONTAINER_FIELDS:
        containers = pod_spec.get(field_name)
        if isinstance(containers, list):
            for index, container in enumerate(containers):
                yield container, join_path(join_path(path, field_name), index)


def _hami_resource(container: object) -> tuple[str, str] | None:
    """(``limits`` or ``requests``, name) of the first HAMi share resource a container
    asks for with a quantity other than zero."""
    resources = container.get("resources") if is_mapping(container) else None
    if not is_mapping(resources):
        return None
    for section_name in ("limits", "requests"):
        section = resources.get(section_name)
        if is_mapping(section):
            for key, value in section.items():
                if key in HAMI_RESOURCES and not is_zero(value):
                    return section_name, str(key)
    return None
