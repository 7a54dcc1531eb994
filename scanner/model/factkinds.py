"""Where facts come from: the node-pool providers, and the kinds each group of facts
is read from (``scanner.model.facts`` declares each fact with one of these sets: what
its value may depend on besides the subject's own object)."""

from typing import Final, NamedTuple

from scanner.kinds import WORKLOAD_KINDS

Kinds = frozenset[str]
NONE: Kinds = frozenset()


class Provider(NamedTuple):
    """A node-pool provider (``scanner.model.providers``): its declaration's kind, and
    the kinds its node facts are joined from."""

    kind: str
    group: str
    joins: Kinds = NONE


KARPENTER: Final = Provider("NodePool", "karpenter.sh", frozenset({"EC2NodeClass"}))
GKE: Final = Provider("ContainerNodePool", "container.cnrm.cloud.google.com")
CLUSTER_API: Final = Provider("MachineDeployment", "cluster.x-k8s.io")
PROVIDERS: Final = (KARPENTER, GKE, CLUSTER_API)

# Where facts come from: each set is what a fact's value may depend on.
POOL_KINDS: Final = frozenset({"Node", *(provider.kind for provider in PROVIDERS)})
"""Nodes and node-pool declarations: the ``node`` and ``pool`` subjects."""
IDENTITY = frozenset().union(*(provider.joins for provider in PROVIDERS))
DRA = frozenset({"ResourceClaim", "ResourceClaimTemplate", "DeviceClass"})
GPU_WORKLOADS = WORKLOAD_KINDS | DRA
"""Which workloads exist and use GPUs (DRA claims count), and which are controlled."""
DEVICE_PLUGIN = frozenset({"ClusterPolicy", "ConfigMap"})
"""The GPU Operator's ClusterPolicy and the device-plugin ConfigMaps it names."""
NODE = POOL_KINDS | DEVICE_PLUGIN | IDENTITY
TENANTS = NODE | GPU_WORKLOADS | {"Namespace"}
"""Pools with their tenants: which workloads (of which trust domain) they admit."""
KUEUE = frozenset({"LocalQueue", "ClusterQueue", "ResourceFlavor"})
"""Where Kueue places a queued workload (``scanner.model.queues``)."""
PLACED = TENANTS | KUEUE
"""Where a workload may go: a queued one goes where Kueue's flavor puts it."""
SIGNATURES = frozenset({"ClusterImagePolicy", "ClusterPolicy", "Policy", "Namespace"})
RBAC = DEVICE_PLUGIN | {"Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding", "Node"}
"""Bindings and roles, and the objects a ``resourceNames`` rule must name to count:
device-stack ConfigMaps (the ClusterPolicy names some), Nodes, the ClusterPolicy."""
ADMISSION = frozenset({"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"})
NS = frozenset({"Namespace"})
NETPOL = frozenset({"NetworkPolicy"})
OTHER_NETPOL = (
    NETPOL
    | {"CiliumNetworkPolicy", "CiliumClusterwideNetworkPolicy"}
    | {
        "GlobalNetworkPolicy",
        "AdminNetworkPolicy",
        "BaselineAdminNetworkPolicy",
    }
)
OPERATOR = frozenset({"ClusterPolicy", "Deployment", "Node"})
BUCKETS = frozenset(
    {"PersistentVolumeClaim", "PersistentVolume", "StorageBucket", "StorageBucketAccessControl"}
    | {"IAMPolicyMember", "IAMPartialPolicy", "Bucket", "BucketPublicAccessBlock"}
    | {"BucketServerSideEncryptionConfiguration"}
)
"""Weight buckets: the volumes that mount them, their declarations (``model.buckets``)."""
