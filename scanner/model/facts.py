"""Every fact the model gives rules, declared once: the CEL variables and their facts.

A variable's facts are a ``TypedDict`` (``WorkloadFacts`` is the CEL ``workload``), which
types the model's code. Each field is ``Annotated`` with a ``Fact``: a one-line doc, the
kinds its value may depend on besides the subject's own object (``serviceAccount`` is
read from ServiceAccounts) and, for ``workload``, whether it is known per *instance*
(at once, on every replica pod) or per *template* (``scanner.model.workloads`` defers
it). Values stay plain dicts and lists, which cost nothing to type and which both CEL
engines read as they are (every variable is declared ``dyn``).

Derived from here: the CEL declarations (``scanner.cel.cpp``), the audit's read
table and the RBAC ``deploy/rbac.yaml`` grants (``scanner.audit.reads``),
``INSTANCE_FACTS``, and docs/facts.md (``scanner.ruleset.catalog.render_facts``).
Tests keep the model's facts and these declarations equal. A node-pool provider is one
file in ``scanner.model.providers`` plus its kinds here (``PROVIDERS``) and its API
resource in ``scanner.kinds.resources``.
"""

# No ``from __future__ import annotations``: the annotations here are data, read at run
# time (``table``); postponed, each would be compiled from its text on every start.
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Annotated, Any, Final, NamedTuple, TypedDict

from scanner.kinds import WORKLOAD_KINDS
from scanner.kinds.resources import RESOURCES
from scanner.model.factkinds import (
    ADMISSION,
    BUCKETS,
    DEVICE_PLUGIN,
    DRA,
    GPU_WORKLOADS,
    IDENTITY,
    KUEUE,
    NETPOL,
    NODE,
    NS,
    OPERATOR,
    OTHER_NETPOL,
    PLACED,
    POOL_KINDS,
    RBAC,
    SIGNATURES,
    TENANTS,
)
from scanner.model.records import (
    Container,
    GpuResource,
    GpuWorkloadNames,
    RunningNode,
    Taint,
    Tenant,
)

Kinds = frozenset[str]
_NONE: Kinds = frozenset()

ALL_KINDS: Final[Kinds] = frozenset(resource.kind for resource in RESOURCES)
"""Every kind an audit may list (``scanner.kinds.resources``)."""


class Fact(NamedTuple):
    """What one field of a fact table says beyond its name and type. (A tuple, the
    cheapest record to build: every start builds one per fact.)"""

    doc: str
    kinds: Kinds = _NONE
    """The kinds its value may depend on besides the subject's own object."""
    instance: bool = False
    """``workload`` only: known per instance, before ``Workload.complete()``."""
    parts: tuple[tuple[tuple[str, ...], Kinds], ...] = ()
    """Joined facts inside the value: (path below it, ``"*"`` for any element; kinds).
    The ``signature`` of each of a workload's containers."""


def fact(doc: str, kinds: Kinds = _NONE, **parts: Kinds) -> Fact:
    return Fact(doc, kinds, parts=tuple((("*", name), part) for name, part in parts.items()))


def instance(doc: str, kinds: Kinds = _NONE) -> Fact:
    """A ``workload`` fact known per instance."""
    return Fact(doc, kinds, instance=True)


# --- the fact tables ----------------------------------------------------------------------


