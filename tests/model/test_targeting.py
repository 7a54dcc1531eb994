"""Node selection and toleration matching follow Kubernetes semantics."""

from __future__ import annotations

from typing import Any

import pytest

from scanner.model.targeting import selects, untolerated

LABELS = {"sku": ["h100"], "pool": ["h100-train"], "gpus": ["8"]}


def term(*expressions: dict[str, Any]) -> dict[str, Any]:
    return {"matchExpressions": list(expressions)}


def affinity(*terms: dict[str, Any]) -> dict[str, Any]:
    return {
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}
            }
        }
    }


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({}, True),
        ({"nodeSelector": {"sku": "h100"}}, True),
        ({"nodeSelector": {"sku": "a100"}}, False),
        ({"nodeSelector": {"sku": "h100", "zone": "a"}}, False),
        (affinity(term({"key": "sku", "operator": "In", "values": ["a100", "h100"]})), True),
        (affinity(term({"key": "sku", "operator": "NotIn", "values": ["h100"]})), False),
        (affinity(term({"key": "zone", "operator": "NotIn", "values": ["a"]})), True),
        (affinity(term({"key": "sku", "operator": "Exists"})), True),
        (affinity(term({"key": "sku", "operator": "DoesNotExist"})), False),
        (affinity(term({"key": "gpus", "operator": "Gt", "values": ["4"]})), True),
        (affinity(term({"key": "gpus", "operator": "Lt", "values": ["4"]})), False),
        (
            affinity(
                term({"key": "sku", "operator": "In", "values": ["a100"]}),
                term({"key": "pool", "operator": "Exists"}),
            ),
            True,
        ),
        (affinity(term()), False),  # an empty term matches nothing
        (affinity(), False),  # required affinity with no terms matches nothing
    ],
)
def test_selects(spec: dict[str, Any], expected: bool) -> None:
    assert selects(spec, LABELS) is expected


def test_declaration_labels_with_several_values() -> None:
    assert selects({"nodeSelector": {"zone": "b"}}, {"zone": ["a", "b"]})


TAINTS = [
    {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
    {"key": "dedicated", "value": "training", "effect": "NoExecute"},
    {"key": "spot", "value": "true", "effect": "PreferNoSchedule"},
]


@pytest.mark.parametrize(
    ("tolerations", "requested", "ert", "blocked"),
    [
        ([], [], False, ["nvidia.com/gpu=present:NoSchedule", "dedicated=training:NoExecute"]),
        ([{"operator": "Exists"}], [], False, []),
        (
            [
                {"key": "nvidia.com/gpu", "operator": "Exists"},
                {"key": "dedicated", "value": "training"},
            ],
            [],
            False,
            [],
        ),
        (
            [{"key": "dedicated", "value": "other"}],
            [],
            False,
            ["nvidia.com/gpu=present:NoSchedule", "dedicated=training:NoExecute"],
        ),
        (
            [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}],
            [],
            False,
            ["nvidia.com/gpu=present:NoSchedule", "dedicated=training:NoExecute"],
        ),
        ([{"key": "dedicated", "operator": "Exists"}], ["nvidia.com/gpu"], True, []),
        (
            [{"key": "dedicated", "operator": "Exists"}],
            ["nvidia.com/gpu"],
            False,
            ["nvidia.com/gpu=present:NoSchedule"],
        ),
    ],
)
def test_untolerated(
    tolerations: list[dict[str, Any]], requested: list[str], ert: bool, blocked: list[str]
) -> None:
    assert untolerated(TAINTS, tolerations, requested, ert) == blocked


@pytest.mark.parametrize(
    ("selection", "declared", "live"),
    [
        # Labels every node gets when it joins: a declaration cannot decide them.
        ({"nodeSelector": {"sku": "h100", "kubernetes.io/os": "linux"}}, True, False),
        ({"nodeSelector": {"sku": "h100", "topology.kubernetes.io/zone": "us-east-1a"}}, True, False),
        ({"nodeSelector": {"sku": "h100", "nvidia.com/gpu.product": "NVIDIA-H100"}}, True, False),
        (
            {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]},
                    {"key": "sku", "operator": "In", "values": ["h100"]},
                ]}]}}}},
            True,
            False,
        ),
        # A label the declaration lists decides; so does any key outside those domains.
        ({"nodeSelector": {"sku": "b200", "kubernetes.io/os": "linux"}}, False, False),
        ({"nodeSelector": {"node.kubernetes.io/instance-type": "g6.xlarge"}}, False, False),
        ({"nodeSelector": {"skuu": "h100"}}, False, False),
    ],
)  # fmt: skip
def test_a_declaration_does_not_decide_labels_nodes_get_when_they_join(
    selection: dict[str, Any], declared: bool, live: bool
) -> None:
    labels = {"sku": ["h100"], "node.kubernetes.io/instance-type": ["p5.48xlarge"]}
    assert selects(selection, labels, declaration=True) is declared
    assert selects(selection, labels) is live  # a live Node carries every label it has
