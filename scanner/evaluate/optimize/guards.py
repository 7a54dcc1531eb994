"""Match conditions decided in Python before any CEL runs (cheap matching first).

Most conditions begin with a plain flag of the subject (``workload.gpu && ...``,
``node.gpu && ...``) or with switches of the run (``config.require.runtimeClass !=
""``). Evaluating them in CEL converts the subject into CEL values first, only to
learn that a non-GPU pod is out of scope for a dozen GPU rules. A guard reads the
same facts in Python instead.

A condition is split at its top-level ``&&`` (from its parse, ``scanner.cel.analysis``;
parentheses keep what they enclose together). These conjuncts become guards:

* an **atom**, read on the subject's variables or on ``object``:
  a flag ``[!]<variable>.<field>[.<field>...]`` whose value is a bool, an equality
  ``<variable>.<field>... == "text"``, or a membership ``<variable>.<field>... in
  config.<field>...`` against a list of strings fixed for the run;
* a **disjunction of atoms** ``(a || b ...)``: false when every atom is;
* a **constant**: a conjunct that reads only ``config``, ``cluster`` or ``params``,
  evaluated once per run (compiled from its own text).

Only the conjuncts before the first one with a comprehension (``all``, ``exists``,
``map``, ...) or a map literal become guards. cel-cpp evaluates ``&&`` from the left
and stops at the first false operand, but an evaluation that reaches its
comprehension limit (scanner/cel/budget.py), or builds a map literal whose keys
turn out equal, is aborted as a whole, whatever the other operands: a conjunct
after one, or one inside a constant (which the engine's own wrapping,
scanner/evaluate/optimize/binding.py, may push past the limit), would decide what CEL never gets to.

A guard answers "false" when one conjunct is: CEL's ``&&`` is false when any operand
is false, whatever the others (even an error), so a rule whose guard is false does
not match, exactly as the whole condition would have decided. It answers "true" only
when every conjunct of the condition is a guard and every one is true (a constant
that evaluated to ``true``, a flag set, a disjunction with one atom true): the
condition is then true without CEL, and the rule goes straight to its body.
Anything else (a flag that is not a bool, a missing field, a value of another type,
a constant that fails or reads something else, a conjunct no guard covers) leaves
the decision to the CEL condition, which runs in full.

Values cel-cpp cannot represent (an integer past int64, a null map key) never reach
a guard or CEL: the readers turn them into what the API server would have stored
(scanner/sources/yaml/numbers.py), so a guard reads the same values CEL would. Strings
holding a NUL, which cel-cpp ends there, get U+FFFD instead, in manifests, snapshots
and the configuration file alike (a guard compares ``config`` lists in Python).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Final

from scanner.cel import Engine, ResultKind
from scanner.cel.analysis import PathTest, analyze
from scanner.errors import CelError, CelEvalError
from scanner.evaluate.optimize import binding
from scanner.evaluate.plan import RulePlan, RunShape

ENGINES: Final = binding.ENGINES
"""Engines whose activations convert values on first read: guards pay there."""

SUBJECT_VARIABLES: Final = frozenset({"workload", "node", "pool", "sharingConfig", "ns"})
ROOTS: Final = SUBJECT_VARIABLES | {"object"}
RUN_VARIABLES: Final = frozenset({"config", "cluster", "params"})

_MISSING: Final = object()


def _lookup(root: str, fields: tuple[str, ...], variables: Mapping[str, Any], body: Any) -> Any:
    value: Any = body if root == "object" else variables.get(root, _MISSING)
    for name in fields:
        if value.__class__ is not dict:
            return _MISSING
        value = value.get(name, _MISSING)
    return value


@dataclass(frozen=True, slots=True)
class Flag:
    """``[!]variable.a.b``: decided when a bool is found there."""

    variable: str
    fields: tuple[str, ...]
    negated: bool

    def holds(self, variables: Mapping[str, Any], body: Any = None) -> bool | None:
        """True or false as CEL would read it, or None when CEL must decide."""
        value = _lookup(self.variable, self.fields, variables, body)
        return value is not self.negated if value.__class__ is bool else None


@dataclass(frozen=True, slots=True)
class Equals:
    """``variable.a.b == "text"``: decided when a string is found there."""

    variable: str
    fields: tuple[str, ...]
    text: str

    def holds(self, variables: Mapping[str, Any], body: Any = None) -> bool | None:
        value = _lookup(self.variable, self.fields, variables, body)
        return value == self.text if value.__class__ is str else None


@dataclass(frozen=True, slots=True)
class Member:
    """``variable.a.b in config.x``: decided when a string is found there."""

    variable: str
    fields: tuple[str, ...]
    values: frozenset[str]

    def holds(self, variables: Mapping[str, Any], body: Any = None) -> bool | None:
        value = _lookup(self.variable, self.fields, variables, body)
        return value in self.values if value.__class__ is str else None


Atom = Flag | Equals | Member


@dataclass(frozen=True, slots=True)
class Guard:
    """What Python decides about one rule's condition."""

    never: bool
    """A constant conjunct is false: the rule matches nothing in this run."""
    flags: tuple[Atom, ...]
    any_of: tuple[tuple[Atom, ...], ...] = ()
    """Conjuncts ``(a || b ...)``: false when every one of their atoms is."""
    whole: bool = False
    """Every conjunct is one of the above or a constant that is true in this run, so
    the guard can also decide that the condition is true."""

    def decide(self, variables: Mapping[str, Any], body: Any = None) -> bool | None:
        """The condition's value on this subject, or None when CEL must decide."""
        if self.never:
            return False
        known = self.whole
        for atom in self.flags:
            holds = atom.holds(variables, body)
            if holds is False:
                return False
            if holds is None:
                known = False
        for atoms in self.any_of:
            found = [atom.holds(variables, body) for atom in atoms]
            if True in found:
                continue
            if None not in found:  # every alternative is false
                return False
            known = False
        return True if known else None

    def rejects(self, variables: Mapping[str, Any], body: Any = None) -> bool:
        return self.decide(variables, body) is False