class NamespaceFacts(TypedDict):
    """A namespace (``scanner.model.namespaces``)."""

    name: Annotated[str, fact("the namespace's name")]
    known: Annotated[bool, fact("a Namespace object of that name is in scope", NS)]
    labels: Annotated[dict[str, str], fact("its labels", NS)]
    trustDomain: Annotated[
        str,
        fact(
            "the value of the label config `trustDomainLabel` names, else the namespace's "
            "own name; `platform` for operator namespaces",
            NS,
        ),
    ]
    operator: Annotated[bool, fact("one of config `operatorNamespaces`")]
    system: Annotated[bool, fact("one of config `systemNamespaces`")]
    platform: Annotated[bool, fact("`operator` or `system`")]
    pssEnforce: Annotated[str, fact('its `pod-security.kubernetes.io/enforce` label, or `""`', NS)]
    networkPolicies: Annotated[
        list[str], fact("names of the NetworkPolicies in scope in it", NETPOL)
    ]
    netpolsKnown: Annotated[bool, fact("it has at least one NetworkPolicy", NETPOL)]
    otherNetworkPolicies: Annotated[
        list[str],
        fact(
            "`Kind/name` of the policies of other engines that apply to it (Calico, "
            "Cilium, the AdminNetworkPolicy API), which poolgate does not judge",
            OTHER_NETPOL,
        ),
    ]
    defaultDenyIngress: Annotated[
        bool,
        fact("a policy selecting every pod denies ingress, and none allows all", NETPOL),
    ]
    defaultDenyEgress: Annotated[bool, fact("the same for egress", NETPOL)]
    defaultDeny: Annotated[bool, fact("both", NETPOL)]
    signatureOptIn: Annotated[bool, fact('its label `policy.sigstore.dev/include` is `"true"`', NS)]
    gpuWorkloads: Annotated[
        GpuWorkloadNames,
        fact(
            "`count` of the GPU workloads in it (a controlled one counts as its "
            "controller) and the first ten `names` (`Kind/name`, sorted)",
            GPU_WORKLOADS,
        ),
    ]


