"""Which kinds a rule reads in an audit: one relation for what the audit lists
(``scanner.audit.run.plan``) and for what stops a rule when it cannot be read
(``scanner.audit.run.coverage``), so the two never disagree.

A rule reads the kinds it reports on (its *subjects*: ``match.kinds`` of an object
rule, the kinds a derived subject is made from) and the kinds its verdicts are
*joined* from: those its ``needs`` name, and those the model facts its expressions
read come from. ``FACTS`` says where each fact of the model comes from
(scanner/model/__init__.py, ``build_model``); what a rule's expressions read comes from
their parse (``scanner.cel.analysis``, as scanner/evaluate/optimize/projection.py reads it for
``workload``), and what the table cannot tell (a variable read whole, a field it does
not know) counts as everything the variable may depend on.
tests/audit/test_reads.py checks the table against the model: a rule that still runs
without a kind must judge the other kinds' objects exactly as before.
"""

from __future__ import annotations

from dataclasses import dataclass

from scanner.cel.analysis import ANY, RuleAnalysis
from scanner.kinds import WORKLOAD_KINDS
from scanner.kinds.resources import RESOURCES
from scanner.model.cluster import KIND as CLUSTER_KIND
from scanner.ruleset.load import Rule

ALL_KINDS: frozenset[str] = frozenset(resource.kind for resource in RESOURCES)

_POOL_KINDS = frozenset({"Node", "NodePool", "ContainerNodePool", "MachineDeployment"})
_SUBJECT_KINDS: dict[str, frozenset[str]] = {
    "node": _POOL_KINDS,
    "pool": _POOL_KINDS,
    "namespace": frozenset({"Namespace"}),
    "sharingConfig": frozenset({"ConfigMap"}),
    "cluster": frozenset(),  # made up by the model (scanner.model.cluster): only joins
}
"""Kinds each derived subject is made from (for ``workload``: ``scanner.kinds``)."""

# Where the model's facts come from (scanner/model/__init__.py, build_model). Each set
# is what a fact's value may depend on; a rule reads the union over the facts it names.
_DRA = frozenset({"ResourceClaim", "ResourceClaimTemplate", "DeviceClass"})
_GPU_WORKLOADS = WORKLOAD_KINDS | _DRA
"""Which workloads exist and use GPUs (DRA claims count), and which are controlled."""
_DEVICE_PLUGIN = frozenset({"ClusterPolicy", "ConfigMap"})
"""The GPU Operator's ClusterPolicy and the device-plugin ConfigMaps it names."""
_NODE_FACTS = _POOL_KINDS | _DEVICE_PLUGIN | {"EC2NodeClass"}
_TENANTS = _NODE_FACTS | _GPU_WORKLOADS | {"Namespace"}
"""Pools with their tenants: which workloads (of which trust domain) they admit."""
_KUEUE = frozenset({"LocalQueue", "ClusterQueue", "ResourceFlavor"})
"""Where Kueue places a queued workload (scanner.model.queues)."""
_PLACED = _TENANTS | _KUEUE
"""Where a workload may go: a queued one whose queue and flavors are not known has no
targets, and is no pool's tenant. (What runs where, ``runningNode``, is not.)"""
_SIGNATURES = frozenset({"ClusterImagePolicy", "ClusterPolicy", "Policy", "Namespace"})
_RBAC = frozenset({"Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding", "Node"})
_RBAC |= _DEVICE_PLUGIN
"""Bindings and roles, and the objects a ``resourceNames`` rule must name to count:
device-stack ConfigMaps (the ClusterPolicy names some), Nodes, the ClusterPolicy."""
_ADMISSION = frozenset({"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"})
_NONE: frozenset[str] = frozenset()


def _each(names: str, kinds: frozenset[str]) -> dict[str, frozenset[str]]:
    return dict.fromkeys(names.split(), kinds)


_NS_FIELDS: dict[str, frozenset[str]] = {
    **_each("name operator system platform", _NONE),
    **_each("known labels trustDomain pssEnforce signatureOptIn", frozenset({"Namespace"})),
    **_each(
        "networkPolicies netpolsKnown defaultDeny defaultDenyIngress defaultDenyEgress",
        frozenset({"NetworkPolicy"}),
    ),
    "gpuWorkloads": _GPU_WORKLOADS,
}
_NS_WHOLE = _GPU_WORKLOADS | {"Namespace", "NetworkPolicy"}

