"""The run's configuration as a frozen, typed value.

Defaults are the full security floor: with no config file, every ``require`` switch
is on (docs/configuration.md). ``scanner.config.file`` reads ``.poolgate.yaml`` into
this value; rules see a read-only view of it as the CEL variable ``config``.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from scanner.findings.records import Level

DEFAULT_POOL_LABELS: tuple[str, ...] = (
    "pool",
    "cloud.google.com/gke-nodepool",
    "karpenter.sh/nodepool",
    "eks.amazonaws.com/nodegroup",
    "kubernetes.azure.com/agentpool",
    "agentpool",
)

DEFAULT_SKU_LABELS: tuple[str, ...] = (
    "cloud.google.com/gke-accelerator",
    "karpenter.k8s.aws/instance-gpu-name",
    "nvidia.com/gpu.product",
    "k8s.amazonaws.com/accelerator",
    "node.kubernetes.io/instance-type",
)
"""Node labels whose value names the GPU model, set by the providers: GKE's
accelerator type, Karpenter's GPU name, GPU Feature Discovery's product, the EKS
accelerator label, and the instance type (one GPU model per type on every cloud).
KServe's ``serving.kserve.io/gke-accelerator`` annotation becomes a nodeSelector on
``cloud.google.com/gke-accelerator`` (``scanner.kinds``)."""


@dataclass(frozen=True, slots=True)
class Require:
    """The ``spec.require`` switches of the security floor."""

    runtime_class: str = "nvidia"
    """RuntimeClass GPU workloads must use; empty (``false`` in the file) turns PG103 off."""
    image_digest_pin: bool = True
    signature_verify: bool = True
    pod_security: str = "restricted"
    """``privileged`` | ``baseline`` | ``restricted``."""
    network_policy: str = "deny-by-default"
    """Empty (``false`` in the file) turns the default-deny requirement off."""
    workload_identity: bool = True
    time_slice_same_trust_only: bool = True
    forbid_node_wide_object_iam: bool = True
    weight_bucket_public_access: bool = False
    """Weight buckets may allow public access (PG405 is off when true)."""
    cmek: bool = True
    """Weight buckets must be encrypted with a customer-managed key (PG406)."""


@dataclass(frozen=True, slots=True)
class RuleOverride:
    """Per-rule settings from ``spec.rules.<ID>``; ``None`` keeps the rule's default."""

    level: Level | None = None
    enabled: bool | None = None
    params: Mapping[str, Any] = field(default_factory=dict)
    line: int = 0
    """Line of the rule id in the config file (0 when not from a file)."""


@dataclass(frozen=True, slots=True)
class AdminSubject:
    """An RBAC subject allowed to act in the operator namespaces (``spec.admins``, PG306)."""

    kind: str
    """``User`` | ``Group`` | ``ServiceAccount``."""
    name: str
    namespace: str = ""
    """Only for ``ServiceAccount`` subjects."""


@dataclass(frozen=True, slots=True)
class Exemption:
    """``spec.exemptions[i]``: findings of ``rule`` on matching objects are suppressed.

    ``namespace``, ``kind`` and ``name`` are patterns where ``*`` matches any run of
    characters; an empty pattern matches everything. An exemption without a
    ``reason``, or past its ``expires`` date, does not suppress and is reported.
    """

    rule: str
    namespace: str = ""
    kind: str = ""
    name: str = ""
    reason: str = ""
    expires: datetime.date | None = None
    """Last day the exemption applies; ``None`` for no expiry."""
    line: int = 0
    """Line of the exemption in the config file (0 when not from a file)."""


@dataclass(frozen=True, slots=True)
class Config:
    require: Require = field(default_factory=Require)
    operator_namespaces: tuple[str, ...] = ("gpu-operator", "nvidia-gpu-operator")
    system_namespaces: tuple[str, ...] = ("kube-system",)
    trust_domain_label: str = "poolgate.io/trust-domain"
    sku_label: str = "sku"
    """The organisation's own SKU label (PG102 asks GPU nodes for it)."""
    sku_labels: tuple[str, ...] = DEFAULT_SKU_LABELS
    """Other node labels that name the GPU model: a selection on any of them (or on
    ``sku_label``) selects a SKU (PG104)."""
    pool_labels: tuple[str, ...] = DEFAULT_POOL_LABELS
    extended_resource_toleration: bool = False
    """The cluster runs the ExtendedResourceToleration admission plugin
    (docs/platform-model.md, "Targeting")."""
    admission_preview: bool = True
    """Run the admission policies found in the scan on its workloads (PG606)."""
    workload_identity_keys: tuple[str, ...] = ()
    """ServiceAccount annotation keys that also grant workload identity, besides the
    built-in GKE, EKS and Azure ones."""
    workload_identity_accounts: tuple[str, ...] = ()
    """ServiceAccounts (``namespace/name``, globs) bound to a workload identity outside
    Kubernetes: EKS Pod Identity associations made with Terraform, eksctl or the API."""
    admins: tuple[AdminSubject, ...] = ()
    rules: Mapping[str, RuleOverride] = field(default_factory=dict)
    rule_dirs: tuple[str, ...] = ()
    """Absolute paths (the file gives them relative to itself)."""
    exemptions: tuple[Exemption, ...] = ()
    exclude: tuple[str, ...] = ()
    """Gitignore-style patterns of paths a scan leaves out, relative to the repository
    root (``scanner.config.excludes``); each checked when the file loaded."""
    source: str = ""
    """The file this config came from; empty for built-in defaults."""

    def cel_view(self) -> dict[str, Any]:
        """What rules see as ``config``: plain values, camelCase like the config file.

        Rule settings, rule directories, exemptions and the admission preview switch are
        not rule-facing and stay out.
        """
        require = self.require
        return {
            "require": {
                "runtimeClass": require.runtime_class,
                "imageDigestPin": require.image_digest_pin,
                "signatureVerify": require.signature_verify,
                "podSecurity": require.pod_security,
                "networkPolicy": require.network_policy,
                "workloadIdentity": require.workload_identity,
                "timeSliceSameTrustOnly": require.time_slice_same_trust_only,
                "forbidNodeWideObjectIAM": require.forbid_node_wide_object_iam,
                "weightBucketPublicAccess": require.weight_bucket_public_access,
                "cmek": require.cmek,
            },
            "operatorNamespaces": list(self.operator_namespaces),
            "systemNamespaces": list(self.system_namespaces),
            "trustDomainLabel": self.trust_domain_label,
            "skuLabel": self.sku_label,
            "skuLabels": list(dict.fromkeys((self.sku_label, *self.sku_labels))),
            "poolLabels": list(self.pool_labels),
            "extendedResourceToleration": self.extended_resource_toleration,
            "workloadIdentityKeys": list(self.workload_identity_keys),
            "workloadIdentityAccounts": list(self.workload_identity_accounts),
            "admins": [
                {"kind": admin.kind, "name": admin.name, "namespace": admin.namespace}
                for admin in self.admins
            ],
        }