class WorkloadFacts(TypedDict, total=False):  # a deferred workload has only instance facts
    """One pod template of an object that carries pod templates
    (``scanner.model.workloads``): a controlled workload's template facts come when a
    rule needs them, its instance facts at once."""

    apiVersion: Annotated[str, instance("the object's `apiVersion`")]
    kind: Annotated[str, instance("the object's kind")]
    name: Annotated[str, instance("the object's name")]
    namespace: Annotated[str, instance("its namespace; `default` when the manifest sets none")]
    namespaceSet: Annotated[bool, instance("the manifest sets a namespace")]
    template: Annotated[
        str,
        instance(
            'which pod template of the object: `""` for core kinds, `Worker`, '
            "`headGroupSpec`, `workerGroupSpecs[1]`, `predictor`, ..."
        ),
    ]
    podSpec: Annotated[Mapping[str, Any], instance("the pod spec as written")]
    podSpecPath: Annotated[str, instance("where it is: `spec.template.spec`, ...")]
    gpu: Annotated[
        bool,
        instance(
            "a container requests or limits a GPU resource (a count of zero asks for "
            "none), a DRA claim asks for a GPU DeviceClass, or a KAI annotation a share",
            DRA,
        ),
    ]
    gpuSharing: Annotated[
        dict[str, str],
        instance("how it shares its GPUs: `mode`, `by`, `path` (scanner.model.sharing)", DRA),
    ]
    gpuViaDra: Annotated[bool, instance("a DRA claim asks for a GPU DeviceClass", DRA)]
    draClaims: Annotated[
        list[dict[str, Any]],
        instance(
            "the pod's `resourceClaims`, each with `name`, `claimName`, `template`, "
            "`found`, `deviceClasses`, `gpu`, `sharing` (`GpuConfig`), `path`, `ref`",
            DRA,
        ),
    ]
    pending: Annotated[bool, instance("a Pod in phase `Pending`")]
    controlled: Annotated[
        bool,
        instance(
            "a live object running the current template of a controller in the same run",
            WORKLOAD_KINDS,
        ),
    ]
    controller: Annotated[
        str,
        instance('`Kind/name` of the top controller in the run, `""` when none', WORKLOAD_KINDS),
    ]
    ns: Annotated[NamespaceFacts, instance("the facts of its namespace, as `ns` has them (below)")]
    trustDomain: Annotated[str, instance("its namespace's trust domain", NS)]
    poolsKnown: Annotated[
        bool,
        instance(
            "GPU pools are in scope, and its node selection is followed to them (it may "
            "reach at most 100 pools)",
            POOL_KINDS,
        ),
    ]
    runningNode: Annotated[
        RunningNode | dict[str, Any],
        instance(
            "live GPU pods: the node it runs on, with `name`, `sharing`, `shared` and "
            "the `trustDomains` of the GPU pods there; `{}` otherwise",
            TENANTS,
        ),
    ]
    runningShared: Annotated[bool, instance("`runningNode` is time-sliced or MPS", TENANTS)]
    podLabels: Annotated[dict[str, str], fact("labels of the pod template")]
    podAnnotations: Annotated[dict[str, str], fact("annotations of the pod template")]
    containers: Annotated[
        list[Container],
        fact(
            "every container, init and ephemeral container as written, with its `path`, `type`, "
            "`digestPinned`, `imageReference`, effective `security` and image `signature` "
            "(`covered`, `known`, `policies`, `reason`)",
            signature=SIGNATURES,
        ),
    ]
    gpuResources: Annotated[
        list[GpuResource],
        fact(
            "one entry per GPU resource per container: `name`, `container`, "
            "`limit`/`request` as written, `limitCount`/`requestCount`, their paths"
        ),
    ]
    gpuPodCounts: Annotated[
        dict[str, dict[str, int]],
        fact(
            "GPU resource -> `pod`: what the pod needs from one node, as the scheduler "
            "adds up containers, sidecars and init containers; `container`: the most one "
            "container asks for"
        ),
    ]
    runtimeClassName: Annotated[str, fact('the pod\'s `runtimeClassName`, `""` when unset')]
    serviceAccountName: Annotated[str, fact('the pod\'s service account, `""` when unset')]
    selectedLabels: Annotated[
        dict[str, list[str]],
        fact(
            "node label key -> the values every placement allows: `nodeSelector`, and "
            "keys every required node-affinity term pins with `In`, narrowed where both "
            "apply (`[]` when none is left)"
        ),
    ]
    tolerations: Annotated[list[Mapping[str, Any]], fact("the pod's tolerations as written")]
    queuedPlacement: Annotated[
        str, fact('why Kueue decides where it runs, `""` when its placement is as written', KUEUE)
    ]
    targets: Annotated[
        list[dict[str, Any]],
        fact(
            "the GPU pools its selection reaches: `pool`, `ref`, `decided`, `tolerated`, "
            "`untolerated` taints, `sharing`, `shared`, `trustDomains`, `fractional`, "
            "`migStrategies`, `advertises`, `missingResources`, `maxGpusPerNode`, `perNode`, "
            "`perPod` (resource -> most per container, per pod; absent: unknown)",
            PLACED,
        ),
    ]
    nonGpuMatches: Annotated[
        list[str],
        fact(
            "when it reaches no GPU pool: the nodes not known to have GPUs it matches "
            "(`pool <name>`, `Kind/name`), at most five",
            PLACED,
        ),
    ]
    diagnosis: Annotated[
        str, fact('why it cannot run on any visible pool, in one line; `""` when it can', PLACED)
    ]
    serviceAccount: Annotated[
        dict[str, Any],
        fact(
            "its ServiceAccount: `name`, `known`, `identity` (the workload-identity "
            "binding), `provider`, `hint`",
            frozenset({"ServiceAccount", "PodIdentityAssociation"}),
        ),
    ]
    runtimeClass: Annotated[
        dict[str, Any],
        fact(
            "`name`, `known` (RuntimeClasses are in scope), `exists`, `handler`",
            frozenset({"RuntimeClass"}),
        ),
    ]
    volumes: Annotated[
        list[dict[str, Any]],
        fact("each pod volume: `name`, `type`, `path`, `typePath`, `hostPath`"),
    ]
    visibleDevices: Annotated[
        list[dict[str, Any]],
        fact(
            "containers whose `NVIDIA_VISIBLE_DEVICES` (`env`/`envFrom`, values seen) asks for "
            "GPUs: `container`, `type`, `value`, `path`, `ignored` (by the toolkit, ClusterPolicy)",
            DEVICE_PLUGIN,
        ),
    ]
    weightBuckets: Annotated[
        list[dict[str, Any]],
        fact(
            "buckets its pod volumes mount through a CSI driver: `bucket`, `provider`, `via`, "
            "`volume`, `path`, `declared`; declared in scope: `declaration`, `declarationKind`, "
            "`public` (reasons: `ref`, `path`, `message`), `cmek`, `cmekReason`",
            BUCKETS,
        ),
    ]
    podSecurity: Annotated[
        dict[str, Any],
        fact(
            "what the Pod Security Standards judge where it is written "
            "(`scanner.model.podsecurity`)"
        ),
    ]
    signaturePoliciesKnown: Annotated[
        bool, fact("a ClusterImagePolicy or a Kyverno `verifyImages` rule is in scope", SIGNATURES)
    ]


