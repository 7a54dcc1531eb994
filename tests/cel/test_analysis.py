"""The analysis of CEL expressions and rules (scanner/cel/analysis.py, scanner/cel/walk.py):
what they read, their conjuncts, nesting and refs, the macros of Kubernetes' CEL
included; comments and optional syntax change nothing of what a rule reads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scanner.audit import reads as relation
from scanner.cel import analysis, cpp_available, get_engine
from scanner.cel.analysis import (
    ANY,
    ITERATED,
    REACHED,
    WHOLE,
    Analysis,
    PathTest,
    Read,
    analyze,
    analyze_rule,
    to_json,
)
from scanner.errors import RuleLoadError
from scanner.evaluate.optimize.projection import projection, reads_instance_facts_only
from scanner.ruleset.load import Rule, bundled_rules_dir, load_rules


def reads(source: str) -> set[tuple[str, tuple[str | None, ...], str]]:
    """What evaluating ``source`` and using its value reads: (root, path, how)."""
    return {(r.root, r.path, r.how) for r in analyze(source).value_reads()}


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("workload.gpu", {("workload", ("gpu",), WHOLE)}),
        ("has(object.spec.template)", {("object", ("spec", "template"), WHOLE)}),
        ("object.?spec.?x.orValue(1)", {("object", ("spec", "x"), WHOLE)}),
        ("object['spec'][?'x']", {("object", ("spec", "x"), WHOLE)}),
        ("object.spec[0].x", {("object", ("spec", ANY, "x"), WHOLE)}),
        (
            "object.spec[k]",
            {("object", ("spec", ANY), WHOLE), ("k", (), WHOLE)},
        ),
        ("'x' in object.spec", {("object", ("spec", "x"), WHOLE)}),
        (
            "workload.containers.exists(c, c.image.startsWith('nvcr.io/'))",
            {
                ("workload", ("containers",), ITERATED),
                ("workload", ("containers", ANY, "image"), WHOLE),
            },
        ),
        (  # filter: the result is the range's elements
            "workload.containers.filter(c, c.gpu).map(d, d.name)",
            {
                ("workload", ("containers",), ITERATED),
                ("workload", ("containers", ANY, "gpu"), WHOLE),
                ("workload", ("containers", ANY, "name"), WHOLE),
            },
        ),
        (  # a map's result is new: its body is read whole
            "xs.map(x, x.a).exists(y, y.b)",
            {("xs", (), ITERATED), ("xs", (ANY, "a"), WHOLE)},
        ),
        (  # two-variable forms bind the element to the second
            "m.all(k, v, v.x)",
            {("m", (), ITERATED), ("m", (ANY, "x"), WHOLE)},
        ),
        (
            "cel.bind(s, object.spec, s.x)",
            {("object", ("spec",), REACHED), ("object", ("spec", "x"), WHOLE)},
        ),
        ("dyn(object.a).b", {("object", ("a", "b"), WHOLE)}),
        ("optional.of(object.a).value().b", {("object", ("a", "b"), WHOLE)}),
        ("size(object.a)", {("object", ("a",), WHOLE)}),
        ("object.a + object.b", {("object", ("a",), WHOLE), ("object", ("b",), WHOLE)}),
        ("[object.a][0]", {("object", ("a",), WHOLE)}),  # a list built from it: whole
        (
            "c ? object.a : object.b",
            {("c", (), WHOLE), ("object", ("a",), WHOLE), ("object", ("b",), WHOLE)},
        ),
        ("[1].all(object, object.x)", set()),  # a comprehension variable, not the variable
        ("[1].all(object, .object.x)", {("object", ("x",), WHOLE)}),  # .object is the variable
        ("'object.spec' + r'workload.gpu'", set()),  # text in strings reads nothing
    ],
)
def test_what_an_expression_reads(
    source: str, expected: set[tuple[str, tuple[str | None, ...], str]]
) -> None:
    assert reads(source) == expected


@pytest.mark.parametrize(
    ("source", "names"),
    [
        ("variables.a + variables['b'].c", {"a", "b"}),
        ("[1].map(variables, variables.x)", set()),  # a comprehension variable
        ("has(variables.a) ? variables.b : 1", {"a", "b"}),
        ("size(variables)", None),
        ("variables[k]", None),
        ("variables.all(name, name != '')", None),
    ],
)
def test_the_rule_variables_an_expression_reads(source: str, names: set[str] | None) -> None:
    found = analyze(source).rule_variables
    assert found == (None if names is None else frozenset(names))


def test_reads_in_the_else_branch_on_controlled_are_marked() -> None:
    found = analyze("workload.controlled ? workload.gpu : size(workload.targets) > 0")
    marked = {(r.path, r.unless_controlled) for r in found.value_reads()}
    assert marked == {(("controlled",), False), (("gpu",), False), (("targets",), True)}
    # a value made in that branch is read there too, wherever it is used
    used = analyze("size(workload.controlled ? [] : workload.targets) > 0")
    assert Read("workload", ("targets",), WHOLE, True) in used.value_reads()


@pytest.mark.parametrize(
    "source",
    [
        "(workload.controlled && x) ? 1 : workload.targets",
        "workload.controlled == true ? 1 : workload.targets",
        "[{'controlled': true}].exists(workload, workload.controlled ? 1 : workload.targets)",
    ],
)
def test_only_workload_controlled_alone_marks_a_branch(source: str) -> None:
    assert not any(read.unless_controlled for read in analyze(source).value_reads())


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        (  # over a list: an index and an element
            "workload.containers.all(i, c, i < 4 && c.image != '')",
            {
                ("workload", ("containers",), ITERATED),
                ("workload", ("containers", ANY, "image"), WHOLE),
            },
        ),
        (
            "object.metadata.labels.exists(k, v, k.startsWith('a') && v == '')",
            {
                ("object", ("metadata", "labels"), ITERATED),
                ("object", ("metadata", "labels", ANY), WHOLE),
            },
        ),
        (
            "workload.containers.existsOne(c, c.gpu)",
            {
                ("workload", ("containers",), ITERATED),
                ("workload", ("containers", ANY, "gpu"), WHOLE),
            },
        ),
        (
            "workload.containers.existsOne(i, c, c.gpu)",
            {
                ("workload", ("containers",), ITERATED),
                ("workload", ("containers", ANY, "gpu"), WHOLE),
            },
        ),
        (  # the result is new: read whole where used, made of what the body read
            "workload.containers.transformList(i, c, c.name).size() > 0",
            {
                ("workload", ("containers",), ITERATED),
                ("workload", ("containers", ANY, "name"), WHOLE),
            },
        ),
        (  # with a filter
            "m.transformList(k, v, v.on, v.name)",
            {("m", (), ITERATED), ("m", (ANY, "on"), WHOLE), ("m", (ANY, "name"), WHOLE)},
        ),
        (
            "m.transformMap(k, v, v.x)",
            {("m", (), ITERATED), ("m", (ANY, "x"), WHOLE)},
        ),
        (
            "m.transformMapEntry(k, v, {k: v.y})",
            {("m", (), ITERATED), ("m", (ANY, "y"), WHOLE)},
        ),
        (  # optMap binds the optional's value, as cel.bind does
            "object.?spec.optMap(s, s.replicas).orValue(1)",
            {("object", ("spec",), REACHED), ("object", ("spec", "replicas"), WHOLE)},
        ),
        (
            "object.?spec.optFlatMap(s, s.?replicas)",
            {("object", ("spec",), REACHED), ("object", ("spec", "replicas"), WHOLE)},
        ),
    ],
)
def test_what_the_kubernetes_macros_read(
    source: str, expected: set[tuple[str, tuple[str | None, ...], str]]
) -> None:
    """The two-variable comprehensions and the optional macros of Kubernetes' CEL: the
    comprehension variables are not variables, their elements are read as elements."""
    assert reads(source) == expected


@pytest.mark.parametrize(
    "source",
    [
        "a.all(i, x, b.existsOne(y, c.transformList(j, z, z)))",
        "a.transformMap(k, v, b.transformMapEntry(k2, v2, c.exists(k3, v3, true)))",
        "a.existsOne(x, b.transformList(i, y, y > 0, c.all(z, true)))",
    ],
)
def test_the_kubernetes_comprehensions_nest(source: str) -> None:
    """They count toward the nesting limit as the standard macros do (budget.py)."""
    assert analyze(source).nesting == 3
    assert analyze(f"d.all(w, {source})").nesting == 4


def test_nesting_counts_bodies_not_ranges() -> None:
    assert (analyze("true").nesting, analyze("true").nesting_offset) == (0, 0)
    source = "a.map(x, x).filter(y, b.all(z, c.exists(w, true)))"
    found = analyze(source)
    assert found.nesting == 3 and source[found.nesting_offset :].startswith("exists(")
    first = analyze("a.all(x, b.all(y, true)) && c.all(x, d.all(y, true))")
    assert first.nesting == 2 and first.nesting_offset == len("a.all(x, b.")
    assert analyze("all(x, y) + a.all_of(x)").nesting == 0  # neither is a macro


def test_refs_and_names_and_comparisons() -> None:
    found = analyze('[{"message": "m", ?"ref": x}]')
    assert found.refs and {"message", "ref", "m"} <= found.names
    assert not analyze('"ref" + x').refs
    compared = analyze('device.driver == "a" || "b" == device.driver || device.driver in ["c", 1]')
    assert compared.compared == {
        ("device", ("driver",), "a"),
        ("device", ("driver",), "b"),
        ("device", ("driver",), "c"),
    }


def test_conjuncts_carry_their_tests() -> None:
    found = analyze(
        '!workload.controlled && object.kind == "Pod" && workload.ns.name in config.names'
        " && size(x) > 0 && params.xs.all(p, p != '') && {1: 2}.size() == 1"
    )
    tests = [part.test for part in found.conjuncts]
    assert tests == [
        PathTest("flag", "workload", ("controlled",), negated=True),
        PathTest("equals", "object", ("kind",), text="Pod"),
        PathTest("member", "workload", ("ns", "name"), values=("names",)),
        None,
        None,
        None,
    ]
    assert [part.iterates for part in found.conjuncts] == [False] * 4 + [True, False]
    assert [part.builds_map for part in found.conjuncts] == [False] * 5 + [True]
    assert found.conjuncts[4].roots == {"params"}  # p is bound


# --- a rule ---------------------------------------------------------------------------


def test_a_rule_follows_its_variables() -> None:
    rule = analyze_rule(
        ('variables.gpu.map(c, {"path": c.path})', "size(variables.names) > 0"),
        (
            ("gpu", "workload.containers.filter(c, c.gpu)"),
            ("names", "variables.gpu.map(c, c.name)"),
            ("unused", "workload.ns"),
        ),
    )
    assert rule.covers("workload", ("containers", ANY, "path"))
    assert rule.covers("workload", ("containers", ANY, "name"))
    assert not rule.covers("workload", ("containers", ANY, "signature"))
    assert Read("workload", ("ns",), REACHED) in rule.reads  # evaluated, not read further
    assert rule.iterates and not rule.refs


def test_a_variable_read_whole_reads_all_variables() -> None:
    rule = analyze_rule(("size(variables) > 0",), (("a", "workload.a"), ("b", "node.b")))
    assert {Read("workload", ("a",), WHOLE), Read("node", ("b",), WHOLE)} <= rule.reads


# --- comments and optional syntax change nothing -------------------------------------

_PLAIN = (
    "workload.gpu && workload.ns.platform && has(workload.podSpec.nodeSelector) && "
    "workload.containers.exists(c, c.signature.covered) && node.taints.size() > 0 && "
    "(workload.controlled ? true : size(workload.targets) > 0)"
)
_COMMENTED = (
    "workload.gpu // a GPU workload: size(workload), workload.serviceAccount\n"
    "  && workload.ns.platform // on the platform\n"
    "  && has(workload.podSpec.nodeSelector)\n"
    "  && workload.containers.exists(c, // each one\n c.signature.covered)\n"
    "  && node.taints.size() > 0 // node.identity\n"
    "  && (workload.controlled ? true : size(workload.targets) > 0) // end"
)
_OPTIONAL = (
    "workload.?gpu.orValue(false) && workload.ns.?platform.orValue(false) && "
    "workload.podSpec[?'nodeSelector'].hasValue() && "
    "workload.containers.exists(c, c.?signature.?covered.orValue(false)) && "
    "node.taints.size() > 0 && "
    "(workload.controlled ? true : size(workload.?targets.orValue([])) > 0)"
)


def _what_it_reads(source: str) -> tuple[object, ...]:
    rule = analyze_rule((source,))
    return (
        relation.fact_kinds(rule),
        projection(rule),
        projection(rule, controlled=True),
        reads_instance_facts_only(rule),
        {(r.root, r.path, r.how, r.unless_controlled) for r in rule.reads},
    )


def test_a_comment_reads_the_same_kinds_and_facts() -> None:
    assert _what_it_reads(_COMMENTED) == _what_it_reads(_PLAIN)
    assert relation.fact_kinds(analyze_rule((_COMMENTED,))) != relation.ALL_KINDS


def test_optional_syntax_reads_the_same_kinds_and_facts() -> None:
    assert _what_it_reads(_OPTIONAL) == _what_it_reads(_PLAIN)


_RULE = """\
id: {id}
name: host-sharing-{number}
level: error
summary: s.
description: d.
remediation: r.
subject: workload
violations: |
  {violations}
