"""Image-signature coverage: which policy in scope verifies which image in which namespace.

Two admission controllers are understood (docs/platform-model.md, "Signature coverage"):

* **Sigstore policy-controller** ``ClusterImagePolicy`` (``policy.sigstore.dev``):
  ``spec.images[].glob`` matched as ``scanner.model.imagerefs`` describes. The
  controller only checks namespaces labeled ``policy.sigstore.dev/include: "true"``
  (its documented default: "The policy-controller admission controller will only
  validate resources in namespaces that have chosen to opt-in"). ``spec.mode:
  warn`` only warns, so it does not cover. ``spec.match`` narrows a policy to
  resource types and label selectors, compared as policy-controller compares them
  (``GetMatchingPolicies``): an entry names the admitted resource when its
  ``resource`` and ``group`` are that resource's and its ``version`` is ``v1`` or
  ``*`` (an entry without a version matches nothing there). ``pods`` covers every
  controller's pods, with the template's labels; the workload's own resource
  (``deployments``, ``statefulsets``, ``jobs``, ``cronjobs``) with its own labels.
  A ``daemonsets`` or ``replicasets`` entry is not counted: the policy-controller
  source read lists DaemonSet under the core group and spells ReplicaSet
  ``ReplicatSet``, so those entries match nothing there either.
* **Kyverno** ``ClusterPolicy`` / ``Policy`` (``kyverno.io``) rules with
  ``verifyImages``: ``imageReferences`` (or the older ``image``) minus
  ``skipImageReferences``, when the rule's ``match`` covers the workload and its
  ``exclude`` does not, ``required`` is not false, and the failure action in that
  namespace is ``Enforce`` (``verifyImages[].failureAction``, else the first
  ``spec.validationFailureActionOverrides`` entry naming the namespace, else
  ``spec.validationFailureAction``; Kyverno's default is ``Audit``, which only
  reports). A ``Policy`` covers only its own namespace. Resource filters check
  ``kinds`` (``Pod``, which Kyverno auto-generates for pod controllers, or the
  workload's own kind), ``names``/``name``, ``namespaces`` (wildcards),
  ``namespaceSelector``, ``selector``, ``annotations`` and ``operations``
  (``CREATE``). A filter that names requesters (``subjects``, ``roles``,
  ``clusterRoles``) holds only for those users, so it neither makes a rule cover
  everyone nor excludes a workload for everyone.

Some answers depend on a namespace's labels; when that Namespace is not in
scope the answer is *undecided*, never guessed. See ``signature_facts`` for how
that becomes the ``known`` fact PG502 relies on.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from scanner.inventory import as_mapping
from scanner.kinds import api_group
from scanner.model.imagerefs import (
    kyverno_name,
    kyverno_wildcard_matches,
    sigstore_glob_matches,
    sigstore_name,
)
from scanner.model.index import ObjectIndex
from scanner.model.namespaces import SIGSTORE_OPT_IN_LABEL, namespace_of
from scanner.model.selectors import label_selector_matches

Tri = bool | None
"""True, False, or None when it depends on something not in scope."""

SIGSTORE_GROUP = "policy.sigstore.dev"
KYVERNO_GROUP = "kyverno.io"
_USER_INFO = ("subjects", "roles", "clusterRoles")
_OBJECT_FIELDS = ("names", "name", "selector", "annotations")


@dataclass(frozen=True, slots=True)
class ImagePolicy:
    """A policy-controller ClusterImagePolicy."""

    label: str
    globs: tuple[str, ...]
    enforce: bool
    match: tuple[Mapping[str, Any], ...]


@dataclass(frozen=True, slots=True)
class Verification:
    """One ``verifyImages`` entry of a Kyverno rule."""

    references: tuple[str, ...]
    skip: tuple[str, ...]
    required: bool
    failure_action: str


@dataclass(frozen=True, slots=True)
class KyvernoRule:
    label: str
    namespace: str | None
    """A namespaced ``Policy``'s namespace; None for a ``ClusterPolicy``."""
    match: Mapping[str, Any]
    exclude: Mapping[str, Any]
    verifications: tuple[Verification, ...]
    spec: Mapping[str, Any]

    @property
    def judges_kind_only(self) -> bool:
        """Its filters look at the workload's kind and namespace only, not at its name,
        labels or annotations (so one verdict serves every workload of a kind)."""
        return not any(
            key in as_mapping(flt.get("resources"))
            for block in (self.match, self.exclude)
            for flt in _filters(block)
            for key in _OBJECT_FIELDS
        )


Hits = tuple[tuple[ImagePolicy, ...], tuple[tuple[KyvernoRule, Verification], ...]]
"""The ClusterImagePolicies and Kyverno verifications whose image patterns match an image."""


