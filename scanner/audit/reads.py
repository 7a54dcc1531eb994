"""Which kinds a rule reads in an audit: one relation for what the audit lists
(``scanner.audit.run.plan``) and for what stops a rule when it cannot be read
(``scanner.audit.run.coverage``), so the two never disagree.

A rule reads the kinds it reports on (its *subjects*: ``match.kinds`` of an object
rule, the kinds a derived subject is made from) and the kinds its verdicts are
*joined* from: those its ``needs`` name, and those the model facts its expressions
read come from. Where each fact comes from is declared with the fact
(``scanner.model.facts``); what a rule's expressions read comes from their parse
(``scanner.cel.analysis``), and what the declarations cannot tell (a variable read
whole, a field not declared) counts as everything the variable may depend on.
tests/audit/test_reads.py checks the declarations against the model: a rule that still
runs without a kind must judge the other kinds' objects exactly as before.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Final

from scanner.cel.analysis import ANY, Path, RuleAnalysis
from scanner.evaluate import preview
from scanner.kinds import WORKLOAD_KINDS
from scanner.model import facts
from scanner.model.cluster import KIND as CLUSTER_KIND
from scanner.model.facts import SUBJECT_KINDS, Declared, Kinds
from scanner.ruleset.load import PREVIEW_RULE, Rule

ALL_KINDS: Final = facts.ALL_KINDS
"""Every kind an audit may list."""
_NONE: Kinds = frozenset()
_PREVIEW: Final = (
    frozenset({"Pod", *preview.TEMPLATES}) & ALL_KINDS,
    frozenset({"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "Namespace"})
    & ALL_KINDS,
)
"""The admission preview (PG606, no CEL): the workloads it judges; the policies, their
bindings and the namespaces their selectors read."""


@cache
def whole_kinds(variable: str) -> Kinds:
    """What a read of ``variable`` whole (or of a field it does not declare) depends on:
    its declared ``whole``, else what its facts together depend on."""
    declared = facts.variable(variable)
    if declared.whole is not None:
        return declared.whole
    return frozenset().union(*(item.fact.kinds for item in facts.declared(variable).values()))


def _nested(item: Declared) -> str | None:
    """The variable whose facts a fact's value holds (``workload.ns`` is an ``ns``)."""
    return next(
        (v.name for v in facts.VARIABLES if v.facts is not None and v.facts is item.type), None
    )


def path_kinds(variable: str, path: Path) -> Kinds:
    """The kinds a read of ``variable`` at ``path`` depends on."""
    if not path or path[0] is ANY:
        return whole_kinds(variable)
    item = facts.declared(variable).get(str(path[0]))
    if item is None:
        return whole_kinds(variable)
    inner = _nested(item)
    if inner is not None:  # another variable's facts, nested (``workload.ns``)
        return path_kinds(inner, path[1:]) if len(path) > 1 else whole_kinds(inner)
    return item.fact.kinds


def _parts(variable: str) -> list[tuple[Path, Kinds]]:
    """Joined facts inside values: (path below the variable, kinds)."""
    return [
        ((item.name, *(ANY if step == "*" else step for step in steps)), kinds)
        for item in facts.declared(variable).values()
        for steps, kinds in item.fact.parts
    ]


def fact_kinds(reading: RuleAnalysis) -> frozenset[str]:
    """The kinds the model facts a rule reads may depend on.

    Every read of a CEL variable of the model counts: ``workload.serviceAccount`` reads
    ServiceAccounts, ``ns.defaultDeny`` NetworkPolicies, ``workload.ns.labels``
    Namespaces. A variable read whole, indexed with a value, or at a field it does not
    declare counts whole; a joined part inside a value (a container's ``signature``)
    counts for every read that may reach it (by name, by an index with a value, or its
    container whole).
    """
    kinds: set[str] = set()
    for variable in facts.VARIABLES:
        if variable.facts is None:
            continue
        for read in reading.of(variable.name):
            kinds |= path_kinds(variable.name, read.path)
        for path, part in _parts(variable.name):
            if reading.covers(variable.name, path):
                kinds |= part
    return frozenset(kinds)


def granted_kinds() -> Kinds:
    """Every kind a subject is made from or a fact is read from: what an audit with every
    rule enabled may list, and what deploy/rbac.yaml grants (tests/audit/test_deploy.py)."""
    kinds: set[str] = set(WORKLOAD_KINDS).union(*SUBJECT_KINDS.values())
    for variable in facts.VARIABLES:
        for item in facts.declared(variable.name).values():
            kinds |= item.fact.kinds.union(*(part for _, part in item.fact.parts))
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
    return SUBJECT_KINDS.get(subject, ALL_KINDS)


def reads(rule: Rule) -> Reads:
    """What ``rule`` reads (see ``Reads``): the kinds it reports on, and as joins the kinds
    its ``needs`` name and those the model facts its expressions read come from
    (``fact_kinds``), so a verdict never rests on a kind the audit could not read."""
    if rule.id == PREVIEW_RULE:
        return Reads(*_PREVIEW)
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
