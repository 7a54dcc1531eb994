"""Which facts of ``workload`` a rule reads: whether it can run on a controlled
workload before the rest of its facts exist, and which fields its activation needs.

A controlled workload (``scanner.model.workloads``) waits with its instance facts
(``INSTANCE_FACTS``) until a rule needs the rest. A rule *reads instance facts only*
when its expressions never read any other fact of ``workload``:

* every read of ``workload`` (``.workload`` too) goes through a field
  (``workload.gpu``), never the variable whole (``size(workload)``, ``workload[key]``,
  ``workload.all(...)``), and that field is an instance fact;
* except in the ``else`` branch of a conditional on ``workload.controlled`` alone
  (``(workload.controlled ? [] : workload.targets)``): a deferred workload is
  controlled, so that branch is never evaluated on one.

Such a rule reads exactly the same values from the instance facts as from the
complete ones, so it gives the same answer, errors and cost included, and runs
without completing the workload. Every other rule completes it first. Only reads
that cannot happen are exempt: a rule that might read a deferred fact is never run on
the partial facts, because CEL can turn the failure of such a read into an answer
(``||``, ``&&`` and ``exists`` drop an error where the other operands decide, and the
complete facts could decide differently, or run into the cost limit instead).

The same reading lists what a rule may read at all (``projection``, applied to a
rule's plan by ``project``): the fields of ``workload`` it reads (``workload_fields``)
and, of a field whose value it reads only at keys it names (``workload.ns.platform``,
``"nodeSelector" in workload.podSpec``, ``has(workload.podSpec.x)``), those keys. The
fast path converts into CEL only those fields and keys of the subject's facts that
the rules it runs on the subject read, since cel-expr-python converts a variable
whole the first time an expression reads it.

Both come from the rule's parse (``scanner.cel.analysis``, ``RuleAnalysis``): what it
reads of ``workload``, through its variables too.
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from dataclasses import replace
from typing import Any, Final

from scanner.cel.analysis import ANY, REACHED, RuleAnalysis
from scanner.evaluate.optimize import binding
from scanner.evaluate.plan import RulePlan, RunShape
from scanner.model.workloads import INSTANCE_FACTS

ENGINES: Final = binding.ENGINES
"""Engines whose activations convert a variable whole on first read: projecting pays
there (``project``)."""


def defer(plan: RulePlan, run: RunShape) -> RulePlan:
    """``plan`` marked light when its rule reads only a controlled workload's instance
    facts: it runs before the workload's deferred facts are computed, and a workload
    only light rules apply to is never completed. Only a run with deferred workloads
    (an audit) reads the rules for it."""
    if not run.deferring or not reads_instance_facts_only(plan.rule.analysis):
        return plan
    return replace(plan, light=True)


def project(plan: RulePlan, run: RunShape) -> RulePlan:
    """``plan`` with the fields of ``workload`` (and keys of their values) its rule may
    read, so that the activation converts only what the rules run on a workload read.
    Where converting costs (``ENGINES``), and there are enough workloads to repay
    reading every rule (``PAYS_FROM``)."""
    rule = plan.rule
    if run.engine.name not in ENGINES or rule.doc.subject != "workload":
        return plan
    if not run.many("workload"):
        return plan
    reading = rule.analysis
    return replace(
        plan,
        reads=projection(reading),
        reads_controlled=projection(reading, controlled=True),
    )


def reads_instance_facts_only(reading: RuleAnalysis) -> bool:
    """Whether a rule's expressions read ``workload`` only as the module docstring allows."""
    for read in reading.of("workload", controlled=True):
        if not read.path or read.path[0] is ANY or read.path[0] not in INSTANCE_FACTS:
            return False
    return True


def workload_fields(reading: RuleAnalysis, *, controlled: bool = False) -> frozenset[str] | None:
    """The fields of ``workload`` a rule may read (in any branch), or None when it may
    read the variable whole. ``controlled``: on a workload whose ``controlled`` is
    true, where the ``else`` branch of a conditional on ``workload.controlled`` alone
    never runs, so what only that branch reads is never read (a controlled pod skips
    its controller's pool checks).

    An activation whose ``workload`` holds only these fields gives the rule the same
    values, errors and costs as the whole facts (scanner/evaluate/fast.py): a field it reads
    is there or missing in both, and nothing else is read. (Converting the fields left
    out could not have failed either: the readers keep every value within what CEL
    represents, scanner/sources/yaml/numbers.py.)
    """
    found = projection(reading, controlled=controlled)
    return None if found is None else frozenset(found)


Projection = dict[str, frozenset[str] | None]
"""Field of ``workload`` -> the keys of its value that may be read, None for all."""


def projection(reading: RuleAnalysis, *, controlled: bool = False) -> Projection | None:
    """``workload_fields`` one level deeper: for each field, the keys of its value a
    rule may read, when every read of it is at a key it names (``workload.<field>.<key>``,
    ``has()``, ``"<key>" in workload.<field>``, ``workload.<field>["<key>"]``); None for
    a field read any other way (whole, iterated, indexed with a value, ``size()``). A
    field holding a map may then be given with only those keys: a key the rule reads
    is there or missing in both, and a key test answers the same (a list is always
    given whole)."""
    fields: dict[str, set[str] | None] = {}
    for read in reading.of("workload", controlled=controlled):
        path = read.path
        if not path or path[0] is ANY:
            return None
        name = path[0]
        known = fields.get(name, set())
        if len(path) == 1 and read.how == REACHED:  # there or not; no key read
            fields[name] = known
            continue
        key = path[1] if len(path) > 1 else ANY
        fields[name] = None if key is ANY or known is None else known | {key}
    return {name: None if keys is None else frozenset(keys) for name, keys in fields.items()}


def projected(
    facts: dict[str, Any], fields: Set[str], keys: Mapping[str, frozenset[str]]
) -> dict[str, Any]:
    """A workload's ``facts`` with only ``fields``, and of a field in ``keys`` that
    holds a map, only those keys: what an activation for rules that read no more
    holds. The subject's own facts stay whole."""
    found = facts
    if len(fields) < len(facts):
        found = {name: facts[name] for name in fields if name in facts}
    for name, wanted in keys.items():
        value = found.get(name)
        if value.__class__ is dict and len(wanted) < len(value):
            if found is facts:
                found = dict(facts)
            found[name] = {key: value[key] for key in wanted if key in value}
    return found
