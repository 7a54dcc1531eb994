"""``scanner.model.facts``: the declarations are the facts the model makes, and everything
said about facts elsewhere (CEL declarations, read table, ``INSTANCE_FACTS``,
docs/facts.md) is derived from them."""

from __future__ import annotations

import types
import typing
from collections.abc import Iterator, Mapping
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from scanner.config.values import Config
from scanner.kinds.resources import RESOURCES
from scanner.model import Model, build_model, factkinds, facts
from scanner.model.providers import DECLARE
from scanner.model.workloads import INSTANCE_FACTS
from scanner.ruleset import catalog
from scanner.sources.files import load_paths
from scanner.sources.yaml.document import parse_plain, parse_stream

ROOT = Path(__file__).resolve().parents[2]
INPUTS = ("fixtures/rules", "fixtures/scenarios", "fixtures/demo", "tests/audit/lab")


@cache
def models() -> tuple[Model, ...]:
    return tuple(
        build_model(
            load_paths([str(ROOT / path)], ROOT), Config(), defer=False, read_yaml=parse_plain
        )
        for path in INPUTS
    )


def made(model: Model) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Every fact table the model made: (variable, facts)."""
    for workload in model.workloads:
        yield "workload", workload.facts
        yield "ns", workload.facts["ns"]
    yield from (("node", node) for _, node in model.nodes)
    yield from (("pool", pool.facts) for pool in model.pools)
    yield from (("sharingConfig", config) for _, config in model.sharing_configs)
    yield from (("ns", ns) for _, ns in model.namespaces)
    yield "cluster", {**model.cluster, "now": "2026-01-01T00:00:00Z"}  # the run adds now
    assert model.cluster_subject is not None
    yield from model.cluster_subject[1].items()


def holds(hint: Any, value: object) -> bool:
    """Whether ``value`` is of the declared Python type (one level deep)."""
    origin = typing.get_origin(hint)
    if hint is Any:
        return True
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is str:
        return isinstance(value, str)
    if origin is list:
        (item,) = typing.get_args(hint)
        return isinstance(value, list) and all(holds(item, v) for v in value)
    if origin in (typing.Union, types.UnionType):
        return any(holds(option, value) for option in typing.get_args(hint))
    return isinstance(value, Mapping)  # dict[...], Mapping[...], a TypedDict


def test_the_model_makes_exactly_the_declared_facts_with_their_types() -> None:
    """A fact the model sets but does not declare would be read as the whole variable
    by the audit (found by CI once: gpuPodCounts made PG108 stop on a forbidden
    ValidatingAdmissionPolicy); a declared fact the model never sets is a stale doc."""
    seen: dict[str, set[str]] = {}
    for model in models():
        for variable, values in made(model):
            declared = facts.declared(variable)
            assert set(values) <= set(declared), (variable, set(values) - set(declared))
            seen.setdefault(variable, set()).update(values)
            for name, value in values.items():
                assert holds(declared[name].type, value), (variable, name, value)
    for variable in facts.VARIABLES:
        if variable.facts is not None:
            assert seen[variable.name] == set(facts.declared(variable.name)), variable.name


def test_every_cel_variable_is_declared_once_in_the_order_the_engines_had() -> None:
    cpp = pytest.importorskip("scanner.cel.cpp", exc_type=ImportError)
    assert tuple(f"var {name}: dyn" for name in facts.NAMES) == cpp.DECLARATIONS
    assert (
        *("object", "workload", "node", "pool", "sharingConfig", "ns", "admission"),
        *("gpuWorkloads", "cluster", "config", "params", "variables", "namespaces", "pools"),
        "subjectRef",
    ) == facts.NAMES


def test_each_subject_binds_the_variables_declared_for_it() -> None:
    subjects = models()[0].subjects()
    for subject_type, found in subjects.items():
        bound = {name for subject in found for name in subject.variables}
        declared = {v.name for v in facts.VARIABLES if v.subject == subject_type and v.facts}
        assert bound == declared, subject_type


def test_instance_facts_are_the_facts_declared_per_instance() -> None:
    per_instance = {
        name for name, declared in facts.declared("workload").items() if declared.fact.instance
    }
    assert per_instance == INSTANCE_FACTS
    assert {"gpu", "controlled", "ns", "runningNode"} <= INSTANCE_FACTS
    assert not {"containers", "targets", "serviceAccount"} & INSTANCE_FACTS


def test_every_kind_a_fact_is_read_from_is_listable() -> None:
    listable = {resource.kind for resource in RESOURCES}
    for variable in facts.VARIABLES:
        for declared in facts.declared(variable.name).values():
            kinds = declared.fact.kinds.union(*(part for _, part in declared.fact.parts))
            assert kinds <= listable, (variable.name, declared.name, kinds - listable)
    assert set().union(*facts.SUBJECT_KINDS.values()) <= listable


def test_every_provider_has_a_reader_and_a_listable_resource() -> None:
    assert tuple(DECLARE) == factkinds.PROVIDERS
    for provider in factkinds.PROVIDERS:
        [resource] = [r for r in RESOURCES if r.kind == provider.kind]
        assert resource.group == provider.group
        assert provider.kind in facts.POOL_KINDS
        assert provider.joins <= {r.kind for r in RESOURCES}


def test_docs_facts_md_is_generated_and_current() -> None:
    """docs/facts.md is ``scanner.ruleset.catalog.render_facts()``; regenerate it with
    python -c 'import sys; from scanner.ruleset.catalog import render_facts;
    sys.stdout.write(render_facts())' > docs/facts.md"""
    assert (ROOT / "docs" / "facts.md").read_text() == catalog.render_facts()


def test_docs_name_every_fact_with_its_kinds() -> None:
    text = catalog.render_facts()
    for variable in facts.VARIABLES:
        assert f"| `{variable.name}` |" in text
        for name in facts.declared(variable.name):
            assert f"| `{name}` |" in text
    assert "| `serviceAccount` | map(string, dyn) | template | PodIdentityAssociation, " in text


@pytest.mark.parametrize(
    ("document", "kinds"),
    [
        ("apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: a}\n", {"NodePool"}),
        ("apiVersion: karpenter.sh/v2\nkind: NodePool\nmetadata: {name: a}\n", {"NodePool"}),
        ("apiVersion: example.com/v1\nkind: NodePool\nmetadata: {name: a}\n", set()),
        (
            "apiVersion: container.cnrm.cloud.google.com/v1beta1\nkind: ContainerNodePool\n"
            "metadata: {name: a}\n",
            {"ContainerNodePool"},
        ),
        (
            "apiVersion: cluster.x-k8s.io/v1beta1\nkind: MachineDeployment\nmetadata: {name: a}\n",
            {"MachineDeployment"},
        ),
    ],
)
def test_a_declaration_is_read_by_its_provider_only_in_its_group(
    document: str, kinds: set[str]
) -> None:
    inventory = parse_stream(document, "pools.yaml")
    model = build_model(inventory, Config(), defer=False, read_yaml=parse_plain)
    assert {node["kind"] for _, node in model.nodes} == kinds
