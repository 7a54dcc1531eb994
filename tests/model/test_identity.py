from __future__ import annotations

from typing import Any

import pytest

from scanner.config.values import Config
from scanner.inventory import KubeObject, LineMap, Origin
from scanner.model.identity import attach_service_accounts, service_account_facts
from scanner.model.index import ObjectIndex
from scanner.model.workloads import build_workloads
from scanner.sources.yaml.document import parse_plain


def obj(body: dict[str, Any]) -> KubeObject:
    return KubeObject(body, Origin("test.yaml"), LineMap({}))


def account(name: str, namespace: str | None = "ml", **annotations: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "annotations": annotations}
    if namespace is not None:
        meta["namespace"] = namespace
    return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta}


def pod(
    sa: str | None, namespace: str = "ml", labels: dict[str, str] | None = None
) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "x"}]}
    if sa is not None:
        spec["serviceAccountName"] = sa
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": namespace, "labels": labels or {}},
        "spec": spec,
    }


def service_account_of(*bodies: dict[str, Any], config: Config | None = None) -> dict[str, Any]:
    objects = [obj(body) for body in bodies]
    workloads, _ = build_workloads(objects)
    attach_service_accounts(workloads, ObjectIndex(objects), config or Config())
    facts: dict[str, Any] = workloads[0].facts["serviceAccount"]
    return facts


@pytest.mark.parametrize(
    ("key", "provider"),
    [
        ("iam.gke.io/gcp-service-account", "gcp"),
        ("eks.amazonaws.com/role-arn", "aws"),
    ],
)
def test_cloud_annotations_bind_an_identity(key: str, provider: str) -> None:
    facts = service_account_of(pod("trainer"), account("trainer", **{key: "id-1"}))
    assert facts == {
        "name": "trainer",
        "known": True,
        "identity": "id-1",
        "provider": provider,
        "hint": "",
    }


def test_azure_needs_the_pod_label() -> None:
    sa = account("t", **{"azure.workload.identity/client-id": "guid"})
    without = service_account_of(pod("t"), sa)
    assert without["identity"] == "" and "azure.workload.identity/use" in without["hint"]
    with_label = service_account_of(pod("t", labels={"azure.workload.identity/use": "true"}), sa)
    assert with_label["identity"] == "guid" and with_label["provider"] == "azure"
    assert with_label["hint"] == ""


def test_config_listed_keys_count_and_empty_values_do_not() -> None:
    config = Config(workload_identity_keys=("acme.example/vault-role",))
    custom = service_account_of(
        pod("t"), account("t", **{"acme.example/vault-role": "ml"}), config=config
    )
    assert (custom["identity"], custom["provider"]) == ("ml", "custom")
    empty = service_account_of(pod("t"), account("t", **{"iam.gke.io/gcp-service-account": " "}))
    assert empty["identity"] == "" and empty["known"]


def test_no_service_account_name_means_default_and_scope_decides_known() -> None:
    assert service_account_of(pod(None)) == {
        "name": "default",
        "known": False,
        "identity": "",
        "provider": "",
        "hint": "",
    }
    assert service_account_of(pod(None), account("default"))["known"]
    # a ServiceAccount of the same name in another namespace is another account
    assert not service_account_of(pod("t"), account("t", namespace="other"))["known"]
    # a manifest without namespace lands in default
    assert service_account_of(pod("t", namespace="default"), account("t", namespace=None))["known"]


def test_service_account_facts_without_metadata() -> None:
    assert service_account_facts("x", None, {})["known"] is False


def test_eks_pod_identity_accounts_listed_in_config_are_bound() -> None:
    """EKS Pod Identity associations made with Terraform leave no object in the
    cluster: config ``workloadIdentityAccounts`` lists the accounts (globs)."""
    from scanner.config.values import Config
    from scanner.model import build_model
    from scanner.sources.yaml.document import parse_stream

    text = (
        "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: trainer, namespace: batch-7}\n"
        "---\napiVersion: v1\nkind: ServiceAccount\nmetadata: {name: web, namespace: apps}\n"
        "---\napiVersion: v1\nkind: Pod\nmetadata: {name: a, namespace: batch-7}\n"
        "spec: {serviceAccountName: trainer, containers: [{name: c}]}\n"
        "---\napiVersion: v1\nkind: Pod\nmetadata: {name: b, namespace: apps}\n"
        "spec: {serviceAccountName: web, containers: [{name: c}]}\n"
    )
    config = Config(workload_identity_accounts=("batch-*/*",))
    model = build_model(parse_stream(text, "t.yaml"), config, defer=False, read_yaml=parse_plain)
    accounts = {w.obj.name: w.facts["serviceAccount"] for w in model.workloads}
    assert (accounts["a"]["identity"], accounts["a"]["provider"]) == (
        "config workloadIdentityAccounts",
        "external",
    )
    assert accounts["b"]["identity"] == ""
