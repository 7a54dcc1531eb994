"""The API resources an audit may list: kind, group, versions, plural, scope.

One table for every reader: the audit plans its list calls from it (only the kinds
the facts the enabled rules read come from, ``scanner.audit.reads``), ``deploy/``
grants exactly these in its ClusterRole (a test compares them with what
``scanner.model.facts`` reads), the snapshot reader names a kind's plural in
notifications, and Helm rendering and ``scanner.kinds.CLUSTER_SCOPED`` know which
kinds are namespaced. Secrets are not in the table and never will be:
no rule needs them, and a nightly job that can read every Secret of a cluster
is a target.

Versions are those poolgate reads, in preference order: the audit lists the group's
preferred version (discovery's ``preferredVersion``) when it is one of them, else
the first of them the API server serves (its discovery documents decide, so a
cluster without Karpenter or the GPU Operator is skipped quietly). Plurals here are
the defaults; discovery's own answer wins when it differs.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Resource:
    """One listable kind of one API group."""

    kind: str
    group: str
    """``""`` for the core group."""
    versions: tuple[str, ...]
    plural: str
    namespaced: bool
    operator_namespaces_only: bool = False
    """Listed only inside the operator namespaces (ConfigMaps: the device-plugin
    configuration lives there, and nothing else in a ConfigMap is poolgate's business)."""
    since: int = 1
    """The revision of this table (``REVISION``) that added the kind: a snapshot written
    at an earlier revision could not have listed it."""

    @property
    def label(self) -> str:
        """``pods`` (core) or ``deployments.apps``: how ``kubectl`` and RBAC name it."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def key(self) -> tuple[str, str]:
        """(group, kind): a kind name alone is ambiguous (``ClusterPolicy``)."""
        return (self.group, self.kind)


def _r(
    kind: str, group: str, versions: str, plural: str, namespaced: bool, since: int = 1
) -> Resource:
    return Resource(kind, group, tuple(versions.split()), plural, namespaced, since=since)


CORE: tuple[Resource, ...] = (
    _r("Namespace", "", "v1", "namespaces", False),
    _r("Node", "", "v1", "nodes", False),
    _r("Pod", "", "v1", "pods", True),
    _r("PodTemplate", "", "v1", "podtemplates", True),
    _r("ReplicationController", "", "v1", "replicationcontrollers", True),
    _r("ServiceAccount", "", "v1", "serviceaccounts", True),
    Resource("ConfigMap", "", ("v1",), "configmaps", True, operator_namespaces_only=True),
    # Volumes that mount weight buckets through CSI drivers (PG405, PG406).
    _r("PersistentVolumeClaim", "", "v1", "persistentvolumeclaims", True, since=3),
    _r("PersistentVolume", "", "v1", "persistentvolumes", False, since=3),
)

BUILT_IN: tuple[Resource, ...] = (
    _r("Deployment", "apps", "v1", "deployments", True),
    _r("ReplicaSet", "apps", "v1", "replicasets", True),
    _r("StatefulSet", "apps", "v1", "statefulsets", True),
    _r("DaemonSet", "apps", "v1", "daemonsets", True),
    _r("Job", "batch", "v1", "jobs", True),
    _r("CronJob", "batch", "v1", "cronjobs", True),
    _r("NetworkPolicy", "networking.k8s.io", "v1", "networkpolicies", True),
    _r("Role", "rbac.authorization.k8s.io", "v1", "roles", True),
    _r("RoleBinding", "rbac.authorization.k8s.io", "v1", "rolebindings", True),
    _r("ClusterRole", "rbac.authorization.k8s.io", "v1", "clusterroles", False),
    _r("ClusterRoleBinding", "rbac.authorization.k8s.io", "v1", "clusterrolebindings", False),
    _r("RuntimeClass", "node.k8s.io", "v1", "runtimeclasses", False),
    _r(
        "ValidatingAdmissionPolicy",
        "admissionregistration.k8s.io",
        "v1 v1beta1",
        "validatingadmissionpolicies",
        False,
    ),
    _r(
        "ValidatingAdmissionPolicyBinding",
        "admissionregistration.k8s.io",
        "v1 v1beta1",
        "validatingadmissionpolicybindings",
        False,
    ),
    _r("ResourceClaim", "resource.k8s.io", "v1 v1beta2 v1beta1", "resourceclaims", True),
    _r(
        "ResourceClaimTemplate",
        "resource.k8s.io",
        "v1 v1beta2 v1beta1",
        "resourceclaimtemplates",
        True,
    ),
    _r("DeviceClass", "resource.k8s.io", "v1 v1beta2 v1beta1", "deviceclasses", False),
)

_CNRM_STORAGE = "storage.cnrm.cloud.google.com"
_CNRM_IAM = "iam.cnrm.cloud.google.com"

CRDS: tuple[Resource, ...] = (
    # The GPU Operator, node pools and signature policies (docs/platform-model.md).
    _r("ClusterPolicy", "nvidia.com", "v1", "clusterpolicies", False),
    _r("NodePool", "karpenter.sh", "v1 v1beta1", "nodepools", False),
    _r("EC2NodeClass", "karpenter.k8s.aws", "v1 v1beta1", "ec2nodeclasses", False),
    _r(
        "ContainerNodePool",
        "container.cnrm.cloud.google.com",
        "v1beta1",
        "containernodepools",
        True,
    ),
    _r("MachineDeployment", "cluster.x-k8s.io", "v1beta2 v1beta1", "machinedeployments", True),
    _r(
        "ClusterImagePolicy",
        "policy.sigstore.dev",
        "v1beta1 v1alpha1",
        "clusterimagepolicies",
        False,
    ),
    _r("ClusterPolicy", "kyverno.io", "v1", "clusterpolicies", False),
    _r("Policy", "kyverno.io", "v1", "policies", True),
    # EKS Pod Identity associations made through the ACK controller (PG402).
    _r(
        "PodIdentityAssociation",
        "eks.services.k8s.aws",
        "v1alpha1",
        "podidentityassociations",
        True,
    ),
    # GPU workload CRDs (pod templates; scanner.kinds knows where they keep them).
    _r("PyTorchJob", "kubeflow.org", "v1", "pytorchjobs", True),
    _r("TFJob", "kubeflow.org", "v1", "tfjobs", True),
    _r("MPIJob", "kubeflow.org", "v2beta1 v1", "mpijobs", True),
    _r("RayCluster", "ray.io", "v1 v1alpha1", "rayclusters", True),
    _r("RayJob", "ray.io", "v1 v1alpha1", "rayjobs", True),
    _r("RayService", "ray.io", "v1 v1alpha1", "rayservices", True),
    _r("JobSet", "jobset.x-k8s.io", "v1alpha2", "jobsets", True),
    _r("LeaderWorkerSet", "leaderworkerset.x-k8s.io", "v1", "leaderworkersets", True),
    _r("InferenceService", "serving.kserve.io", "v1beta1", "inferenceservices", True),
    _r("Rollout", "argoproj.io", "v1alpha1", "rollouts", True),
    _r("PaddleJob", "kubeflow.org", "v1", "paddlejobs", True, since=3),
    _r("XGBoostJob", "kubeflow.org", "v1", "xgboostjobs", True, since=3),
    _r("JAXJob", "kubeflow.org", "v1", "jaxjobs", True, since=3),
    _r("Notebook", "kubeflow.org", "v1 v1beta1", "notebooks", True, since=3),
    _r("TrainingRuntime", "trainer.kubeflow.org", "v1alpha1", "trainingruntimes", True, since=3),
    _r(
        "ClusterTrainingRuntime",
        "trainer.kubeflow.org",
        "v1alpha1",
        "clustertrainingruntimes",
        False,
        since=3,
    ),
    _r(
        "LLMInferenceService",
        "serving.kserve.io",
        "v1alpha2 v1alpha1",
        "llminferenceservices",
        True,
        since=3,
    ),
    _r("Job", "batch.volcano.sh", "v1alpha1", "jobs", True, since=3),
    # Kueue's queues and flavors: where a queued workload goes (scanner.model.queues).
    _r("LocalQueue", "kueue.x-k8s.io", "v1beta2 v1beta1", "localqueues", True, since=2),
    _r("ClusterQueue", "kueue.x-k8s.io", "v1beta2 v1beta1", "clusterqueues", False, since=2),
    _r("ResourceFlavor", "kueue.x-k8s.io", "v1beta2 v1beta1", "resourceflavors", False, since=2),
    # Weight buckets declared as Kubernetes objects (scanner.model.buckets).
    _r("StorageBucket", _CNRM_STORAGE, "v1beta1", "storagebuckets", True, since=3),
    _r(
        "StorageBucketAccessControl",
        _CNRM_STORAGE,
        "v1beta1",
        "storagebucketaccesscontrols",
        True,
        since=3,
    ),
    _r("IAMPolicyMember", _CNRM_IAM, "v1beta1", "iampolicymembers", True, since=3),
    _r("IAMPartialPolicy", _CNRM_IAM, "v1beta1", "iampartialpolicies", True, since=3),
    _r("Bucket", "s3.services.k8s.aws", "v1alpha1", "buckets", True, since=3),
    _r("Bucket", "s3.aws.upbound.io", "v1beta2 v1beta1", "buckets", False, since=3),
    _r(
        "BucketPublicAccessBlock",
        "s3.aws.upbound.io",
        "v1beta1",
        "bucketpublicaccessblocks",
        False,
        since=3,
    ),
    _r(
        "BucketServerSideEncryptionConfiguration",
        "s3.aws.upbound.io",
        "v1beta2 v1beta1",
        "bucketserversideencryptionconfigurations",
        False,
        since=3,
    ),
    _r("Bucket", "storage.gcp.upbound.io", "v1beta2 v1beta1", "buckets", False, since=3),
    # Network policies of other engines: where one applies, PG305 does not judge.
    # (Calico's namespaced NetworkPolicy shares its kind name with Kubernetes', whose
    # absence from older snapshots stops PG305: it is judged in scans only.)
    _r("CiliumNetworkPolicy", "cilium.io", "v2", "ciliumnetworkpolicies", True, since=4),
    _r(
        "CiliumClusterwideNetworkPolicy",
        "cilium.io",
        "v2",
        "ciliumclusterwidenetworkpolicies",
        False,
        since=4,
    ),
    _r("GlobalNetworkPolicy", "projectcalico.org", "v3", "globalnetworkpolicies", False, since=4),
    _r(
        "AdminNetworkPolicy",
        "policy.networking.k8s.io",
        "v1alpha1",
        "adminnetworkpolicies",
        False,
        since=4,
    ),
    _r(
        "BaselineAdminNetworkPolicy",
        "policy.networking.k8s.io",
        "v1alpha1",
        "baselineadminnetworkpolicies",
        False,
        since=4,
    ),
)

RESOURCES: tuple[Resource, ...] = CORE + BUILT_IN + CRDS
"""Everything an audit may list, in listing order (Namespaces first: ConfigMaps are
listed only in operator namespaces that exist)."""

REVISION: int = max(resource.since for resource in RESOURCES)
"""This table's revision, recorded in every snapshot (``poolgate.io/kinds-revision``).
A kind added to the table gets ``since=REVISION + 1``, so an audit of an older snapshot
knows the kind was not left out by the rules it was taken with, but by the poolgate
that wrote it (scanner.audit.run.coverage)."""

FORBIDDEN_RESOURCES: frozenset[str] = frozenset({"secrets"})
"""Never listed, whatever a rule asks for."""


def by_kind(kinds: Iterable[str]) -> list[Resource]:
    """The resources of these kind names (every group that has one), in table order."""
    wanted = set(kinds)
    return [resource for resource in RESOURCES if resource.kind in wanted]


def find(group: str, kind: str) -> Resource | None:
    for resource in RESOURCES:
        if resource.group == group and resource.kind == kind:
            return resource
    return None
