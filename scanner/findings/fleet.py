"""The GPU fleet a run saw, in a few typed records every reporter can read.

The model (``scanner.model.pools``) groups GPU nodes and node-pool declarations into
pools and joins tenants to them; rules read those facts as CEL values. Reports want
a small, stable digest of the same thing: each pool with its SKU, sharing mode, MIG
strategy, the trust domains of its tenants and its members, so the HTML report can
draw the fleet and ``--compare`` or other tools can read it from the JSON report.
It is built once per run from the finished model (pools, namespaces), never per
object, and imports nothing of the model at run time: a reporter that reads it
does not load the model's modules.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from scanner.inventory import KubeObject
    from scanner.model.pools import Pool


@dataclass(frozen=True, slots=True)
class Tenant:
    """A namespace with workloads that schedule onto a pool (``pool.tenants``)."""

    namespace: str
    trust_domain: str
    workloads: int


@dataclass(frozen=True, slots=True)
class PoolSummary:
    """One GPU pool as the model saw it."""

    name: str
    """The pool label's value or the declaration's name; ``""`` for GPU nodes with no
    pool label (the *unpooled* group)."""
    skus: tuple[str, ...]
    """Values of the config's ``skuLabel`` on its members."""
    products: tuple[str, ...]
    """``nvidia.com/gpu.product`` of its members (GPU Feature Discovery)."""
    sharing: str
    """``exclusive``, ``time-slicing``, ``mps``, ``mig``, ``mig+time-slicing``, ... or
    ``mixed`` when its members disagree."""
    mig_strategies: tuple[str, ...]
    """``single`` / ``mixed`` of its MIG members; empty without MIG."""
    trust_domains: tuple[str, ...]
    """Trust domains of its tenants whose Namespace is in scope."""
    tenants: tuple[Tenant, ...]
    nodes: int
    """Members that are Nodes."""
    declarations: int
    """Members that are node-pool declarations (Karpenter NodePool, GKE ContainerNodePool,
    Cluster API MachineDeployment)."""
    gpus: int
    """GPUs its Nodes report (``nvidia.com/gpu.count``), summed; 0 when unknown."""
    members: tuple[str, ...]
    """Logical names (``Kind/name``, ``namespace/Kind/name``) of its members, as
    ``ObjectRef.logical_name`` spells a finding's object."""

    @property
    def shared(self) -> bool:
        """Whether tenants share physical GPUs (time-slicing or MPS, with MIG or not)."""
        return any(part in ("time-slicing", "mps") for part in self.sharing.split("+"))

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "skus": list(self.skus),
            "products": list(self.products),
            "sharing": self.sharing,
            "migStrategies": list(self.mig_strategies),
            "trustDomains": list(self.trust_domains),
            "tenants": [
                {
                    "namespace": tenant.namespace,
                    "trustDomain": tenant.trust_domain,
                    "workloads": tenant.workloads,
                }
                for tenant in self.tenants
            ],
            "nodes": self.nodes,
            "declarations": self.declarations,
            "gpus": self.gpus,
            "members": list(self.members),
        }


@dataclass(frozen=True, slots=True)
class Fleet:
    """Every GPU pool of a run, and the trust domain of each namespace in scope."""

    pools: tuple[PoolSummary, ...] = ()
    trust_domains: Mapping[str, str] | None = None
    """Namespace -> trust domain, for the Namespace objects the run saw (a scan sees
    only those in its paths); ``None`` stands for none."""

    def trust_domain(self, namespace: str) -> str | None:
        return (self.trust_domains or {}).get(namespace)

    def as_json(self) -> dict[str, Any]:
        """The ``fleet`` section of the JSON report."""
        return {
            "pools": [pool.as_json() for pool in self.pools],
            "trustDomains": dict(sorted((self.trust_domains or {}).items())),
        }


def summarize(
    pools: Sequence[Pool], namespaces: Iterable[tuple[KubeObject, Mapping[str, Any]]]
) -> Fleet:
    """The fleet of a finished model: its ``pools`` and ``namespaces``."""
    return Fleet(
        pools=tuple(_pool(pool) for pool in pools),
        trust_domains={str(facts["name"]): str(facts["trustDomain"]) for _, facts in namespaces},
    )


def _pool(pool: Pool) -> PoolSummary:
    facts = pool.facts
    members = pool.members
    nodes = sum(1 for _, member in members if member["source"] != "declaration")
    return PoolSummary(
        name=str(facts["name"]),
        skus=tuple(facts["skus"]),
        products=tuple(sorted({str(m["product"]) for _, m in members if m["product"]})),
        sharing=str(facts["sharing"]),
        mig_strategies=tuple(facts["migStrategies"]),
        trust_domains=tuple(facts["trustDomains"]),
        tenants=tuple(
            Tenant(str(t["namespace"]), str(t["trustDomain"]), int(t["workloads"]))
            for t in facts["tenants"]
        ),
        nodes=nodes,
        declarations=len(members) - nodes,
        gpus=sum(int(m["gpuCount"] or 0) for _, m in members if m["source"] != "declaration"),
        members=tuple(obj.ref.logical_name for obj, _ in members),
    )
