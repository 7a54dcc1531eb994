"""Writes tests/cel/analysis_golden.json: what the text-reading code (guards.py,
deferral.py, reads.py, cel/budget.py, bindings.py, model/dra.py, model/admission.py)
computed for every bundled rule and for the admission policies and DeviceClasses of
the fixtures, before the parser-based analysis replaced it.

Run once with the old code (``python -m tests.cel.make_analysis_golden``); the
equivalence test (tests/cel/test_analysis_golden.py) compares the new analysis with it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

from scanner import bindings, deferral, guards, reads
from scanner.cel import get_engine
from scanner.cel.budget import comprehension_nesting, iterates
from scanner.config import Config
from scanner.model import admission, dra
from scanner.rules import Rule, bundled_rules_dir, load_rules

ROOT = Path(__file__).resolve().parents[2]
OUT = Path(__file__).with_name("analysis_golden.json")


def programs(rule: Rule) -> Iterator[tuple[str, str]]:
    """(field, source) of every expression of a rule, in file order."""
    if rule.condition is not None:
        yield "match.condition", rule.condition.source
    for name, program in rule.variables:
        yield f"variables.{name}", program.source
    if rule.violations is not None:
        yield "violations", rule.violations.source
    for index, validation in enumerate(rule.validations):
        yield f"validations[{index}].expression", validation.expression.source
        if validation.message_expression is not None:
            yield f"validations[{index}].messageExpression", validation.message_expression.source


def _projection(found: Mapping[str, frozenset[str] | None] | None) -> Any:
    if found is None:
        return None
    return {name: None if keys is None else sorted(keys) for name, keys in sorted(found.items())}


def _atom(atom: guards.Atom) -> Any:
    if isinstance(atom, guards.Flag):
        return ["flag", atom.variable, list(atom.fields), atom.negated]
    if isinstance(atom, guards.Equals):
        return ["equals", atom.variable, list(atom.fields), atom.text]
    return ["member", atom.variable, list(atom.fields), sorted(atom.values)]


def _guard(rule: Rule, run: Mapping[str, Any]) -> Any:
    if rule.condition is None:
        return None
    found = guards.build(rule.condition.source, get_engine("cpp"), run, rule.params)
    if found is None:
        return None
    return {
        "never": found.never,
        "flags": [_atom(atom) for atom in found.flags],
        "any_of": [[_atom(atom) for atom in atoms] for atoms in found.any_of],
        "whole": found.whole,
    }


def _bound(rule: Rule) -> Any:
    if not rule.variables:
        return None
    variables = [(name, program.source) for name, program in rule.variables]
    bodies = [source for field, source in programs(rule) if not field.startswith(("match", "var"))]
    return [bindings.let_source(variables, body) for body in bodies]


def rule_entry(rule: Rule, run: Mapping[str, Any]) -> dict[str, Any]:
    sources = [source for _, source in programs(rule)]
    read = reads.reads(rule)
    condition = rule.condition.source if rule.condition is not None else None
    return {
        "fact_kinds": sorted(reads.fact_kinds(sources)),
        "subjects": sorted(read.subjects),
        "joins": sorted(read.joins),
        "refs": any(reads._REF_KEY.search(source) for source in sources),
        "instance_facts_only": deferral.reads_instance_facts_only(sources),
        "projection": _projection(deferral.projection(sources)),
        "projection_controlled": _projection(deferral.projection(sources, controlled=True)),
        "conjuncts": None if condition is None else guards.conjuncts(condition),
        "guard": _guard(rule, run),
        "nesting": {field: list(comprehension_nesting(source)) for field, source in programs(rule)},
        "iterates": {field: iterates(source) for field, source in programs(rule)},
        "bound": _bound(rule),
    }


def _documents() -> Iterator[dict[str, Any]]:
    for directory in ("fixtures", "tests"):
        for path in sorted((ROOT / directory).rglob("*.yaml")):
            try:
                text = path.read_text(encoding="utf-8")
            except UnicodeDecodeError:
                continue
            if "kind: DeviceClass" not in text and "kind: ValidatingAdmissionPolicy" not in text:
                continue
            try:
                documents = list(yaml.safe_load_all(text))
            except (yaml.YAMLError, ValueError, RecursionError):
                continue
            for document in documents:
                if isinstance(document, dict):
                    yield from _items(document)


def _items(document: dict[str, Any]) -> Iterator[dict[str, Any]]:
    if document.get("kind") == "List" and isinstance(document.get("items"), list):
        for item in document["items"]:
            if isinstance(item, dict):
                yield item
    else:
        yield document


def policy_entries() -> dict[str, Any]:
    """Old answers for the CEL of every admission policy and DeviceClass in the tree."""
    keys = admission._label_keys(Config())
    policies: dict[str, Any] = {}
    selectors: dict[str, bool] = {}
    for document in _documents():
        spec = document.get("spec")
        if not isinstance(spec, dict):
            continue
        if document.get("kind") == admission.POLICY:
            text = "\n".join(admission._expressions(spec))
            policies[text] = {
                "runtimeClass": "runtimeClassName" in text,
                "sku": ("nodeSelector" in text or "nodeAffinity" in text)
                and keys is not None
                and keys.search(text) is not None,
                "expressions": list(admission._expressions(spec)),
            }
        elif document.get("kind") == "DeviceClass":
            for selector in spec.get("selectors") or ():
                cel = selector.get("cel") if isinstance(selector, dict) else None
                expression = cel.get("expression") if isinstance(cel, dict) else None
                if isinstance(expression, str):
                    selectors[expression] = bool(dra.GPU_DRIVER_SELECTOR.search(expression))
    return {"policies": list(policies.values()), "selectors": selectors}


def main() -> None:
    run = {"config": Config().cel_view(), "cluster": {}}
    rules = load_rules([bundled_rules_dir()], get_engine("cpp"))
    golden = {
        "rules": {rule.id: rule_entry(rule, run) for rule in rules},
        **policy_entries(),
    }
    OUT.write_text(json.dumps(golden, indent=1, sort_keys=True) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