def build(
    source: str, engine: Engine, run_values: Mapping[str, Any], params: Mapping[str, Any]
) -> Guard | None:
    """The guard of one condition, or None when no conjunct can be decided in Python.

    ``run_values`` are the variables fixed for the whole run (``config``, ``cluster``).
    """
    flags: list[Atom] = []
    any_of: list[tuple[Atom, ...]] = []
    never = False
    whole = True  # every conjunct is covered (a constant only when it is true)
    for part in analyze(source).conjuncts:
        if part.iterates or part.builds_map:
            # CEL may abort here (the iteration limit; a map literal whose keys turn out
            # equal): nothing from here on decides
            whole = False
            break
        atom = _atom(part.test, run_values)
        if atom is not None:
            flags.append(atom)
        elif part.roots & RUN_VARIABLES and part.roots <= RUN_VARIABLES:
            value = _constant(part.source, engine, run_values, params)
            never = never or value is False
            whole = whole and value is True
        elif len(part.alternatives) > 1:
            either = [_atom(test, run_values) for test in part.alternatives]
            if all(either):
                any_of.append(tuple(atom for atom in either if atom is not None))
            else:
                whole = False
        else:
            whole = False
    if not never and not flags and not any_of and not whole:
        return None
    return Guard(never, tuple(flags), tuple(any_of), whole)


def _atom(test: PathTest | None, run_values: Mapping[str, Any]) -> Atom | None:
    """The guard of a simple test of the subject's variables or ``object``."""
    if test is None or test.root not in ROOTS:
        return None
    if test.kind == "flag":
        return Flag(test.root, test.path, test.negated)
    if test.kind == "equals":
        return Equals(test.root, test.path, test.text)
    values = _lookup("config", test.values, run_values, None)
    if isinstance(values, list) and all(isinstance(value, str) for value in values):
        return Member(test.root, test.path, frozenset(values))
    return None


def _constant(
    conjunct: str, engine: Engine, run_values: Mapping[str, Any], params: Mapping[str, Any]
) -> bool | None:
    """The conjunct's value for the run, or None when it fails (decided per subject)."""
    try:
        program = engine.compile(conjunct, ResultKind.BOOL)
        value = program.evaluate(engine.activation({**run_values, "params": params}))
    except (CelError, CelEvalError):
        return None
    return value if isinstance(value, bool) else None


def guard(plan: RulePlan, run: RunShape) -> RulePlan:
    """``plan`` with the guard of its rule's condition, when it has one.

    Like variable binding (``binding.py``), only for engines whose activations convert
    values on first read, and only for rules with ``PAYS_FROM`` subjects or more:
    compiling a constant conjunct costs, which a one-file pre-commit run never earns
    back. The pure-Python engine keeps evaluating whole conditions, so the rule
    fixtures, which run under both engines, compare the two ways of deciding.
    """
    rule = plan.rule
    condition = rule.condition
    if run.engine.name not in ENGINES or condition is None or not run.many(rule.doc.subject):
        return plan
    found = build(condition.source, run.engine, run.globals_, rule.params)
    return plan if found is None else replace(plan, guard=found)