"""
_PLAIN_RULE = (
    "(has(workload.podSpec.hostNetwork) && workload.podSpec.hostNetwork == true)"
    " || ('hostIPC' in workload.podSpec && workload.podSpec['hostIPC'] == true)"
    " ? [{'message': 'shares the node in ' + workload.namespace, 'path': workload.podSpecPath}]"
    " : []"
)
_OPTIONAL_RULE = (
    "workload.?podSpec.?hostNetwork.orValue(false) == true"
    " || workload.podSpec[?'hostIPC'].orValue(false) == true"
    " ? [{'message': 'shares the node in ' + workload.namespace, 'path': workload.podSpecPath}]"
    " : []"
)


@pytest.mark.skipif(not cpp_available(), reason="cel-expr-python not installed")
def test_a_rule_with_optional_syntax_loads_and_reads_as_the_rule_without(tmp_path: Path) -> None:
    """On the default engine, which runs optional syntax: the same kinds, facts and
    projection, and the same findings on the rule fixtures of PG302 (host namespaces).
    The portable engine refuses the rule at load, naming the feature."""
    from scanner import pipeline
    from scanner.sources.files import load_paths

    for rule_id, violations in (("ACME901", _PLAIN_RULE), ("ACME902", _OPTIONAL_RULE)):
        (tmp_path / f"{rule_id}.yaml").write_text(
            _RULE.format(id=rule_id, number=rule_id[-3:], violations=violations)
        )
    options = pipeline.ScanOptions(engine="cpp", rule_dirs=[tmp_path], include_bundled=False)
    ruleset = pipeline.load_ruleset(options)
    plain, optional = sorted(ruleset.rules, key=lambda rule: rule.id)
    assert optional.analysis == plain.analysis
    assert relation.fact_kinds(optional.analysis) != relation.ALL_KINDS
    assert projection(optional.analysis) == projection(plain.analysis) == {
        "namespace": None, "podSpec": frozenset({"hostNetwork", "hostIPC"}), "podSpecPath": None
    }  # fmt: skip

    repo = Path(__file__).resolve().parents[2]
    inventory = load_paths([str(repo / "fixtures" / "rules" / "PG302")], repo)
    report = pipeline.evaluate_inventory(inventory, ruleset, repo)
    found = {
        rule_id: sorted((f.message, str(f.location), f.level.value, f.outcome.value)
                        for f in report.findings if f.rule_id == rule_id)
        for rule_id in ("ACME901", "ACME902")
    }  # fmt: skip
    assert found["ACME901"] and found["ACME902"] == found["ACME901"]

    with pytest.raises(RuleLoadError, match="optional syntax"):
        load_rules([tmp_path], get_engine("python"))


def test_every_bundled_rule_reads_the_same_with_comments(tmp_path: Path) -> None:
    """Each bundled rule's expressions, with a comment after every line: the rule cache
    and the engines take them, and they read what the rule reads."""
    from scanner.cel import get_engine

    for rule in load_rules([bundled_rules_dir()], get_engine("python")):
        variables = tuple((name, _comment(p.source)) for name, p in rule.variables)
        commented = analyze_rule(tuple(map(_comment, rule.expressions)), variables)
        assert commented == rule.analysis, rule.id


def _comment(source: str) -> str:
    return "\n".join(
        f"{line} // a comment: workload.targets, size(node)" for line in source.split("\n")
    )


# --- kept between runs ----------------------------------------------------------------


def _rules() -> list[Rule]:
    from scanner.cel import get_engine

    return load_rules([bundled_rules_dir()], get_engine("python"))


def test_an_analysis_reads_back_from_json() -> None:
    for rule in _rules():
        for source in (*rule.expressions, *(p.source for _, p in rule.variables)):
            found = analyze(source)
            text = json.dumps(to_json(found))
            assert analysis._from_json(json.loads(text)) == found


@pytest.mark.parametrize(
    "damaged",
    [None, [], {}, {"reads": [["x", [], "sideways", False]]}, {"reads": "x"}],
)
def test_a_damaged_entry_is_parsed_again(damaged: object) -> None:
    assert analysis._from_json(damaged) is None
    source = "object.x_from_a_damaged_entry"
    analysis.restore({analysis.digest(source): damaged})
    assert isinstance(analyze(source), Analysis)
    assert analyze(source).roots == {"object"}
