"""What ``poolgate snapshot`` leaves out: literal values that no enabled rule reads.

A snapshot is a file: it travels (a CI artifact, a laptop, a ticket) and outlives the
RBAC that guarded the cluster it came from. Secrets are never listed
(``scanner.kinds.resources``), but two places of the objects that are listed hold
secrets in clear often enough to matter:

* ``env-values``: the literal ``value`` of a container's ``env`` entry in the pod
  templates of the workload kinds (``scanner.kinds.WORKLOAD_TABLE``: Pods,
  Deployments, ..., the GPU workload CRDs), where ``DB_PASSWORD=...`` ends up.
  The entry's ``name`` stays, and so does ``valueFrom``, a reference to a Secret or
  ConfigMap key, not its content: a rule can still tell which variables are set
  and from where.
* ``last-applied``: the ``kubectl.kubernetes.io/last-applied-configuration``
  annotation of any object, a copy of the object as it was applied, env values
  included.

Which rules may read them. The bundled rules do not, except those ``READERS`` names:
no expression of theirs and no model fact reads a pod template's env values or that
annotation (PG110 reads the env values of the ClusterPolicy's toolkit, which is not a
pod template, and of a Deployment only the GPU Operator's image).
tests/e2e/security/test_snapshot_secrecy.py checks the bundled rules'
text and compares their findings with and without these values. Any other rule (from
``--rules`` or the config's ``ruleDirs``) may read anything of the kinds it reads
(``scanner.audit.reads``: the kinds it reports on and those its facts come from), since what
an expression reads cannot be bounded without following it: the values of those kinds
are kept, and nothing else is.

The snapshot records what it left out, per kind (``poolgate.io/omitted``), so an audit
of it with other rules knows: a rule that may read what was left out does not run, and
an error notification says so (``scanner.audit.run.coverage``), as for a kind the snapshot
did not list.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from scanner.audit.reads import reads
from scanner.inventory import as_mapping, is_mapping
from scanner.kinds import CONTAINER_FIELDS, WORKLOAD_KINDS, workload_kind
from scanner.kinds.resources import Resource
from scanner.ruleset.load import Rule, bundled_rules_dir
from scanner.sources.snapshot import Omitted

ENV_VALUES: Final = "env-values"
LAST_APPLIED: Final = "last-applied"
LAST_APPLIED_ANNOTATION: Final = "kubectl.kubernetes.io/last-applied-configuration"

WHAT: Final = {
    ENV_VALUES: "the literal values of container env entries",
    LAST_APPLIED: f"the {LAST_APPLIED_ANNOTATION} annotation",
}
"""What may be left out, as messages name it."""

READERS: Final[Mapping[str, frozenset[str]]] = {ENV_VALUES: frozenset(), LAST_APPLIED: frozenset()}
"""Bundled rules that read what may be left out (none does today): a snapshot keeps it
for the kinds they read whenever they are enabled."""


def plan(rules: Iterable[Rule], listed: Sequence[Resource]) -> Omitted:
    """What a snapshot of ``listed`` taken for ``rules`` leaves out: each item of
    ``WHAT`` from every listed kind (for ``env-values``, every workload kind) that no
    rule may read it from (``may_read``)."""
    rules = list(rules)
    names = {resource.kind for resource in listed}
    candidates = {ENV_VALUES: names & WORKLOAD_KINDS, LAST_APPLIED: names}
    omitted = {
        what: frozenset(
            kind for kind in kinds if not any(may_read(rule, what, kind) for rule in rules)
        )
        for what, kinds in candidates.items()
    }
    return {what: kinds for what, kinds in omitted.items() if kinds}


def may_read(rule: Rule, what: str, kind: str) -> bool:
    """Whether ``rule`` may read ``what`` (an item of ``WHAT``, or one a later poolgate
    left out) of objects of ``kind``: a bundled rule only if ``READERS`` says so, any
    other rule, and any rule for what this poolgate does not know, if it reads the
    kind."""
    known = READERS.get(what)
    if known is not None and rule.id not in known and _bundled(rule):
        return False
    return kind in reads(rule).kinds


def readers(rules: Iterable[Rule], omitted: Omitted) -> dict[str, list[str]]:
    """What was left out -> ids of the ``rules`` that may read it from a kind it was left
    out of (sorted): they cannot run on such a snapshot."""
    rules = list(rules)
    found: dict[str, list[str]] = {}
    for what, kinds in sorted(omitted.items()):
        ids = sorted(rule.id for rule in rules if any(may_read(rule, what, kind) for kind in kinds))
        if ids:
            found[what] = ids
    return found


def _bundled(rule: Rule) -> bool:
    return Path(rule.doc.source).parent == bundled_rules_dir()


def apply(objects: Iterable[dict[str, Any]], omitted: Omitted) -> None:
    """Leave out of ``objects`` (in place) what ``omitted`` says."""
    env = omitted.get(ENV_VALUES, frozenset())
    annotation = omitted.get(LAST_APPLIED, frozenset())
    if not env and not annotation:
        return
    for body in objects:
        kind = body.get("kind")
        if not isinstance(kind, str):
            continue
        if kind in annotation:
            annotations = as_mapping(body.get("metadata")).get("annotations")
            if isinstance(annotations, dict):
                annotations.pop(LAST_APPLIED_ANNOTATION, None)
        if kind in env:
            _drop_env_values(body, kind)


def _drop_env_values(body: dict[str, Any], kind: str) -> None:
    api_version = body.get("apiVersion")
    entry = workload_kind(kind, api_version if isinstance(api_version, str) else "")
    if entry is None:
        return
    for template in entry.templates(body):
        spec = template.spec
        if not is_mapping(spec):
            continue
        containers = [spec.get(name) for name in template.container_fields]
        for field_name, _ in CONTAINER_FIELDS:
            listed = spec.get(field_name)
            if isinstance(listed, list):
                containers.extend(listed)
        for container in containers:
            variables = container.get("env") if is_mapping(container) else None
            for variable in variables if isinstance(variables, list) else ():
                if isinstance(variable, dict):
                    variable.pop("value", None)