@dataclass(frozen=True, slots=True)
class SignaturePolicies:
    """Every signature policy in scope (scanned or ``--context-path``)."""

    image_policies: tuple[ImagePolicy, ...]
    kyverno_rules: tuple[KyvernoRule, ...]
    _hits: dict[str, Hits] = field(default_factory=dict, compare=False, repr=False)

    @property
    def known(self) -> bool:
        """Any signature policy is in scope: the cluster's policy set is visible."""
        return bool(self.image_policies or self.kyverno_rules)

    def hits(self, image: str) -> Hits:
        """The policies whose patterns match ``image``, computed once per image: a
        cluster runs many pods of few images, so coverage only judges these."""
        found = self._hits.get(image)
        if found is None:
            reference = kyverno_name(image)
            found = self._hits[image] = (
                tuple(
                    policy
                    for policy in self.image_policies
                    if any(sigstore_glob_matches(glob, image) for glob in policy.globs)
                ),
                tuple(
                    (rule, verification)
                    for rule in self.kyverno_rules
                    for verification in rule.verifications
                    if any(kyverno_wildcard_matches(p, reference) for p in verification.references)
                    and not any(kyverno_wildcard_matches(p, reference) for p in verification.skip)
                ),
            )
        return found

    def judges_kind_only(self, image: str) -> bool:
        """Whether coverage of ``image`` depends only on the workload's kind and namespace."""
        image_policies, verifications = self.hits(image)
        return not any(policy.match for policy in image_policies) and all(
            rule.judges_kind_only for rule, _ in verifications
        )


def collect_policies(index: ObjectIndex) -> SignaturePolicies:
    image_policies = [
        _image_policy(obj.name, obj.body)
        for obj in index.kind("ClusterImagePolicy")
        if api_group(obj.api_version) == SIGSTORE_GROUP
    ]
    rules: list[KyvernoRule] = []
    for obj in index.kind("ClusterPolicy", "Policy"):
        if api_group(obj.api_version) != KYVERNO_GROUP:
            continue
        namespace = namespace_of(obj) if obj.kind == "Policy" else None
        label = f"{obj.kind}/{obj.name}" if namespace is None else f"Policy/{namespace}/{obj.name}"
        spec = as_mapping(obj.body.get("spec"))
        for rule in _list(spec.get("rules")):
            if isinstance(rule, Mapping):
                verifications = tuple(_verifications(rule.get("verifyImages")))
                if verifications:
                    rule_label = f"{label} (rule {_text(rule.get('name')) or '?'})"
                    rules.append(
                        KyvernoRule(
                            rule_label,
                            namespace,
                            as_mapping(rule.get("match")),
                            as_mapping(rule.get("exclude")),
                            verifications,
                            spec,
                        )
                    )
    return SignaturePolicies(tuple(p for p in image_policies if p.globs), tuple(rules))


def _image_policy(name: str, body: Mapping[str, Any]) -> ImagePolicy:
    spec = as_mapping(body.get("spec"))
    globs = tuple(
        image["glob"]
        for image in _list(spec.get("images"))
        if isinstance(image, Mapping) and isinstance(image.get("glob"), str)
    )
    match = tuple(entry for entry in _list(spec.get("match")) if isinstance(entry, Mapping))
    return ImagePolicy(f"ClusterImagePolicy/{name}", globs, spec.get("mode") != "warn", match)


def _verifications(value: object) -> Iterable[Verification]:
    for entry in _list(value):
        if not isinstance(entry, Mapping):
            continue
        references = _strings(entry.get("imageReferences"))
        if isinstance(entry.get("image"), str):  # the pre-1.7 single-image form
            references = (*references, entry["image"])
        if references:
            yield Verification(
                references,
                _strings(entry.get("skipImageReferences")),
                entry.get("required") is not False,
                _text(entry.get("failureAction")),
            )


@dataclass(frozen=True, slots=True)
class Target:
    """What a policy's resource filters look at: the workload object and its pods."""

    kind: str
    name: str
    object_labels: Mapping[str, str]
    pod_labels: Mapping[str, str]
    pod_annotations: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class Coverage:
    """How the policies in scope treat one image in one namespace."""

    covering: tuple[str, ...]
    notes: tuple[str, ...]
    """Policies whose patterns match but that do not cover here, and why."""
    undecided: bool
    """Some policy's answer depends on labels of a Namespace that is not in scope."""


