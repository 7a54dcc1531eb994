from __future__ import annotations

from typing import Any

import pytest

from scanner.config.values import Config
from scanner.inventory import KubeObject, LineMap, Origin
from scanner.model.index import ObjectIndex
from scanner.model.namespaces import build_namespaces, default_deny, policy_types
from scanner.model.workloads import build_workloads


def obj(body: dict[str, Any], *, context: bool = False) -> KubeObject:
    return KubeObject(body, Origin("test.yaml"), LineMap({}), context_only=context)


def namespace(name: str, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def pod(name: str, namespace: str | None, gpu: bool = True) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "c", "image": "busybox"}
    if gpu:
        container["resources"] = {"limits": {"nvidia.com/gpu": 1}}
    meta: dict[str, Any] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {"containers": [container]},
    }


def netpol(name: str, spec: dict[str, Any], namespace: str = "team") -> KubeObject:
    return obj(
        {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "NetworkPolicy",
            "metadata": {"name": name, "namespace": namespace},
            "spec": spec,
        }
    )


def build(*bodies: dict[str, Any], config: Config | None = None) -> Any:
    objects = [obj(body) for body in bodies]
    workloads, _ = build_workloads(objects)
    return build_namespaces(ObjectIndex(objects), workloads, config or Config()), workloads


def test_workload_gets_its_namespace_facts_and_known_reflects_scope() -> None:
    namespaces, workloads = build(namespace("team", team="a"), pod("p", "team"), pod("q", "other"))
    team, other = (w.facts["ns"] for w in workloads)
    assert team["known"] and team["labels"] == {"team": "a"}
    assert not other["known"] and other["labels"] == {}
    assert [o.name for o, _ in namespaces.subjects] == ["team"]


def test_trust_domain_label_own_name_and_platform() -> None:
    config = Config(trust_domain_label="acme/trust")
    namespaces, _ = build(
        namespace("a", **{"acme/trust": "research"}),
        namespace("b"),
        namespace("gpu-operator", **{"acme/trust": "tenant"}),
        config=config,
    )
    assert namespaces.get("a")["trustDomain"] == "research"
    assert namespaces.get("b")["trustDomain"] == "b"
    assert namespaces.get("gpu-operator")["trustDomain"] == "platform"
    assert namespaces.get("gpu-operator")["operator"] and namespaces.get("gpu-operator")["platform"]
    assert namespaces.get("kube-system")["system"] and namespaces.get("kube-system")["platform"]
    assert not namespaces.get("kube-system")["known"]


def test_pss_and_sigstore_opt_in_labels() -> None:
    namespaces, _ = build(
        namespace(
            "a",
            **{
                "pod-security.kubernetes.io/enforce": "baseline",
                "policy.sigstore.dev/include": "true",
            },
        ),
        namespace("b", **{"policy.sigstore.dev/include": "false"}),
    )
    assert namespaces.get("a")["pssEnforce"] == "baseline"
    assert namespaces.get("a")["signatureOptIn"]
    assert namespaces.get("b")["pssEnforce"] == ""
    assert not namespaces.get("b")["signatureOptIn"]


def test_gpu_workloads_are_counted_and_a_manifest_without_namespace_is_default() -> None:
    namespaces, _ = build(
        namespace("default"), pod("a", None), pod("b", "default"), pod("cpu", "default", gpu=False)
    )
    assert namespaces.get("default")["gpuWorkloads"] == {"count": 2, "names": ["Pod/a", "Pod/b"]}


def test_scanned_namespace_is_the_join_source_over_a_context_copy() -> None:
    objects = [
        obj(namespace("team", source="context"), context=True),
        obj(namespace("team", source="scan")),
    ]
    result = build_namespaces(ObjectIndex(objects), [], Config())
    assert result.get("team")["labels"] == {"source": "scan"}
    # every Namespace document is a subject, judged on its own labels
    assert [facts["labels"]["source"] for _, facts in result.subjects] == ["context", "scan"]


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"podSelector": {}}, ["Ingress"]),
        ({"podSelector": {}, "egress": []}, ["Ingress"]),
        ({"podSelector": {}, "egress": [{"to": []}]}, ["Ingress", "Egress"]),
        ({"podSelector": {}, "policyTypes": ["Egress"]}, ["Egress"]),
        ({"podSelector": {}, "policyTypes": []}, ["Ingress"]),
    ],
)
def test_policy_types_default_like_the_api_server(
    spec: dict[str, Any], expected: list[str]
) -> None:
    assert policy_types(spec) == expected


DNS_ONLY = {
    "to": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}}}],
    "ports": [{"protocol": "UDP", "port": 53}],
}


@pytest.mark.parametrize(
    ("specs", "expected"),
    [
        ([{"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}], (True, True)),
        ([{"podSelector": {}}], (True, False)),
        ([{"podSelector": {}}, {"podSelector": {}, "policyTypes": ["Egress"]}], (True, True)),
        (
            [{"podSelector": {}, "policyTypes": ["Ingress", "Egress"], "egress": [DNS_ONLY]}],
            (True, True),
        ),
        # allow-all rules on a select-all policy undo the deny
        (
            [{"podSelector": {}, "policyTypes": ["Ingress", "Egress"], "egress": [{}]}],
            (True, False),
        ),
        ([{"podSelector": {}, "ingress": [{"from": [{"namespaceSelector": {}}]}]}], (False, False)),
        (
            [
                {
                    "podSelector": {},
                    "policyTypes": ["Egress"],
                    "egress": [{"to": [{"ipBlock": {"cidr": "0.0.0.0/0"}}]}],
                }
            ],
            (False, False),
        ),
        # ... but an ipBlock with exceptions, or a port restriction, is not allow-all
        (
            [
                {
                    "podSelector": {},
                    "policyTypes": ["Egress"],
                    "egress": [
                        {
                            "to": [
                                {"ipBlock": {"cidr": "0.0.0.0/0", "except": ["169.254.169.254/32"]}}
                            ]
                        }
                    ],
                }
            ],
            (False, True),
        ),
        ([{"podSelector": {}, "ingress": [{"ports": [{"port": 8000}]}]}], (True, False)),
        # a policy selecting some pods is not a default deny, and its allow-all is an exception
        (
            [{"podSelector": {"matchLabels": {"app": "x"}}, "policyTypes": ["Ingress", "Egress"]}],
            (False, False),
        ),
        (
            [
                {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]},
                {"podSelector": {"matchLabels": {"app": "web"}}, "ingress": [{}]},
            ],
            (True, True),
        ),
    ],
)
def test_default_deny(specs: list[dict[str, Any]], expected: tuple[bool, bool]) -> None:
    assert default_deny([netpol(f"p{i}", spec) for i, spec in enumerate(specs)]) == expected


def test_default_deny_facts_and_netpols_known() -> None:
    objects = [
        obj(namespace("team")),
        netpol("deny", {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}),
        netpol("other-ns", {"podSelector": {}}, namespace="elsewhere"),
    ]
    result = build_namespaces(ObjectIndex(objects), [], Config())
    team = result.get("team")
    assert team["defaultDeny"] and team["netpolsKnown"] and team["networkPolicies"] == ["deny"]
    assert not result.get("elsewhere")["defaultDeny"] and result.get("elsewhere")["netpolsKnown"]
    assert not result.get("nowhere")["netpolsKnown"]
