"""The label index that joins workloads to pools (scanner/model/labelindex.py) narrows
the search and changes no answer.

* Property: every entry holding a member that ``targeting.selects`` admits (a
  declaration with ``declaration=True``) is among ``LabelIndex.candidates``.
* Equivalence: on generated clusters of Nodes, Karpenter NodePools and GPU pods
  (selectors with ``In``/``NotIn``/``Exists``/``DoesNotExist``/``Gt``/``Lt``, runtime
  labels, taints and tolerations), the model's targets, ``nonGpuMatches``,
  diagnoses and pool tenants are the same through the index as through the plain
  pairwise join (every pool checked, ``candidates`` answering None).
* Cost: 400 NodePools each selected by one Deployment make a few hundred selector
  checks, not 160,000 (counted, not timed).
"""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scanner.config.values import Config
from scanner.model import build_model, pools
from scanner.model.labelindex import LabelIndex
from scanner.model.targeting import selects
from scanner.sources.snapshot import Capture, to_inventory
from scanner.sources.yaml.document import parse_plain

KEYS = [
    "pool",
    "sku",
    "gpus",
    "karpenter.sh/nodepool",  # runtime: a declaration that lacks it is undecided on it
    "nvidia.com/gpu.product",
    "kubernetes.io/hostname",
]
VALUES = ["a", "b", "c", "1", "8"]
OPERATORS = ["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Bogus"]

keys = st.sampled_from(KEYS)
values = st.sampled_from(VALUES)
# Few keys and values for the index alone, so that selections often meet labels.
few_keys = st.sampled_from(["pool", "sku", "karpenter.sh/nodepool"])
few_values = st.sampled_from(["a", "1"])


def selections(
    keys: st.SearchStrategy[str], values: st.SearchStrategy[str]
) -> st.SearchStrategy[dict[str, Any]]:
    """Pod specs with a nodeSelector, required node-affinity terms, both or neither."""
    expressions = st.fixed_dictionaries(
        {"key": keys, "operator": st.sampled_from(OPERATORS)},
        optional={"values": st.lists(values, max_size=3)},
    )
    fields = [{"key": "metadata.name", "operator": "In", "values": ["n"]}]
    terms = st.fixed_dictionaries(
        {"matchExpressions": st.lists(expressions, min_size=1, max_size=3)},
        optional={"matchFields": st.just(fields)},
    ) | st.sampled_from([{}, {"matchFields": fields}, {"matchExpressions": []}])
    return st.fixed_dictionaries(
        {},
        optional={
            "nodeSelector": st.dictionaries(keys, values, max_size=2),
            "affinity": st.lists(terms, max_size=2).map(
                lambda ts: {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": ts}
                    }
                }
            ),
        },
    )


members = st.fixed_dictionaries(
    {
        "labels": st.dictionaries(few_keys, st.lists(few_values, max_size=2), max_size=3),
        "source": st.sampled_from(["node", "declaration"]),
    }
)
entries = st.lists(st.lists(members, min_size=1, max_size=3), max_size=6)
pod_specs = selections(keys, values)


@settings(max_examples=500, deadline=None)
@given(entries, selections(few_keys, few_values))
def test_candidates_hold_every_entry_the_selection_admits(
    found: list[list[dict[str, Any]]], pod_spec: dict[str, Any]
) -> None:
    index = LabelIndex(found)
    admitted = [
        position
        for position, group in enumerate(found)
        if any(
            selects(pod_spec, m["labels"], declaration=m["source"] == "declaration") for m in group
        )
    ]
    candidates = index.candidates(pod_spec)
    if candidates is not None:
        assert list(candidates) == sorted(set(candidates))
        assert set(admitted) <= set(candidates), (admitted, candidates)
    # With a limit: the same list when it holds no more, else none.
    limited = index.candidates(pod_spec, 2)
    if candidates is None or len(candidates) > 2:
        assert limited is None
    else:
        assert limited == candidates