def coverage(
    image: str,
    target: Target,
    ns: Mapping[str, Any],
    policies: SignaturePolicies,
) -> Coverage:
    """Which policies verify ``image`` for ``target`` in namespace ``ns`` (its facts)."""
    covering: list[str] = []
    notes: list[str] = []
    undecided = False
    image_policies, verifications = policies.hits(image)
    for policy in image_policies:
        if not _cip_applies(policy, target):
            notes.append(
                f"{policy.label} matches it but its spec.match names neither pods (v1) nor "
                f"this {target.kind}'s resource with matching labels (group, version and "
                "resource are compared as written)"
            )
            continue
        if not policy.enforce:
            notes.append(f"{policy.label} matches it but only warns (mode: warn)")
        elif not ns["known"]:
            undecided = True
        elif ns["signatureOptIn"]:
            covering.append(policy.label)
        else:
            notes.append(
                f"{policy.label} matches it but namespace {ns['name']} is not opted in "
                f'(label {SIGSTORE_OPT_IN_LABEL}: "true")'
            )
    decided: set[str] = set()
    for rule, verification in verifications:
        if rule.label in decided or (rule.namespace is not None and rule.namespace != ns["name"]):
            continue
        verdict = _kyverno_verdict(rule, verification, target, ns, notes)
        if verdict is True:
            covering.append(rule.label)
        elif verdict is None:
            undecided = True
        else:
            continue
        decided.add(rule.label)  # the rule's first applicable verification decides
    return Coverage(tuple(covering), tuple(notes), undecided)


def signature_facts(
    image: object, target: Target, ns: Mapping[str, Any], policies: SignaturePolicies
) -> dict[str, Any]:
    """``containers[i].signature``: ``image`` (as policy-controller names it), ``covered``,
    ``policies`` (the covering ones), ``known`` and ``reason``.

    ``known`` says whether "not covered" rests only on objects in scope
    (docs/usage.md, "Scope: what a scan can see"):

    * covered: always known;
    * some signature policy in scope: the policy set is taken as visible (as for
      RuntimeClasses), so the answer is known unless it hinges on the labels of a
      Namespace that is not in scope (a matching ClusterImagePolicy needs the
      opt-in label; a Kyverno rule may select namespaces by label);
    * no signature policy in scope: known only when the workload's Namespace is
      in scope and *not* opted in to policy-controller. A namespace that opted
      in points at ClusterImagePolicies kept elsewhere, so poolgate stays silent.
    """
    if not isinstance(image, str) or not image:
        return {"image": "", "covered": False, "policies": [], "known": False, "reason": ""}
    found = coverage(image, target, ns, policies)
    covered = bool(found.covering)
    if covered:
        known = True
    elif policies.known:
        known = not found.undecided
    else:
        known = bool(ns["known"]) and not ns["signatureOptIn"]
    if covered:
        reason = ""
    elif not policies.known:
        reason = (
            "no signature policy (ClusterImagePolicy, Kyverno verifyImages) is in scope and "
            f"namespace {ns['name']} is not opted in to policy-controller"
        )
    else:
        reason = (
            "; ".join(found.notes)
            or "no ClusterImagePolicy glob or Kyverno imageReferences matches it"
        )
    return {
        "image": sigstore_name(image) or image,
        "covered": covered,
        "policies": list(found.covering),
        "known": known,
        "reason": reason,
    }


_CIP_RESOURCES: Final[Mapping[str, tuple[str, str]]] = {
    "Pod": ("", "pods"),
    "Deployment": ("apps", "deployments"),
    "StatefulSet": ("apps", "statefulsets"),
    "Job": ("batch", "jobs"),
    "CronJob": ("batch", "cronjobs"),
}
"""Kind -> the (API group, resource) a ``spec.match`` entry must name for
policy-controller to apply the policy when it admits an object of that kind (see the
module docstring for the kinds left out)."""


def _cip_applies(policy: ImagePolicy, target: Target) -> bool:
    if not policy.match:
        return True
    own = _CIP_RESOURCES.get(target.kind)
    for entry in policy.match:
        if _names_resource(entry, _CIP_RESOURCES["Pod"]):
            labels = target.pod_labels
        elif own is not None and _names_resource(entry, own):
            labels = target.object_labels
        else:
            continue
        if label_selector_matches(entry.get("selector"), labels):
            return True
    return False


def _names_resource(entry: Mapping[str, Any], resource: tuple[str, str]) -> bool:
    group, name = resource
    return (
        entry.get("resource") == name
        and (entry.get("group") or "") == group
        and entry.get("version") in ("v1", "*")
    )


def _kyverno_verdict(
    rule: KyvernoRule,
    verification: Verification,
    target: Target,
    ns: Mapping[str, Any],
    notes: list[str],
) -> Tri:
    """Whether ``verification`` (whose patterns match the image) is enforced for ``target``
    in ``ns``: True, False (with a note why), or None when it hinges on unseen labels."""
    applies = _and(
        _match_block(rule.match, target, ns, default=True),
        _not(_match_block(rule.exclude, target, ns, default=False)),
    )
    if applies is False:
        notes.append(
            f"{rule.label} matches it but its match/exclude leave out "
            f"this {target.kind} in namespace {ns['name']}"
        )
        return False
    if not verification.required:
        notes.append(f"{rule.label} matches it but sets required: false")
        return False
    enforce = _enforces(verification, rule.spec, ns)
    if enforce is False:
        notes.append(f"{rule.label} matches it but only audits (failure action Audit)")
        return False
    return _and(applies, enforce)