class NodeFacts(TypedDict, total=False):  # some are a Node's only, or a declaration's
    """A Node or a node-pool declaration (``scanner.model.nodes``,
    ``scanner.model.providers``)."""

    kind: Annotated[str, fact("`Node`, or the kind of a node-pool declaration")]
    name: Annotated[str, fact("the object's name")]
    source: Annotated[str, fact("`node` or `declaration`")]
    labels: Annotated[
        dict[str, list[str]],
        fact("label key -> the values its nodes may carry (a declaration's own included)"),
    ]
    labelsPath: Annotated[str, fact("where the labels are written")]
    taints: Annotated[list[Taint], fact("`key`, `value`, `effect` of each taint")]
    taintsPath: Annotated[str, fact("where the taints are written")]
    implicitTaints: Annotated[
        list[Taint], fact("declarations: taints the provider adds itself (GKE)")
    ]
    gpuLabeled: Annotated[bool, fact("GPU Feature Discovery or cloud labels say GPU")]
    gpu: Annotated[bool, fact("a GPU node (status, labels) or a GPU declaration")]
    pool: Annotated[str, fact("its pool: the first pool label's value, a declaration's name")]
    poolLabel: Annotated[str, fact('which of config `poolLabels` it carries, `""` when none')]
    sku: Annotated[str, fact("the value of config `skuLabel`")]
    product: Annotated[str, fact("`nvidia.com/gpu.product`")]
    gpuCount: Annotated[int, fact("whole GPUs per node (labels, status, declaration)")]
    allocatable: Annotated[dict[str, int], fact("Nodes: GPU resources allocatable")]
    capacity: Annotated[dict[str, int], fact("Nodes: GPU resources in capacity")]
    statusKnown: Annotated[bool, fact("Nodes: the status shows GPU resources at all")]
    resourceCounts: Annotated[dict[str, int], fact("GPU resources the status shows, by name")]
    sharing: Annotated[
        str,
        fact(
            "`exclusive`, `mig`, `time-slicing`, `mps`, `mig+time-slicing`, `mig+mps`; "
            "`unknown` (`mig+unknown`) when it selects a device-plugin config not in scope",
            DEVICE_PLUGIN,
        ),
    ]
    migStrategy: Annotated[str, fact("`none`, `single` or `mixed`", DEVICE_PLUGIN)]
    migConfig: Annotated[str, fact("`nvidia.com/mig.config`")]
    migConfigState: Annotated[str, fact("`nvidia.com/mig.config.state`")]
    migProfiles: Annotated[list[str], fact("MIG profiles its config names")]
    migLayouts: Annotated[list[str], fact("MIG layouts, which tell MIG configs apart")]
    devicePluginConfig: Annotated[str, fact("its `nvidia.com/device-plugin.config` label")]
    devicePluginConfigPath: Annotated[str, fact("where that label is written")]
    devicePluginDisabled: Annotated[
        bool, fact("Nodes: no device plugin is meant to run there", DEVICE_PLUGIN)
    ]
    replicas: Annotated[
        int, fact("time-sliced or MPS replicas per GPU (0: unknown)", DEVICE_PLUGIN)
    ]
    oneShare: Annotated[bool, fact("one container may take one replica only", DEVICE_PLUGIN)]
    renameShared: Annotated[
        bool, fact("shared resources are renamed `<name>.shared`", DEVICE_PLUGIN)
    ]
    advertises: Annotated[list[str], fact("the GPU resource names it advertises", DEVICE_PLUGIN)]
    gke: Annotated[bool, fact("a GKE node or node pool")]
    identity: Annotated[
        dict[str, Any],
        fact(
            "declarations: the node identity, `provider`, `known`, `metadataMode`, "
            "`hopLimit`, `httpTokens`, `endpoint`, `broadScopes`, their paths, `ref`",
            IDENTITY,
        ),
    ]


