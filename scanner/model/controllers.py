"""Controlled workloads: live objects that run a pod template another live object owns.

A live dump holds each Deployment, its ReplicaSets and every replica pod. A workload
is *controlled* when its controller (the ``ownerReferences`` entry with ``controller:
true``) is a workload of the same audit that made it from the same template; template
rules then report on the top controller only (``workload.controlled``,
``workload.controller``), and rules about running instances opt in with
``match.controlled: include``.

Only what Kubernetes' own controllers do counts, and only where the template the
object runs is the controller's current one:

* only objects read from a cluster (an audit or a snapshot): a manifest in a pull
  request is always checked as itself, so an ``ownerReferences`` entry written into
  it exempts nothing;
* only the edges the built-in controllers and the GPU workload operators poolgate
  models create, with the API group checked: a Pod owned by a ReplicaSet,
  StatefulSet, DaemonSet or Job (``apps``/``batch``), by a Kubeflow PyTorchJob, TFJob,
  MPIJob, PaddleJob, XGBoostJob or JAXJob (``kubeflow.org``), by a Volcano Job
  (``batch.volcano.sh``) or by a RayCluster (``ray.io``); a ReplicaSet owned by
  a Deployment; a Job owned by a CronJob, a JobSet (``jobset.x-k8s.io``), an MPIJob
  (its launcher) or a RayJob (its submitter); a RayCluster owned by a RayJob. The
  owner must be in the same namespace, have the uid the reference names, be reported
  on (not ``--context-path``) and have produced a workload (a valid pod template);
* the object must run the owner's current template: a ReplicaSet climbs to its
  Deployment, and a Job to its CronJob, only while their templates agree (an old
  ReplicaSet of a rollout that moved on, or a Job made before the CronJob changed, is
  checked as itself); a Pod of a ReplicaSet must carry its ``pod-template-hash``, a
  Pod of a StatefulSet its ``status.updateRevision`` as ``controller-revision-hash``;
  Pods of a DaemonSet with the ``OnDelete`` update strategy may run any old template
  and are checked as themselves. A Job's template cannot change, and the operators
  (training operator, KubeRay, JobSet) make their pods, Jobs and clusters from the
  owner's template without rolling them when it is edited: what they made is taken
  to run the current one. An InferenceService's Deployment is checked as itself:
  KServe adds containers to it that its own spec does not hold.

What this cannot tell apart: a pod someone with ``create`` on pods wrote with a
controller reference copied from a real one (uid and labels included). Admission is
the defence there (PG605's floor, Pod Security); instance rules still see the pod.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any, Final, cast

from scanner.inventory import LIVE, KubeObject, as_mapping, is_mapping
from scanner.model.index import ObjectIndex

CONTROLLER_EDGES: Final[Mapping[str, frozenset[tuple[str, str]]]] = {
    "Pod": frozenset(
        {
            ("apps", "ReplicaSet"),
            ("apps", "StatefulSet"),
            ("apps", "DaemonSet"),
            ("batch", "Job"),
            ("kubeflow.org", "PyTorchJob"),
            ("kubeflow.org", "TFJob"),
            ("kubeflow.org", "MPIJob"),
            ("kubeflow.org", "PaddleJob"),
            ("kubeflow.org", "XGBoostJob"),
            ("kubeflow.org", "JAXJob"),
            ("batch.volcano.sh", "Job"),
            ("ray.io", "RayCluster"),
        }
    ),
    "ReplicaSet": frozenset({("apps", "Deployment")}),
    "Job": frozenset(
        {
            ("batch", "CronJob"),
            ("jobset.x-k8s.io", "JobSet"),
            ("kubeflow.org", "MPIJob"),
            ("ray.io", "RayJob"),
        }
    ),
    "RayCluster": frozenset({("ray.io", "RayJob")}),
}
"""Controlled kind -> the (API group, kind) of the controllers that create it. Chains
are at most two long (Pod -> ReplicaSet -> Deployment, Pod -> Job -> JobSet, Pod ->
RayCluster -> RayJob): no owner of a second edge is itself controlled."""

JOB_CONTROLLER_LABELS: Final = frozenset(
    {
        "controller-uid",
        "job-name",
        "batch.kubernetes.io/controller-uid",
        "batch.kubernetes.io/job-name",
    }
)
"""Labels the Job controller adds to a Job's pod template: not part of the CronJob's."""

TEMPLATE_HASH: Final = "pod-template-hash"
REVISION_HASH: Final = "controller-revision-hash"


def top_controllers(objects: Sequence[KubeObject], index: ObjectIndex) -> dict[int, KubeObject]:
    """id(object) -> its top controller, for every one of ``objects`` (the objects that
    produced a workload) that is controlled."""
    resolver = _Resolver(index, {id(obj) for obj in objects})
    tops: dict[int, KubeObject] = {}
    for obj in objects:
        top = resolver.top(obj)
        if top is not None:
            tops[id(obj)] = top
    return tops


class _Resolver:
    """Controllers under the rules in the module docstring.

    ``producing``: ids of the objects that produced a workload. Each controller
    reference (the referring kind, namespace, and the reference's fields as written)
    is checked and resolved once, with what an object must carry to run the owner's
    current template (``_current_template``), and each owner's own controller is
    looked up once, not once per replica.
    """

    def __init__(self, index: ObjectIndex, producing: set[int]) -> None:
        self.index = index
        self.producing = producing
        self.owned_by: dict[tuple[object, ...], tuple[KubeObject, str, object] | None] = {}
        """Controller reference -> (owner, its kind, its current template), or None."""
        self.above: dict[int, KubeObject | None] = {}
        """id(owner) -> the owner's own controller, or None."""

    def top(self, obj: KubeObject) -> KubeObject | None:
        """The topmost controller of ``obj``, or None. Chains are at most two long
        (``CONTROLLER_EDGES``)."""
        owner = self.controller_of(obj)
        if owner is None:
            return None
        key = id(owner)
        above = self.above.get(key, _UNSEEN)
        if above is _UNSEEN:
            above = self.above[key] = self.controller_of(owner)
        return owner if above is None else cast("KubeObject", above)

    def controller_of(self, obj: KubeObject) -> KubeObject | None:
        """The controller whose current template ``obj`` runs, or None."""
        ref = obj.ref
        if ref.kind not in CONTROLLER_EDGES or obj.origin.source_type != LIVE:
            return None
        metadata = obj.metadata  # read once: this runs on every replica pod
        reference = _controller_entry(metadata)
        if reference is None:
            return None
        # The replicas of one owner share the lookup, keyed by the fields as written.
        get = reference.get
        key = (ref.kind, ref.namespace, get("apiVersion"), get("kind"), get("name"), get("uid"))
        try:
            found = self.owned_by.get(key, _UNSEEN)
        except TypeError:  # a list or map where a string belongs: no reference
            return None
        if found is _UNSEEN:
            found = self.owned_by[key] = self._owner(ref.kind, ref.namespace, reference)
        if found is None:
            return None
        owner, owner_kind, current = cast("tuple[KubeObject, str, object]", found)
        return owner if _runs(obj, metadata, owner_kind, current) else None

    def _owner(
        self, kind: str, namespace: str, reference: Mapping[str, Any]
    ) -> tuple[KubeObject, str, object] | None:
        """The object the controller ``reference`` of an object of ``kind`` names, if it
        may control that object (module docstring), with the owner's kind and current
        template. The answer is the same for every object of that kind naming it."""
        fields = _reference_fields(reference)
        if fields is None or fields[:2] not in CONTROLLER_EDGES[kind]:  # (group, kind)
            return None
        group, owner_kind, name, uid = fields
        owner = self.index.get(owner_kind, namespace, name)
        if (
            owner is None
            or id(owner) not in self.producing
            or owner.context_only
            or owner.origin.source_type != LIVE
            or _group(owner.api_version) != group
            or owner.metadata.get("uid") != uid
        ):
            return None
        return owner, owner.kind, _current_template(owner)


_UNSEEN: Final = object()


def _controller_entry(metadata: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The first ``ownerReferences`` entry with ``controller: true``."""
    references = metadata.get("ownerReferences")
    if not isinstance(references, list):
        return None
    for reference in references:
        if is_mapping(reference) and reference.get("controller") is True:
            return reference
    return None


def _reference_fields(reference: Mapping[str, Any]) -> tuple[str, str, str, str] | None:
    """(API group, kind, name, uid) of a controller reference; None unless all four are
    non-empty strings."""
    api_version, kind = reference.get("apiVersion"), reference.get("kind")
    name, uid = reference.get("name"), reference.get("uid")
    if (
        isinstance(api_version, str)
        and isinstance(kind, str)
        and isinstance(name, str)
        and isinstance(uid, str)
        and api_version
        and kind
        and name
        and uid
    ):
        return _group(api_version), kind, name, uid
    return None


def _group(api_version: str) -> str:
    return api_version.rpartition("/")[0]


def _current_template(owner: KubeObject) -> object:
    """What an object must carry to run ``owner``'s current template (see ``_runs``)."""
    if owner.kind == "Deployment":
        return _template(owner)
    if owner.kind == "CronJob":
        job = as_mapping(as_mapping(owner.body.get("spec")).get("jobTemplate"))
        return _template_of(as_mapping(job.get("spec")))
    if owner.kind == "ReplicaSet":
        wanted = _labels(
            as_mapping(as_mapping(owner.body.get("spec")).get("template")).get("metadata")
        )
        return wanted.get(TEMPLATE_HASH, _ANY)
    if owner.kind == "StatefulSet":
        revision = as_mapping(owner.body.get("status")).get("updateRevision")
        return revision if isinstance(revision, str) else _NONE
    if owner.kind == "DaemonSet":
        strategy = as_mapping(as_mapping(owner.body.get("spec")).get("updateStrategy")).get("type")
        return _NONE if strategy == "OnDelete" else _ANY
    return _ANY  # a Job's template cannot change


_ANY: Final = object()
"""Any template an object runs is the owner's current one."""
_NONE: Final = object()
"""No template an object runs can be told to be the owner's current one."""


def _runs(obj: KubeObject, metadata: Mapping[str, Any], owner_kind: str, current: object) -> bool:
    """Whether ``obj`` (with ``metadata``) runs the template ``_current_template`` found
    for its owner."""
    if current is _ANY:
        return True
    if current is _NONE:
        return False
    if owner_kind == "Deployment":  # obj is a ReplicaSet
        return bool(_template(obj, without={TEMPLATE_HASH}) == current)
    if owner_kind == "CronJob":  # obj is a Job
        return bool(_template(obj, without=JOB_CONTROLLER_LABELS) == current)
    labels = as_mapping(metadata.get("labels"))
    key = TEMPLATE_HASH if owner_kind == "ReplicaSet" else REVISION_HASH
    return bool(labels.get(key) == current)


def _template(obj: KubeObject, without: Collection[str] = ()) -> Any:
    """``spec.template`` with its labels normalized, less the labels ``without``."""
    return _template_of(as_mapping(obj.body.get("spec")), without)


def _template_of(spec: Mapping[str, Any], without: Collection[str] = ()) -> Any:
    template = dict(as_mapping(spec.get("template")))
    metadata = dict(as_mapping(template.get("metadata")))
    metadata["labels"] = {k: v for k, v in _labels(metadata).items() if k not in without}
    template["metadata"] = metadata
    return template


def _labels(metadata: object) -> dict[str, Any]:
    labels = as_mapping(metadata).get("labels")
    return dict(labels) if isinstance(labels, Mapping) else {}