FACTS: dict[str, tuple[frozenset[str], dict[str, frozenset[str]]]] = {
    "workload": (
        ALL_KINDS,
        {
            # From the object and its pod template alone (scanner.model.workloads,
            # scanner.model.podsecurity); a container's ``signature``: _CONTAINER_SIGNATURE.
            **_each(
                "apiVersion kind name namespace namespaceSet template podSpec podSpecPath "
                "pending podLabels podAnnotations containers gpuResources gpuPodCounts "
                "runtimeClassName serviceAccountName selectedLabels tolerations volumes "
                "podSecurity",
                _NONE,
            ),
            "queuedPlacement": _KUEUE,
            **_each("gpu gpuViaDra draClaims", _DRA),
            **_each("controlled controller", WORKLOAD_KINDS),
            "ns": _NS_WHOLE,
            "trustDomain": frozenset({"Namespace"}),
            "poolsKnown": _POOL_KINDS,
            **_each("runningNode runningShared", _TENANTS),
            **_each("targets nonGpuMatches diagnosis", _PLACED),
            "serviceAccount": frozenset({"ServiceAccount", "PodIdentityAssociation"}),
            "runtimeClass": frozenset({"RuntimeClass"}),
            "signaturePoliciesKnown": _SIGNATURES,
        },
    ),
    "ns": (_NS_WHOLE, _NS_FIELDS),
    "node": (
        _NODE_FACTS,
        {
            **_each(
                "kind name source labels taints gpuLabeled gpu pool poolLabel sku product "
                "gpuCount migConfig migConfigState migProfiles devicePluginConfig allocatable "
                "capacity statusKnown taintsPath labelsPath devicePluginConfigPath "
                "implicitTaints gke migLayouts resourceCounts",
                _NONE,
            ),
            **_each(
                "sharing migStrategy renameShared advertises replicas oneShare "
                "devicePluginDisabled",
                _DEVICE_PLUGIN,
            ),
            "identity": frozenset({"EC2NodeClass"}),
        },
    ),
    # A pool gathers Nodes and node-pool declarations, each with its device facts.
    "pool": (_PLACED, {**_each("tenants trustDomains", _PLACED), "*": _NODE_FACTS}),
    "sharingConfig": (frozenset({"ClusterPolicy"}), {}),
    "cluster": (
        _NODE_FACTS | _RBAC,
        {"now": _NONE, "devicePlugin": _NODE_FACTS, "poolsKnown": _POOL_KINDS, "rbac": _RBAC},
    ),
    "admission": (_ADMISSION, {}),
    "gpuWorkloads": (_GPU_WORKLOADS, {}),
}
"""CEL variable -> (kinds its value may depend on, kinds per field). A field not in the
table (``"*"`` aside), or the variable used whole, counts as the whole variable."""

_CONTAINER_SIGNATURE = ("containers", ANY, "signature")
"""Containers carry one joined fact, ``signature`` (scanner.model.signatures): a rule
that may read it (by name, by an index with a value, or a container whole) reads the
signature policies."""


def fact_kinds(reading: RuleAnalysis) -> frozenset[str]:
    """The kinds the model facts a rule reads may depend on.

    Every read of a CEL variable of the model counts: ``workload.serviceAccount`` reads
    ServiceAccounts, ``ns.defaultDeny`` NetworkPolicies, ``workload.ns.labels``
    Namespaces. A variable read whole, indexed with a value, or at a field this table
    does not know counts whole.
    """
    kinds: set[str] = set()
    for variable, (whole, fields) in FACTS.items():
        for read in reading.of(variable):
            path = read.path
            if not path or path[0] is ANY:
                kinds |= whole
            elif variable == "workload" and path[0] == "ns":  # the namespace's facts, nested
                nested = path[1] if len(path) > 1 else ANY
                kinds |= _NS_WHOLE if nested is ANY else _NS_FIELDS.get(nested, _NS_WHOLE)
            else:
                kinds |= fields.get(path[0], fields.get("*", whole))
    if reading.covers("workload", _CONTAINER_SIGNATURE):
        kinds |= _SIGNATURES
    return frozenset(kinds)


@dataclass(frozen=True, slots=True)
class Reads:
    """The kinds one rule reads in an audit: the plan lists them, and ``coverage``
    stops the rule when one of them cannot be read. One relation for both."""

    subjects: frozenset[str]
    """Kinds it reports on (``subject_kinds``)."""
    joins: frozenset[str]
    """Kinds its verdicts depend on besides each subject's own object. A join that
    cannot be read means the rule did not run at all; a subject kind that is not also
    a join means it did not run on those objects only (each subject is judged on its
    own facts, so its verdicts on the other kinds stand)."""

    @property
    def kinds(self) -> frozenset[str]:
        return self.subjects | self.joins


def subject_kinds(rule: Rule) -> frozenset[str]:
    """The kinds a rule reports on: its findings are about objects of these kinds."""
    subject = rule.doc.subject
    if subject == "document":
        return _NONE
    if subject == "object":
        return rule.kinds or ALL_KINDS
    if subject == "workload":
        return (rule.kinds & WORKLOAD_KINDS) if rule.kinds else WORKLOAD_KINDS
    return _SUBJECT_KINDS.get(subject, ALL_KINDS)


def reads(rule: Rule) -> Reads:
    """What ``rule`` reads (see ``Reads``): the kinds it reports on, and as joins the kinds
    its ``needs`` name and those the model facts its expressions read come from
    (``fact_kinds``), so a verdict never rests on a kind the audit could not read."""
    if rule.builtin or rule.doc.subject == "document":
        return Reads(_NONE, _NONE)
    reading = rule.analysis
    subjects = subject_kinds(rule)
    joins = fact_kinds(reading) | rule.needs
    if reading.refs:
        # Its findings may sit on other objects (``ref``): which ones a missing subject
        # would have placed cannot be told, so no subject kind may be missing.
        joins |= subjects
    return Reads(subjects, joins)


def reported_kinds(rule: Rule) -> frozenset[str]:
    """The object kinds of the rule's findings (``Cluster`` for the cluster subject)."""
    if rule.doc.subject == "cluster":
        return frozenset({CLUSTER_KIND})
    return subject_kinds(rule)
