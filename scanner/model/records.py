"""The records facts hold inside them (plain dicts), typed for the model's code.

``scanner.model.facts`` declares the facts themselves; these are the shapes of their
items (a taint, a tenant of a pool, ...), which CEL reads as maps.
"""

from typing import Any, TypedDict

Container = dict[str, Any]  # as written, with path, type, name, digestPinned, security, ...


class Taint(TypedDict):
    key: str
    value: str
    effect: str


class Tenant(TypedDict):
    namespace: str
    trustDomain: str
    workloads: int


class GpuWorkloadNames(TypedDict):
    count: int
    names: list[str]


class RunningNode(TypedDict):
    name: str
    sharing: str
    shared: bool
    trustDomains: list[str]


GpuResource = dict[str, Any]  # see WorkloadFacts.gpuResources
