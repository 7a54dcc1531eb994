"""How many GPUs (or MIG slices, or shares) one node of a pool gives a container or a
pod: the ``perNode``/``perPod`` facts of a workload's targets (PG108, PG603's diagnosis).
Unknown is not zero: a pool with a member of unknown size has no size (``largest``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

SHARED_MODES = ("time-slicing", "mps", "mig+time-slicing", "mig+mps")


def largest(
    requested: Sequence[str], members: Sequence[Mapping[str, Any]], *, whole_pod: bool = False
) -> dict[str, int]:
    """Resource -> the most one node of ``members`` gives (``per_node``). A resource is
    left out when any member's size is unknown (a declaration that names no GPU count,
    MIG slices no Node status shows): that member may be the largest, so "does not fit"
    cannot be said (PG108). 0: known to give none (a live Node advertising none)."""
    found: dict[str, int] = {}
    for name in requested:
        sizes = [per_node(name, member, whole_pod=whole_pod) for member in members]
        if all(
            size > 0 or member.get("statusKnown")
            for size, member in zip(sizes, members, strict=True)
        ):
            found[name] = max(sizes)
    return found


def per_node(resource: str, member: Mapping[str, Any], *, whole_pod: bool = False) -> int:
    """How many ``resource`` one node like ``member`` gives one container; with
    ``whole_pod``, all the pod's containers together (it has them all). 0 when unknown,
    or when a live Node's status shows none (``largest`` tells the two apart).

    Whole GPUs count as what a live Node's status shows (a mixed-strategy node
    advertises its GPUs less those split into slices), else the node's GPUs
    (``gpuCount``). A MIG slice is known only
    from what a Node's status shows, for a GPU's slice count depends on its model,
    not just on the profile (``all-1g.10gb`` makes 7 on an H100, 4 on an A100 40GB).
    Slices are ``nvidia.com/mig-*``, and ``nvidia.com/gpu`` on a MIG node that
    advertises no ``nvidia.com/mig-*`` (the single strategy, GKE's partitions). A
    time-sliced or MPS node advertises each GPU once per replica, but gives one
    container one replica under MPS or ``failRequestsGreaterThanOne``.
    """
    mig_backed = resource.startswith("nvidia.com/mig-") or (
        "mig" in member["sharing"]
        and not any(name.startswith("nvidia.com/mig-") for name in member["advertises"])
    )
    if mig_backed:
        return int(member["resourceCounts"].get(resource, 0))
    if member["sharing"].endswith("unknown") and not member.get("statusKnown"):
        return 0  # its device-plugin config is not in scope: it may share its GPUs
    if member["sharing"] in SHARED_MODES:
        # One replica per container under MPS or failRequestsGreaterThanOne; else each
        # GPU is advertised ``replicas`` times: what a live Node's status shows, else
        # the GPUs times the replicas, else (replicas unknown) the GPUs.
        if member.get("oneShare") and not whole_pod:
            return 1
        seen = member["resourceCounts"].get(resource, 0)
        shares = member["gpuCount"] * member.get("replicas", 0)
        return min(int(seen or shares or member["gpuCount"]), _MOST)
    # What a live Node advertises (none: 0, unknown here; PG106 and PG601 say why): under
    # the mixed strategy, its GPUs less those split.
    if member.get("statusKnown"):
        return int(member["resourceCounts"].get(resource, 0))
    return int(member["gpuCount"])


_MOST = 2**31
"""Counts from labels are bounded: a product past int64 would fail every rule reading
it (CEL integers are int64), and no node has more of anything."""