def test_a_selection_on_a_label_value_reaches_only_entries_carrying_it() -> None:
    index = LabelIndex(
        [
            [{"labels": {"pool": ["a"], "karpenter.sh/nodepool": ["a"]}, "source": "declaration"}],
            [{"labels": {"pool": ["b"], "karpenter.sh/nodepool": ["b"]}, "source": "declaration"}],
            [{"labels": {"pool": ["c"]}, "source": "declaration"}],
            [{"labels": {"pool": ["c"]}, "source": "node"}],
        ]
    )
    assert index.candidates({"nodeSelector": {"pool": "b"}}) == [1]
    # A runtime label the third declaration does not list leaves it undecided.
    assert index.candidates({"nodeSelector": {"karpenter.sh/nodepool": "a"}}) == [0, 2]
    exists = {"key": "pool", "operator": "Exists"}
    assert index.candidates(_affinity([exists])) == [0, 1, 2, 3]
    not_in = {"key": "pool", "operator": "NotIn", "values": ["a"]}
    assert index.candidates(_affinity([not_in])) is None
    assert index.candidates(_affinity([not_in], [exists])) is None  # ORed: one term is open
    absent = {"key": "pool", "operator": "DoesNotExist"}
    assert index.candidates(_affinity([absent])) is None
    assert index.candidates(_affinity([absent, exists])) == [0, 1, 2, 3]
    assert index.candidates({}) is None


