from __future__ import annotations

from typing import Any

import pytest

from scanner.config.values import Config
from scanner.inventory import KubeObject, LineMap, Origin
from scanner.model.index import ObjectIndex
from scanner.model.namespaces import namespace_facts
from scanner.model.signatures import Target, collect_policies, coverage, signature_facts

TARGET = Target("Deployment", "train", {}, {"app": "train"}, {})


def obj(body: dict[str, Any]) -> KubeObject:
    return KubeObject(body, Origin("test.yaml"), LineMap({}))


def ns(
    name: str = "ml", known: bool = True, labels: dict[str, str] | None = None, **more: str
) -> dict[str, Any]:
    labels = {**(labels or {}), **more}
    body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}
    return namespace_facts(name, obj(body) if known else None, (), (), Config())


def cip(*globs: str, api: str = "policy.sigstore.dev/v1beta1", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": api,
        "kind": "ClusterImagePolicy",
        "metadata": {"name": "cip"},
        "spec": {"images": [{"glob": g} for g in globs], **spec},
    }


def kyverno(
    references: list[str],
    *,
    kind: str = "ClusterPolicy",
    namespace: str | None = None,
    match: dict[str, Any] | None = None,
    exclude: dict[str, Any] | None = None,
    action: str = "Enforce",
    **verify: Any,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "verify"}
    if namespace:
        meta["namespace"] = namespace
    rule: dict[str, Any] = {
        "name": "r",
        "match": match if match is not None else {"any": [{"resources": {"kinds": ["Pod"]}}]},
        "verifyImages": [{"imageReferences": references, **verify}],
    }
    if exclude is not None:
        rule["exclude"] = exclude
    return {
        "apiVersion": "kyverno.io/v1",
        "kind": kind,
        "metadata": meta,
        "spec": {"validationFailureAction": action, "rules": [rule]},
    }


def cover(image: str, namespace: dict[str, Any], *policies: dict[str, Any]) -> Any:
    return coverage(
        image, TARGET, namespace, collect_policies(ObjectIndex([obj(p) for p in policies]))
    )


OPTED_IN = {"policy.sigstore.dev/include": "true"}


def test_cluster_image_policy_needs_the_namespace_opt_in() -> None:
    policy = cip("ghcr.io/acme/**")
    assert cover("ghcr.io/acme/a/b:1", ns(labels=OPTED_IN), policy).covering == (
        "ClusterImagePolicy/cip",
    )
    not_opted = cover("ghcr.io/acme/a:1", ns(), policy)
    assert not not_opted.covering and "not opted in" in not_opted.notes[0]
    unknown = cover("ghcr.io/acme/a:1", ns(known=False), policy)
    assert not unknown.covering and unknown.undecided


def test_cluster_image_policy_warn_mode_and_foreign_kinds_do_not_cover() -> None:
    warn = cover("busybox", ns(labels=OPTED_IN), cip("index.docker.io/library/*", mode="warn"))
    assert not warn.covering and "warn" in warn.notes[0]
    # OpenShift's config.openshift.io ClusterImagePolicy is another API altogether
    assert (
        collect_policies(ObjectIndex([obj(cip("**", api="config.openshift.io/v1"))])).known is False
    )


def test_cluster_image_policy_match_narrows_resources() -> None:
    train = {"matchLabels": {"app": "train"}}
    pods_only = cip("**", match=[{"version": "v1", "resource": "pods", "selector": train}])
    assert cover("busybox", ns(labels=OPTED_IN), pods_only).covering
    web = {"matchLabels": {"app": "web"}}
    other = cip("**", match=[{"version": "v1", "resource": "pods", "selector": web}])
    assert not cover("busybox", ns(labels=OPTED_IN), other).covering
    own_kind = cip("**", match=[{"group": "apps", "version": "v1", "resource": "deployments"}])
    assert cover("busybox", ns(labels=OPTED_IN), own_kind).covering


@pytest.mark.parametrize(
    ("entry", "covers"),
    [
        ({"version": "v1", "resource": "pods"}, True),
        ({"group": "", "version": "*", "resource": "pods"}, True),
        ({"group": None, "version": "v1", "resource": "pods"}, True),  # null is the core group
        # policy-controller compares the version as written: none matches nothing
        ({"resource": "pods"}, False),
        ({"version": "v2", "resource": "pods"}, False),
        ({"group": "apps", "version": "v1", "resource": "pods"}, False),
        ({"version": "v1", "resource": "deployments"}, False),  # deployments are apps/v1
        ({"group": "extensions", "version": "v1", "resource": "deployments"}, False),
        ({"group": "apps", "version": "*", "resource": "deployments"}, True),
        ({"group": "apps", "version": "v1", "resource": "statefulsets"}, False),  # not its kind
        # entries policy-controller's own table never matches (module docstring)
        ({"group": "apps", "version": "v1", "resource": "replicasets"}, False),
        ({"group": "apps", "version": "v1", "resource": "daemonsets"}, False),
    ],
)
def test_cluster_image_policy_match_compares_group_and_version(
    entry: dict[str, Any], covers: bool
) -> None:
    policy = cip("**", match=[entry])
    assert bool(cover("busybox", ns(labels=OPTED_IN), policy).covering) is covers