class PoolFacts(TypedDict):
    """GPU nodes and declarations grouped by pool (``scanner.model.pools``)."""

    name: Annotated[str, fact('the pool\'s name; `""` for GPU nodes without a pool label', NODE)]
    unpooled: Annotated[bool, fact("the group of GPU nodes without a pool label", NODE)]
    members: Annotated[
        list[dict[str, Any]],
        fact(
            "each node or declaration: `kind`, `name`, `ref`, `sharing`, `migStrategy`, "
            "`migProfiles`, `devicePluginConfig`",
            NODE,
        ),
    ]
    sharingModes: Annotated[list[str], fact("the members' sharing modes", NODE)]
    sharing: Annotated[str, fact("the one sharing mode, or `mixed`", NODE)]
    shared: Annotated[bool, fact("a member is time-sliced or MPS", NODE)]
    migStrategies: Annotated[list[str], fact("the MIG members' strategies", NODE)]
    migProfiles: Annotated[list[str], fact("the MIG members' profiles", NODE)]
    migLayouts: Annotated[list[str], fact("the MIG members' layouts", NODE)]
    advertises: Annotated[list[str], fact("GPU resource names the members advertise", NODE)]
    maxGpusPerNode: Annotated[int, fact("the largest member's GPUs", NODE)]
    skus: Annotated[list[str], fact("the members' SKU label values", NODE)]
    tenants: Annotated[
        list[Tenant],
        fact(
            "namespaces whose workloads it admits: `namespace`, `trustDomain`, `workloads`",
            PLACED,
        ),
    ]
    trustDomains: Annotated[list[str], fact("the known trust domains of its tenants", PLACED)]
    fractionalTrustDomains: Annotated[
        list[str], fact("the known trust domains of its fractional tenants (KAI, HAMi)", PLACED)
    ]


_CLUSTER_POLICY = frozenset({"ClusterPolicy"})


class SharingConfigFacts(TypedDict):
    """A device-plugin ConfigMap (``scanner.model.deviceplugin``; ClusterPolicy names it),
    or an EC2NodeClass whose Bottlerocket settings share GPUs (``providers.bottlerocket``)."""

    name: Annotated[str, fact("the ConfigMap's name", _CLUSTER_POLICY)]
    namespace: Annotated[str, fact("its namespace", _CLUSTER_POLICY)]
    referenced: Annotated[bool, fact("ClusterPolicy names it", _CLUSTER_POLICY)]
    defaultKey: Annotated[str, fact("the key ClusterPolicy makes the default", _CLUSTER_POLICY)]
    keys: Annotated[list[str], fact("its data keys", _CLUSTER_POLICY)]
    entries: Annotated[
        list[dict[str, Any]],
        fact(
            "each data value as a config: `key`, `valid`, `error`, `mode`, `migStrategy`, "
            "`resources`, their lines, `renameSetting`, `renamePath`, `failPath`",
            _CLUSTER_POLICY,
        ),
    ]
    resources: Annotated[
        list[dict[str, Any]],
        fact(
            "every sharing resource of every valid entry, with its entry's `key`", _CLUSTER_POLICY
        ),
    ]


class AdmissionFacts(TypedDict):
    """The cluster's ValidatingAdmissionPolicies (``scanner.model.admission``)."""

    known: Annotated[
        bool,
        fact("an audit listed the policies and bindings; in a scan, one is in scope", ADMISSION),
    ]
    policies: Annotated[
        list[dict[str, Any]],
        fact(
            "each policy: `name`, `pods`, `controllers`, `runtimeClass`, `sku`, "
            "`failurePolicy`, `bindings`, `actions`, `deny`",
            ADMISSION,
        ),
    ]


class GpuWorkloadsFacts(TypedDict):
    """The GPU workloads of the run (``scanner.model.cluster``)."""

    count: Annotated[
        int, fact("objects with a GPU pod template that are not controlled", GPU_WORKLOADS)
    ]
    names: Annotated[list[str], fact("the first ten, `namespace/Kind/name`, sorted", GPU_WORKLOADS)]