def test_a_workload_that_may_reach_too_many_pools_is_not_followed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Past ``MAX_REACH`` pools a selection is not followed: its pools are unknown
    (no targets, no diagnosis, no tenant), and the model names the workload."""
    monkeypatch.setattr(pools, "MAX_REACH", 2)
    nodepools = [
        {
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodePool",
            "metadata": {"name": f"gpu-{i}"},
            "spec": {
                "template": {
                    "metadata": {"labels": {"pool": f"gpu-{i}", "sku": "h100" if i else "l4"}},
                    "spec": {"requirements": [_GPU_REQUIREMENT]},
                }
            },
        }
        for i in range(3)
    ]
    selections = {
        "pinned": {"nodeSelector": {"pool": "gpu-1"}},
        "h100": {"nodeSelector": {"sku": "h100"}},  # two pools: at the limit
        "anywhere": {},
        "not-l4": _affinity([{"key": "sku", "operator": "NotIn", "values": ["l4"]}]),
    }
    workloads = [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "ml"},
            "spec": {
                **selection,
                "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": 1}}}],
            },
        }
        for name, selection in selections.items()
    ]
    capture = Capture("test", datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC))
    capture.objects = [*nodepools, *workloads]
    model = build_model(to_inventory(capture), Config(), defer=False, read_yaml=parse_plain)
    facts = {w.obj.name: w.facts for w in model.workloads}
    assert [t["pool"] for t in facts["pinned"]["targets"]] == ["gpu-1"]
    assert [t["pool"] for t in facts["h100"]["targets"]] == ["gpu-1", "gpu-2"]
    for name in ("anywhere", "not-l4"):  # every pool may admit them: not followed
        assert (facts[name]["poolsKnown"], facts[name]["targets"]) == (False, [])
        assert facts[name]["diagnosis"] == ""
    assert model.unfollowed == ["Pod ml/anywhere", "Pod ml/not-l4"]
    monkeypatch.setattr(pools, "MAX_REACH", 100)
    model = build_model(to_inventory(capture), Config(), defer=False, read_yaml=parse_plain)
    assert not model.unfollowed
    assert all(len(w.facts["targets"]) >= 1 for w in model.workloads)


_GPU_REQUIREMENT = {
    "key": "karpenter.k8s.aws/instance-gpu-name",
    "operator": "In",
    "values": ["h100"],
}


def _affinity(*terms: list[dict[str, Any]]) -> dict[str, Any]:
    required = {"nodeSelectorTerms": [{"matchExpressions": list(t)} for t in terms]}
    return {
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}}
    }


# ---- the model through the index and through the plain join ------------------

taints = st.lists(
    st.fixed_dictionaries(
        {
            "key": st.sampled_from(["nvidia.com/gpu", "dedicated"]),
            "value": st.sampled_from(["", "present", "a"]),
            "effect": st.sampled_from(["NoSchedule", "NoExecute", "PreferNoSchedule"]),
        }
    ),
    max_size=2,
    unique_by=lambda t: (t["key"], t["effect"]),
)
tolerations = st.lists(
    st.fixed_dictionaries(
        {"operator": st.sampled_from(["Exists", "Equal"])},
        optional={
            "key": st.sampled_from(["nvidia.com/gpu", "dedicated"]),
            "value": st.sampled_from(["present", "a"]),
            "effect": st.sampled_from(["NoSchedule", "NoExecute"]),
        },
    ),
    max_size=2,
)
single_labels = st.dictionaries(keys, values, max_size=4)


@st.composite
def clusters(draw: st.DrawFn) -> list[dict[str, Any]]:
    objects: list[dict[str, Any]] = [
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": ns, "labels": {"poolgate.io/trust-domain": ns}},
        }
        for ns in ("ta", "tb")
    ]
    for i in range(draw(st.integers(0, 6))):
        node_labels = draw(single_labels)
        if draw(st.booleans()):
            node_labels["nvidia.com/gpu.present"] = "true"
        objects.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": f"n{i}", "labels": node_labels},
                "spec": {"taints": draw(taints)},
            }
        )
    for i in range(draw(st.integers(0, 6))):
        requirements = [
            {"key": key, "operator": "In", "values": draw(st.lists(values, min_size=1, max_size=2))}
            for key in draw(st.lists(st.sampled_from(["zone", "sku", "gpus"]), max_size=2))
        ]
        if draw(st.booleans()):  # a GPU NodePool
            requirements.append(
                {"key": "karpenter.k8s.aws/instance-gpu-name", "operator": "In", "values": ["h100"]}
            )
        objects.append(
            {
                "apiVersion": "karpenter.sh/v1",
                "kind": "NodePool",
                "metadata": {"name": f"np{i}"},
                "spec": {
                    "template": {
                        "metadata": {"labels": draw(single_labels)},
                        "spec": {"requirements": requirements, "taints": draw(taints)},
                    }
                },
            }
        )
    for i in range(draw(st.integers(1, 8))):
        spec = draw(pod_specs)
        spec["tolerations"] = draw(tolerations)
        resource = draw(st.sampled_from(["nvidia.com/gpu", "nvidia.com/gpu.shared"]))
        spec["containers"] = [{"name": "c", "image": "x", "resources": {"limits": {resource: 1}}}]
        objects.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"p{i}",
                    "namespace": draw(st.sampled_from(["ta", "tb", "tc"])),
                },
                "spec": spec,
            }
        )
    return objects


def _joined(objects: list[dict[str, Any]]) -> Any:
    # As an audit reads them (no YAML: its caches would grow with every example).
    capture = Capture("test", datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC), objects)
    model = build_model(to_inventory(capture), Config(), defer=False, read_yaml=parse_plain)
    return (
        [
            (w.obj.name, w.facts["targets"], w.facts["nonGpuMatches"], w.facts["diagnosis"])
            for w in model.workloads
        ],
        [(p.facts["name"], p.facts["tenants"], p.facts["trustDomains"]) for p in model.pools],
    )


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters())
def test_targets_through_the_index_are_those_of_the_plain_join(
    objects: list[dict[str, Any]],
) -> None:
    indexed = _joined(objects)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(LabelIndex, "candidates", lambda self, pod_spec, limit=None: None)
        plain = _joined(objects)
    assert indexed == plain


def test_one_deployment_per_nodepool_checks_each_pool_once(monkeypatch: Any) -> None:
    """Found as issue 21 item 12: 4,000 NodePools with 4,000 Deployments each pinned
    to one of them took 31 s, a selector check per pair."""
    calls = 0
    real = pools.selects

    def counted(*args: Any, **kwargs: Any) -> bool:
        nonlocal calls
        calls += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(pools, "selects", counted)
    count = 400
    objects: list[dict[str, Any]] = []
    for i in range(count):
        objects.append(
            {
                "apiVersion": "karpenter.sh/v1",
                "kind": "NodePool",
                "metadata": {"name": f"gpu-{i}"},
                "spec": {
                    "template": {
                        "metadata": {"labels": {"pool": f"gpu-{i}"}},
                        "spec": {
                            "requirements": [
                                {
                                    "key": "karpenter.k8s.aws/instance-gpu-name",
                                    "operator": "In",
                                    "values": ["h100"],
                                }
                            ],
                            "taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}],
                        },
                    }
                },
            }
        )
        # Half select by their own label, half by the one Karpenter gives the nodes.
        selector = {"pool" if i % 2 else "karpenter.sh/nodepool": f"gpu-{i}"}
        objects.append(
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": f"app-{i}", "namespace": "ml"},
                "spec": {
                    "selector": {"matchLabels": {"app": f"app-{i}"}},
                    "template": {
                        "metadata": {"labels": {"app": f"app-{i}"}},
                        "spec": {
                            "nodeSelector": selector,
                            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
                            "containers": [
                                {"name": "c", "resources": {"limits": {"nvidia.com/gpu": 1}}}
                            ],
                        },
                    },
                },
            }
        )
    workloads, _ = _joined(objects)
    assert [(name, [t["pool"] for t in targets]) for name, targets, _, _ in workloads] == [
        (f"app-{i}", [f"gpu-{i}"]) for i in range(count)
    ]
    assert calls <= 2 * count  # pair by pair: 2 x 400 x 400
