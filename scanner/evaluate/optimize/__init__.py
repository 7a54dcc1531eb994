"""Speed-ups of the evaluation, each a transform of a rule's plan proven equal to the plain path.

A rule's plan (``scanner.evaluate.plan.RulePlan``) starts plain; each speed-up reads
the rule's analysis (``scanner.cel.analysis``) and the shape of the run
(``RunShape``: the engine, the run's values, how many subjects of each type) and
returns the plan with its shortcut, or unchanged where the shortcut does not apply
or does not pay. In the order they apply (``SPEEDUPS``):

* **binding** (``binding.py``): a rule's variables and parameters bound inside its
  programs, so it needs no activation of its own;
* **sharing** (``sharing.py``): rules with equal parameters share one activation
  per subject;
* **guards** (``guards.py``): what Python decides of a condition before any CEL runs;
* **deferral** (``projection.py``, ``defer``): rules that read only a controlled
  workload's instance facts run before its other facts are computed;
* **projection** (``projection.py``, ``project``): a workload's activation holds only
  the fields its rules read.

tests/equivalence/ runs each of them, and all together, against the plain
evaluation (``scanner.evaluate.evaluator``) over every fixture, scenario and a
generated corpus: a speed-up added here is added there.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Final

from scanner.evaluate.optimize import binding, guards, projection, sharing
from scanner.evaluate.plan import Plan, RulePlan, RunShape
from scanner.ruleset.load import Rule

Speedup = Callable[[RulePlan, RunShape], RulePlan]

SPEEDUPS: Final[Mapping[str, Speedup]] = {
    "binding": binding.bind,
    "sharing": sharing.share,  # after binding: a bound rule's parameters are inside it
    "guards": guards.guard,
    "deferral": projection.defer,
    "projection": projection.project,
}


def plan_run(rules: Iterable[Rule], run: RunShape, speedups: Iterable[str] = SPEEDUPS) -> Plan:
    """The plan of a run: each rule's plain plan, with ``speedups`` applied in order."""
    wanted = set(speedups)
    unknown = wanted - SPEEDUPS.keys()
    if unknown:
        raise ValueError(f"no speed-up {', '.join(sorted(unknown))}")
    chosen = [SPEEDUPS[name] for name in SPEEDUPS if name in wanted]
    plans = []
    for rule in rules:
        if rule.builtin:
            continue
        plan = RulePlan.of(rule)
        for speedup in chosen:
            plan = speedup(plan, run)
        plans.append(plan)
    return Plan.of(plans)
