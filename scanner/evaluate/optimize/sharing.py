"""One activation per subject for the rules with equal parameters.

An activation holds what a rule's expressions see (``scanner.evaluate.evaluator``,
``activation_data``), and the only part of it that differs from rule to rule on one
subject is ``params``. cel-expr-python converts a value into CEL the first time an
evaluation reads it, once per activation: a subject's facts converted for every rule
were most of the time of a run. Rules whose parameters are equal therefore share
one activation per subject. An activation is never changed by evaluating it (a
rule's variables get activations of their own, ``evaluator._with_variables``), so a
rule sees on the shared one exactly what it would see on its own.

The parameters compared are those of the rule as it runs: a rule whose parameters
are bound inside its programs (``binding.py``) has none left, and shares the
activation of the rules without parameters.
"""

from __future__ import annotations

import json
from dataclasses import replace

from scanner.evaluate.plan import RulePlan, RunShape


def share(plan: RulePlan, run: RunShape) -> RulePlan:
    """``plan`` sharing its activation with every rule of equal parameters."""
    key = json.dumps(plan.running.params, sort_keys=True, default=str)
    return replace(plan, activation_key=key)