def test_kyverno_enforce_covers_and_audit_does_not() -> None:
    assert cover("nginx", ns(), kyverno(["docker.io/*"])).covering
    audit = cover("nginx", ns(), kyverno(["docker.io/*"], action="Audit"))
    assert not audit.covering and "audits" in audit.notes[0]
    rule_level = kyverno(["docker.io/*"], action="Audit", failureAction="Enforce")
    assert cover("nginx", ns(), rule_level).covering
    assert not cover("nginx", ns(), kyverno(["docker.io/*"], required=False)).covering
    assert not cover(
        "nginx", ns(), kyverno(["docker.io/*"], skipImageReferences=["docker.io/nginx*"])
    ).covering


def test_kyverno_legacy_image_field() -> None:
    policy = kyverno([], image="ghcr.io/acme/*")
    assert cover("ghcr.io/acme/x:1", ns(), policy).covering


def test_kyverno_default_action_is_audit_and_overrides_by_namespace() -> None:
    policy = kyverno(["docker.io/*"])
    del policy["spec"]["validationFailureAction"]
    assert not cover("nginx", ns(), policy).covering
    policy["spec"]["validationFailureActionOverrides"] = [
        {"action": "Enforce", "namespaces": ["ml*"]}
    ]
    assert cover("nginx", ns("ml-prod"), policy).covering
    assert not cover("nginx", ns("web"), policy).covering


def test_namespaced_policy_covers_only_its_namespace() -> None:
    policy = kyverno(["docker.io/*"], kind="Policy", namespace="ml")
    assert cover("nginx", ns("ml"), policy).covering
    assert not cover("nginx", ns("web"), policy).covering


@pytest.mark.parametrize(
    ("match", "namespace", "expected"),
    [
        ({"any": [{"resources": {"kinds": ["Deployment"]}}]}, ns(), True),
        ({"any": [{"resources": {"kinds": ["StatefulSet"]}}]}, ns(), False),
        ({"any": [{"resources": {"kinds": ["Pod"], "namespaces": ["ml", "prod-*"]}}]}, ns(), True),
        ({"any": [{"resources": {"kinds": ["Pod"], "namespaces": ["prod-*"]}}]}, ns(), False),
        (
            {
                "all": [
                    {"resources": {"kinds": ["Pod"]}},
                    {"resources": {"selector": {"matchLabels": {"app": "web"}}}},
                ]
            },
            ns(),
            False,
        ),
        ({"resources": {"kinds": ["Pod"], "namespaces": ["ml"]}}, ns(), True),  # pre-1.6 form
        ({"any": [{"resources": {"kinds": ["Pod"], "operations": ["UPDATE"]}}]}, ns(), False),
        (
            {
                "any": [
                    {
                        "subjects": [{"kind": "User", "name": "alice"}],
                        "resources": {"kinds": ["Pod"]},
                    }
                ]
            },
            ns(),
            False,
        ),
        (
            {"any": [{"resources": {"namespaceSelector": {"matchLabels": {"tenant": "true"}}}}]},
            ns(tenant="true"),
            True,
        ),
        (
            {"any": [{"resources": {"namespaceSelector": {"matchLabels": {"tenant": "true"}}}}]},
            ns(),
            False,
        ),
        (
            {"any": [{"resources": {"namespaceSelector": {"matchLabels": {"tenant": "true"}}}}]},
            ns(known=False),
            None,
        ),
    ],
)
def test_kyverno_match(
    match: dict[str, Any], namespace: dict[str, Any], expected: bool | None
) -> None:
    found = cover("nginx", namespace, kyverno(["docker.io/*"], match=match))
    if expected is None:
        assert not found.covering and found.undecided
    else:
        assert bool(found.covering) is expected and not found.undecided


def test_kyverno_exclude() -> None:
    by_namespace = kyverno(
        ["docker.io/*"], exclude={"any": [{"resources": {"namespaces": ["ml"]}}]}
    )
    assert not cover("nginx", ns(), by_namespace).covering
    # excluding requesters (admins) still covers everyone else
    by_role = kyverno(["docker.io/*"], exclude={"any": [{"clusterRoles": ["cluster-admin"]}]})
    assert cover("nginx", ns(), by_role).covering


def test_signature_facts_known_follows_scope_semantics() -> None:
    none = collect_policies(ObjectIndex([]))
    some = collect_policies(ObjectIndex([obj(cip("ghcr.io/acme/*"))]))
    facts = signature_facts("ghcr.io/other/x", TARGET, ns(known=False), none)
    assert not facts["covered"] and not facts["known"]  # nothing in scope at all
    assert signature_facts("ghcr.io/other/x", TARGET, ns(), none)[
        "known"
    ]  # namespace seen, not opted in
    assert not signature_facts("ghcr.io/other/x", TARGET, ns(labels=OPTED_IN), none)["known"]
    # with policies in scope: known unless the answer hangs on an unseen namespace
    assert signature_facts("ghcr.io/other/x", TARGET, ns(known=False), some)["known"]
    assert not signature_facts("ghcr.io/acme/x", TARGET, ns(known=False), some)["known"]
    covered = signature_facts("ghcr.io/acme/x", TARGET, ns(labels=OPTED_IN), some)
    assert covered == {
        "image": "ghcr.io/acme/x:latest",
        "covered": True,
        "policies": ["ClusterImagePolicy/cip"],
        "known": True,
        "reason": "",
    }
    assert signature_facts(None, TARGET, ns(), some) == {
        "image": "",
        "covered": False,
        "policies": [],
        "known": False,
        "reason": "",
    }
