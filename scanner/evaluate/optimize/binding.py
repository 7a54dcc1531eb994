"""Rule variables bound inside one expression, so a subject keeps a single activation.

cel-expr-python converts a Python value into CEL values the first time an evaluation
reads it, once per activation, and the conversion is deep: reading ``workload.gpu``
converts all of ``workload`` (pod spec, containers and every derived fact). Binding a
rule's ``variables`` by building a new activation per variable therefore converted the
subject again and again; on the 10,000-object benchmark corpus that re-conversion was
most of the evaluation time.

Instead, each program that runs after the variables (``violations``, every validation's
``expression`` and ``messageExpression``) is compiled once more with the variables
bound by single-element ``map`` comprehensions, standard CEL that both engines run::

    [[{"a": (A), "b": (B)}].map(variables,
      {"a": variables["a"], "b": variables["b"], "c": (C)})[0]
    ].map(variables, (BODY))[0]

The comprehension variable ``variables`` shadows the declared one: a variable sees
the variables defined before it (a variable whose expression reads ``variables``, as
its parse tells, starts a new level, so it sees all earlier ones), and the body sees
them all, as CEL values
(a ``timestamp()``, a ``duration()`` or a ``uint`` stays one, as in a
ValidatingAdmissionPolicy). Variables are evaluated eagerly, and an error in any of
them is an error of the rule. Each wrapped program evaluates the variables itself,
in the same evaluation: their comprehension iterations count toward that program's
10,000 (budget.py), with one more per ``map``. The wrapped programs are evaluated
against the subject's shared activation; the rule's own programs keep their sources
for messages and cost checks.

On cel-cpp every rule with variables or parameters is bound, however few its subjects,
so the answer never depends on how many objects a run holds: the plain path hands a
variable's value back through Python, where a timestamp is no CEL value any more, and
gives each variable an iteration budget of its own. Compiling the wrapped programs
costs time on the first run; the program cache
(scanner/cel/programcache.py) keeps them for the next.

A rule with ``params`` used to need an activation of its own as well (``params``
differs from rule to rule), so every subject was converted once more for it. Its
parameters are bound the same way, outermost, as a literal (JSON is CEL for them),
and the condition is wrapped too; the rule then shares the subject's activation.

Only the cpp engine needs this: cel-python converts values without that cost and
keeps CEL values through its plain path, which the rule fixtures, run under both
engines, compare with the bound one. Its budget differs: each variable and program
gets its own 10,000 iterations, so a rule within a few thousand iterations of the
limit may stop on cel-cpp alone. A rule whose wrapped program does not compile (a
comprehension nesting limit, a variable named twice, parameters that do not read
back as the same literal) keeps the plain path on cel-cpp too, whatever its subjects.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final

from scanner.cel import Engine, Program, ResultKind
from scanner.cel.analysis import analyze
from scanner.errors import CelError
from scanner.evaluate.plan import RulePlan, RunShape
from scanner.ruleset.load import Rule

ENGINES: Final = frozenset({"cpp"})
"""Engines whose activations convert values on first read (see the module docstring)."""

_CACHE_LIMIT: Final = 1024
_cache: dict[tuple[Engine, str, tuple[str, ...]], Rule | None] = {}


@dataclass(frozen=True, slots=True)
class BoundProgram:
    """A program evaluated with its rule's variables bound inside it.

    ``source`` is the rule's original text (what messages and cost checks read);
    ``program`` is the wrapped expression that runs.
    """

    source: str
    program: Program

    def evaluate(self, activation: Any) -> Any:
        return self.program.evaluate(activation)

    def variable_value(self, activation: Any) -> Any:
        return self.program.variable_value(activation)


def bind(plan: RulePlan, run: RunShape) -> RulePlan:
    """``plan`` running its rule with its variables and parameters bound inside its
    programs, when it has any, on an engine of ``ENGINES``. A rule whose type has no
    subjects in the run is left alone: nothing would run it, and compiling costs."""
    rule = plan.rule
    if run.engine.name not in ENGINES or not (rule.variables or rule.params):
        return plan
    if not run.has(rule.doc.subject):
        return plan
    found = bound_rule(rule, run.engine)
    return plan if found is None else replace(plan, running=found)


def bound_rule(rule: Rule, engine: Engine) -> Rule | None:
    """``rule`` with its variables and parameters bound inside its programs, or None
    when its wrapped programs do not compile (module docstring). The rule returned
    has no ``variables`` or ``params`` of its own left: an engine runs it like any
    other rule, on the subject's shared activation. Kept for the next run."""
    key = (engine, rule.id, _sources(rule))
    if key not in _cache:
        if len(_cache) >= _CACHE_LIMIT:
            _cache.clear()
        _cache[key] = _bind(rule, engine)
    return _cache[key]