def _enforces(verification: Verification, spec: Mapping[str, Any], ns: Mapping[str, Any]) -> Tri:
    action: str | None = verification.failure_action
    if not action:
        action = _override(spec.get("validationFailureActionOverrides"), ns)
    if action is None:
        return None
    if not action:
        action = _text(spec.get("validationFailureAction")) or "Audit"
    return action.lower() == "enforce"


def _override(overrides: object, ns: Mapping[str, Any]) -> str | None:
    """The action of the first override naming the namespace; "" when none does; None: undecided."""
    for override in _list(overrides):
        if not isinstance(override, Mapping):
            continue
        names = _strings(override.get("namespaces"))
        hit: Tri = bool(names) and any(kyverno_wildcard_matches(p, ns["name"]) for p in names)
        if not hit and "namespaceSelector" in override:
            hit = _namespace_selector(override.get("namespaceSelector"), ns)
        if hit is None:
            return None
        if hit:
            return _text(override.get("action"))
    return ""


def _match_block(
    block: Mapping[str, Any], target: Target, ns: Mapping[str, Any], *, default: bool
) -> Tri:
    """A rule's ``match`` or ``exclude``: ``any`` / ``all`` lists of filters, or the older
    single filter; ``default`` when the block is empty."""
    results: list[Tri] = []
    if "any" in block:
        results.append(_any([_filter(f, target, ns) for f in _list(block.get("any"))]))
    if "all" in block:
        results.append(_all([_filter(f, target, ns) for f in _list(block.get("all"))]))
    if not results:
        if not any(key in block for key in ("resources", *_USER_INFO)):
            return default
        results.append(_filter(block, target, ns))
    return _all(results)


def _filters(block: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """Every resource filter of a ``match``/``exclude`` block, in either form."""
    listed = [*_list(block.get("any")), *_list(block.get("all"))]
    if "any" not in block and "all" not in block:
        listed.append(block)
    return [flt for flt in listed if isinstance(flt, Mapping)]


def _filter(flt: object, target: Target, ns: Mapping[str, Any]) -> Tri:
    if not isinstance(flt, Mapping):
        return False
    if any(_list(flt.get(key)) for key in _USER_INFO):
        return False  # holds only for the named requesters
    resources = as_mapping(flt.get("resources"))
    checks: list[Tri] = [
        _kinds(_strings(resources.get("kinds")), target.kind),
        _names(resources, target.name),
        _patterns(_strings(resources.get("namespaces")), str(ns["name"])),
        _annotations(resources.get("annotations"), target.pod_annotations),
        _operations(_strings(resources.get("operations"))),
    ]
    if "namespaceSelector" in resources:
        checks.append(_namespace_selector(resources.get("namespaceSelector"), ns))
    if "selector" in resources:
        checks.append(label_selector_matches(resources.get("selector"), target.pod_labels))
    return _all(checks)


def _kinds(kinds: Sequence[str], kind: str) -> bool:
    if not kinds:
        return True
    return any(entry.split("/")[-1] in ("*", "Pod", kind) for entry in kinds)


def _names(resources: Mapping[str, Any], name: str) -> bool:
    patterns = _strings(resources.get("names"))
    if isinstance(resources.get("name"), str):
        patterns = (*patterns, resources["name"])
    return _patterns(patterns, name)


def _patterns(patterns: Sequence[str], text: str) -> bool:
    return not patterns or any(kyverno_wildcard_matches(p, text) for p in patterns)


def _annotations(wanted: object, annotations: Mapping[str, str]) -> bool:
    if not isinstance(wanted, Mapping):
        return True
    return all(
        str(key) in annotations and kyverno_wildcard_matches(str(value), annotations[str(key)])
        for key, value in wanted.items()
    )


def _operations(operations: Sequence[str]) -> bool:
    return not operations or "CREATE" in operations


def _namespace_selector(selector: object, ns: Mapping[str, Any]) -> Tri:
    if not ns["known"]:
        return None
    return label_selector_matches(selector, ns["labels"])


def _and(left: Tri, right: Tri) -> Tri:
    return _all([left, right])


def _not(value: Tri) -> Tri:
    return None if value is None else not value


def _all(values: Sequence[Tri]) -> Tri:
    if any(value is False for value in values):
        return False
    return None if any(value is None for value in values) else True


def _any(values: Sequence[Tri]) -> Tri:
    if any(value is True for value in values):
        return True
    return None if any(value is None for value in values) else False


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def _strings(value: object) -> tuple[str, ...]:
    return tuple(item for item in _list(value) if isinstance(item, str))


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""