class ClusterFacts(TypedDict, total=False):  # the model's, then the run's ``now``
    """Cluster-wide facts every subject sees."""

    now: Annotated[str, fact("when the run started, RFC 3339")]
    devicePlugin: Annotated[
        dict[str, Any],
        fact(
            "what ClusterPolicy names: `policyKnown`, `configName`, `configFound`, "
            "`defaultKey`, `keys`, `migStrategy`, `dangling` references",
            NODE,
        ),
    ]
    poolsKnown: Annotated[bool, fact("GPU pools are in scope", POOL_KINDS)]
    gpuOperator: Annotated[
        dict[str, Any],
        fact(
            "ClusterPolicy ref -> `version`, `cdi`, `runtime`, `operatorEnv`, `*Source`", OPERATOR
        ),
    ]
    rbac: Annotated[
        dict[str, Any],
        fact("`bindings` that give someone power over the GPU Operator (PG306)", RBAC),
    ]


# --- the variables --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Variable:
    """A CEL variable rules may read (every one declared ``dyn``)."""

    name: str
    doc: str
    facts: type | None = None
    """Its fact table, or None for values that are not the model's."""
    subject: str = ""
    """The rule subject it belongs to; ``""``: every subject sees it."""
    whole: Kinds | None = None
    """What a read of it whole (or of a field not declared) depends on; default: what
    its facts together depend on."""


VARIABLES: Final = (
    Variable("object", "the raw Kubernetes object"),
    Variable("workload", "for workload rules", WorkloadFacts, "workload", whole=ALL_KINDS),
    # A node read whole counts its own kinds as joins: it may be a Node or a declaration.
    Variable("node", "for node rules", NodeFacts, "node", whole=NODE),
    Variable("pool", "for pool rules", PoolFacts, "pool"),
    Variable("sharingConfig", "for sharingConfig rules", SharingConfigFacts, "sharingConfig"),
    Variable(
        "ns",
        "for namespace rules (`namespace` is a reserved word in CEL); workload rules read "
        "the same facts as `workload.ns`",
        NamespaceFacts,
        "namespace",
    ),
    Variable("admission", "for cluster rules", AdmissionFacts, "cluster"),
    Variable("gpuWorkloads", "for cluster rules", GpuWorkloadsFacts, "cluster"),
    Variable("cluster", "cluster-wide facts, for every rule", ClusterFacts),
    Variable("config", "the configuration's values (`require.*`, `operatorNamespaces`, ...)"),
    Variable("params", "the rule's `params`, merged with config overrides"),
    Variable("variables", "the rule's `variables`"),
    Variable("namespaces", "reserved"),
    Variable("pools", "reserved"),
    Variable("subjectRef", "the subject object's identity, `namespace/Kind/name` or `Kind/name`"),
)
"""Every variable a rule may read, in the order the engines declare them."""

NAMES: Final = tuple(variable.name for variable in VARIABLES)

SUBJECT_KINDS: Final[Mapping[str, Kinds]] = {
    "node": POOL_KINDS,
    "pool": POOL_KINDS,
    "namespace": NS,
    "sharingConfig": frozenset({"ConfigMap", "EC2NodeClass"}),
    "cluster": _NONE,  # made up by the model (scanner.model.cluster): only joins
}
"""Kinds each derived subject is made from (for ``workload``: ``scanner.kinds``)."""


# --- reading the declarations ----------------------------------------------------------


class Declared(NamedTuple):
    """One fact as declared: its table's variable, name, Python type and ``Fact``."""

    variable: str
    name: str
    type: Any
    fact: Fact


@cache
def table(facts: type) -> Mapping[str, Declared]:
    """The declared facts of one fact table, by name."""
    variable = next(v.name for v in VARIABLES if v.facts is facts)
    found: dict[str, Declared] = {}
    for name, hint in facts.__annotations__.items():
        python_type, *extras = typing.get_args(hint)
        [meta] = [extra for extra in extras if isinstance(extra, Fact)]
        found[name] = Declared(variable, name, python_type, meta)
    return found


def variable(name: str) -> Variable:
    """The CEL variable called ``name``."""
    return next(v for v in VARIABLES if v.name == name)


def declared(name: str) -> Mapping[str, Declared]:
    """The facts of CEL variable ``name`` (none for a variable that is not a table)."""
    facts = variable(name).facts
    return table(facts) if facts is not None else {}