def _sources(rule: Rule) -> tuple[str, ...]:
    texts = [_params_literal(rule.params) or "", f"if {_source(rule.condition)}"]
    texts += [f"{name}={program.source}" for name, program in rule.variables]
    if rule.violations is not None:
        texts.append(rule.violations.source)
    for validation in rule.validations:
        texts.append(validation.expression.source)
        if validation.message_expression is not None:
            texts.append(validation.message_expression.source)
    return tuple(texts)


def _source(program: Program | None) -> str:
    return "" if program is None else program.source


def _params_literal(params: Mapping[str, Any]) -> str | None:
    """``params`` as a CEL literal, or None when it has none that reads back the same.

    JSON is CEL for these values (maps with string keys, lists, strings, ints,
    doubles, bools, null); anything that does not survive the round trip (NaN, keys
    that are not strings) keeps the rule on the plain path.
    """
    try:
        literal = json.dumps(dict(params), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError):
        return None
    return literal if json.loads(literal) == params else None


def _bind(rule: Rule, engine: Engine) -> Rule | None:
    """The rule with its variables, and its ``params`` when it has any, bound inside.

    Rules with parameters need an activation of their own for ``params``, and so a
    second conversion of every subject; bound as a literal, they share the subject's
    activation with every other rule.
    """
    variables = [(name, program.source) for name, program in rule.variables]
    if len({name for name, _ in variables}) < len(variables):
        return None  # a map literal with a repeated key fails in CEL; the plain path: last wins
    params = None
    if rule.params:
        params = _params_literal(rule.params)
        if params is None:
            return None

    def wrap(bindings: Sequence[tuple[str, str]], body: Program, result: ResultKind) -> Program:
        source = let_source(bindings, body.source, params)
        # The sources inside passed Kubernetes' literal checks when the rule loaded; the
        # map literal binding them may mix types (an int and a list), which they refuse.
        return BoundProgram(body.source, engine.compile(source, result, literal_checks=False))

    try:
        condition = rule.condition
        if condition is not None and params is not None:
            condition = wrap([], condition, ResultKind.BOOL)
        violations = None
        if rule.violations is not None:
            violations = wrap(variables, rule.violations, ResultKind.LIST)
        validations = []
        for validation in rule.validations:
            message_expression = None
            if validation.message_expression is not None:
                message_expression = wrap(
                    variables, validation.message_expression, ResultKind.STRING
                )
            expression = wrap(variables, validation.expression, ResultKind.BOOL)
            validations.append(
                replace(validation, expression=expression, message_expression=message_expression)
            )
    except CelError:
        return None
    return replace(
        rule,
        params={},
        condition=condition,
        variables=(),
        violations=violations,
        validations=tuple(validations),
    )


def let_source(variables: Sequence[tuple[str, str]], body: str, params: str | None = None) -> str:
    """``body`` with ``variables`` (name, expression) bound as ``variables.<name>``.

    Levels chain through the comprehension ranges, not the bodies, so the wrapping
    adds one level of comprehension nesting however many levels there are (the rule
    cost limit in ``scanner.cel.budget`` counts bodies only, and a single-element
    ``map`` is one iteration).

    The texts are put together, not rewritten: each one compiled on its own, so it
    is a whole expression, and each stands on lines of its own inside parentheses,
    where a ``//`` comment ends with its line and nothing around can bind into it.
    """
    levels: list[list[tuple[str, str]]] = []
    for name, source in variables:
        if not levels or (analyze(source).reads_variables and levels[-1]):
            levels.append([])
        levels[-1].append((name, source))
    # Every expression goes on lines of its own: a trailing "// comment" stays inside.
    bound: list[str] = []
    scope = ""
    for level in levels:
        entries = [f"{json.dumps(name)}: variables[{json.dumps(name)}]" for name in bound]
        # dyn(): cel-cpp types a map literal by joining its values' types, where dyn
        # gives way to any other (a string beside a dyn map made ``variables.grant`` a string).
        entries += [f"{json.dumps(name)}: dyn(\n{source}\n)" for name, source in level]
        values = f"{{{', '.join(entries)}}}"
        scope = f"[{scope}].map(variables, {values})[0]" if scope else values
        bound.extend(name for name, _ in level)
    expression = f"[{scope}].map(variables, (\n{body}\n))[0]" if scope else f"(\n{body}\n)"
    # ``params`` outermost: variables may read it too.
    return f"[{params}].map(params, {expression})[0]" if params is not None else expression
