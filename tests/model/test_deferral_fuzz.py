"""Property tests of scanner/evaluate/optimize/projection.py: an expression it lets run on a controlled
pod's instance facts gives, on both CEL engines, the same value or error as on the
pod's complete facts; and any expression gives the same on the fields it names
(``workload_fields``, what an activation holds) as on all the facts.

Expressions are generated from the shapes reviews found the analysis tripped on:
reads of instance and deferred facts (also through ``.workload``), ``has()``, ``||``
and ``&&`` (which drop an error where the other side decides), conditionals on
``workload.controlled`` (whose else branch is exempt), conditionals as map keys, and
maps and lists holding reads, and reads of ``workload`` whole. The workloads are
those of the test dump (no cluster here: it is what ``poolgate snapshot`` writes).
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scanner.cel import ResultKind, get_engine
from scanner.cel.analysis import analyze_rule
from scanner.errors import CelError, CelEvalError
from scanner.evaluate.optimize.projection import (
    projection,
    reads_instance_facts_only,
    workload_fields,
)
from scanner.model import build_model
from scanner.model.workloads import INSTANCE_FACTS
from scanner.sources import snapshot
from scanner.sources.yaml.document import parse_plain

DUMP = Path(__file__).parents[1] / "audit" / "controlled" / "dump.yaml"
DEFERRED = ["targets", "containers", "diagnosis", "serviceAccount", "gpuResources", "volumes"]


@cache
def pods() -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(instance facts, complete facts) of every controlled pod of the dump."""
    model = build_model(snapshot.to_inventory(snapshot.read(str(DUMP))), read_yaml=parse_plain)
    pairs = []
    for workload in model.workloads:
        if workload.deferred is not None:
            partial = dict(workload.facts)
            pairs.append((partial, workload.complete()))
    assert pairs
    return pairs


fields = st.sampled_from(sorted(INSTANCE_FACTS) + DEFERRED)
reads = st.builds(
    lambda prefix, field: f"{prefix}{field}",
    st.sampled_from(["workload.", ".workload.", "workload . "]),
    fields,
)
leaves = (
    st.sampled_from(["true", "false", "1", "'x'", "[]"])
    | reads
    | reads.map(lambda read: f"has({read})")
    | st.sampled_from(["size(workload) > 3", "'targets' in workload", "workload['gpu']"])
)


def _compound(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    pair = st.tuples(children, children)
    return st.one_of(
        pair.map(lambda p: f"({p[0]} || {p[1]})"),
        pair.map(lambda p: f"({p[0]} && {p[1]})"),
        pair.map(lambda p: f"(workload.controlled ? {p[0]} : {p[1]})"),
        pair.map(lambda p: f"({p[0]} ? {p[1]} : 0)"),
        children.map(lambda c: f"{{workload.controlled ? 'a' : 'b' : {c}}}['a']"),
        pair.map(lambda p: f"[{p[0]}, {p[1]}][0]"),
        children.map(lambda c: f"size([{c}]) == 1"),
        pair.map(lambda p: f"{{'k': {p[0]}}} == {{'k': {p[1]}}}"),
    )


expressions = st.recursive(leaves, _compound, max_leaves=6)


def _compiled(source: str) -> Iterator[tuple[str, Any, Any]]:
    """(engine name, engine, program) for each engine that compiles ``source``."""
    for name in ("cpp", "python"):
        engine = get_engine(name)
        try:
            program = engine.compile(source, ResultKind.ANY)
        except CelError:
            continue
        yield name, engine, program


def _outcome(program: Any, engine: Any, facts: dict[str, Any]) -> tuple[str, object]:
    """The value, or that it failed (messages may differ: cel-cpp lists a map's keys in
    no fixed order)."""
    try:
        return "value", program.evaluate(engine.activation({"workload": facts}))
    except CelEvalError:
        return "error", None


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expressions)
def test_a_light_expression_answers_as_on_complete_facts(source: str) -> None:
    if not reads_instance_facts_only(analyze_rule((source,))):
        return  # completed first: nothing to compare
    for name, engine, program in _compiled(source):
        for partial, complete in pods():
            assert _outcome(program, engine, dict(partial)) == _outcome(
                program, engine, complete
            ), (name, source)


@cache
def workloads() -> list[dict[str, Any]]:
    """The complete facts of every workload of the dump, controlled or not."""
    model = build_model(
        snapshot.to_inventory(snapshot.read(str(DUMP))), defer=False, read_yaml=parse_plain
    )
    return [workload.facts for workload in model.workloads]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expressions)
def test_an_expression_answers_on_the_fields_it_names_as_on_all(source: str) -> None:
    named = workload_fields(analyze_rule((source,)))
    if named is None:
        return  # reads the facts whole: the activation holds all of them
    for name, engine, program in _compiled(source):
        for facts in workloads():
            projected = {field: facts[field] for field in named if field in facts}
            assert _outcome(program, engine, projected) == _outcome(program, engine, facts), (
                name,
                source,
            )


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expressions)
def test_on_a_controlled_workload_the_fields_outside_never_run_branches_suffice(
    source: str,
) -> None:
    """``workload_fields(controlled=True)`` leaves out what only the ``else`` branch of
    a conditional on ``workload.controlled`` names: on a controlled workload (its
    instance facts, or all of them) that branch never runs, so the answer is the same."""
    named = workload_fields(analyze_rule((source,)), controlled=True)
    if named is None:
        return
    controlled = [facts for facts in workloads() if facts["controlled"] is True]
    controlled += [dict(partial) for partial, _ in pods()]
    assert controlled
    for name, engine, program in _compiled(source):
        for facts in controlled:
            projected = {field: facts[field] for field in named if field in facts}
            assert _outcome(program, engine, projected) == _outcome(program, engine, facts), (
                name,
                source,
            )


_NESTED = st.sampled_from(
    [
        "workload.podSpec.nodeSelector",
        "workload.podSpec.hostNetwork",
        "has(workload.podSpec.serviceAccountName)",
        "'tolerations' in workload.podSpec",
        '"missing" in workload.podSpec',
        "'containers' in workload.podSpec == true",
        "workload.ns.platform",
        "has(workload.ns.labels)",
        "workload.ns.missing",
        "'operator' in workload.ns ? 1 : 2",
        # read any key: whole
        "size(workload.podSpec) > 1",
        "workload.ns == {}",
        "workload.podSpec['hostPID']",
        "'x' + 'y' in workload.podSpec",
    ]
)
nested_expressions = st.recursive(leaves | _NESTED, _compound, max_leaves=6)


def _projected(facts: dict[str, Any], source: str) -> dict[str, Any] | None:
    """What the engine's activation holds for ``source`` alone (scanner/evaluate/loop.py)."""
    found = projection(analyze_rule((source,)))
    if found is None:
        return None
    projected = {field: facts[field] for field in found if field in facts}
    for field, keys in found.items():
        value = projected.get(field)
        if keys is not None and isinstance(value, dict):
            projected[field] = {key: value[key] for key in keys if key in value}
    return projected


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nested_expressions)
def test_an_expression_answers_on_the_keys_it_names_as_on_all(source: str) -> None:
    """``projection``: fields whose value is read only at named keys are given with
    only those keys, and the answer is the same on both engines."""
    for name, engine, program in _compiled(source):
        for facts in workloads():
            projected = _projected(facts, source)
            if projected is None:
                return
            assert _outcome(program, engine, projected) == _outcome(program, engine, facts), (
                name,
                source,
            )
