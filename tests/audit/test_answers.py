"""Answers a real API server should never give, and one it may: each is a failed read
of the kinds it concerns (a notification, exit code 3, the kind not recorded as
listed), never an empty kind.

No Kubernetes cluster is available where these tests run. The HTTPS API server of
``tests/audit/apiserver.py`` is told to give these answers on one path
(``Behaviour.replies``); poolgate reaches it through the official ``kubernetes`` client
and a real kubeconfig, the same code path as against a real cluster.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .apiserver import DEFAULT_KINDS, ApiServer, Pki, _k, write_kubeconfig
from .conftest import CONTEXT, TOKEN, cli, objects, poolgate


@pytest.fixture
def clean(pki: Pki) -> Iterator[ApiServer]:
    """The clean cluster: no findings, so a failed read shows as exit code 3."""
    with ApiServer(objects("clean"), pki, TOKEN) as server:
        yield server


def kubeconfig_for(server: ApiServer, pki: Pki, tmp_path: Path) -> str:
    return str(write_kubeconfig(tmp_path / "kubeconfig", server.url, pki.ca, CONTEXT, token=TOKEN))


def answer(body: Any, status: int = 200) -> Any:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    return lambda query: (status, data)


def audit_json(config: str, *extra: str) -> tuple[int, dict[str, Any]]:
    result = cli("audit", "--kubeconfig", config, "--format", "json", *extra)
    assert "Traceback" not in result.stderr, result.stderr
    return result.returncode, json.loads(result.stdout)


POD_LIST = {"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": "1"}}
NOT_A_LIST = {
    "status-200": (
        {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"},
        "the answer is a Status, not a list (Success)",
    ),
    "empty-object": ({}, "the answer is not a list: items is missing"),
    # kube-apiserver sends "items": [] for an empty list (meta.SetList): null is broken.
    "items-null": ({**POD_LIST, "items": None}, "items is null, not a list"),
    "items-string": ({**POD_LIST, "items": "oops"}, "items is a string, not a list"),
    "items-object": (
        {**POD_LIST, "items": {"a": {"metadata": {"name": "x"}}}},
        "items is an object, not a list",
    ),
    "item-not-object": ({**POD_LIST, "items": [7]}, "item 0 is a number"),
}


@pytest.mark.parametrize("case", list(NOT_A_LIST))
def test_a_list_answer_that_is_not_a_list_is_a_failed_read(
    clean: ApiServer, pki: Pki, tmp_path: Path, case: str
) -> None:
    body, reason = NOT_A_LIST[case]
    config = kubeconfig_for(clean, pki, tmp_path)
    clean.behaviour.replies["/api/v1/pods"] = answer(body)
    code, document = audit_json(config)
    assert code == 3, document
    [note] = document["notifications"]
    assert note["message"].startswith("cannot list Pod: failed: 200 OK, but "), note
    assert reason in note["message"]
    assert len(clean.queries("/api/v1/pods")) == 1  # a definite answer: not retried
    snap = tmp_path / "snap.json"
    taken = cli("snapshot", "--kubeconfig", config, "-o", str(snap))
    assert taken.returncode == 3
    listed = json.loads(snap.read_text())["metadata"]["annotations"]["poolgate.io/listed"]
    assert "Pod" not in listed.split(",")


def test_a_status_instead_of_pods_never_resolves_pod_findings(
    lab: ApiServer, kubeconfig: Path, tmp_path: Path
) -> None:
    last_night = tmp_path / "last.json"
    cli("audit", "--kubeconfig", str(kubeconfig), "--format", "json", "-o", str(last_night))
    lab.behaviour.replies["/api/v1/pods"] = answer(NOT_A_LIST["status-200"][0])
    _, document = audit_json(str(kubeconfig), "--compare", str(last_night))
    drift = document["drift"]
    assert not [f for f in drift["resolved"] if f["object"]["kind"] == "Pod"]
    assert [f for f in drift["unverified"] if f["object"]["kind"] == "Pod"]


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ({}, "the discovery document's resources is missing"),
        (
            {"kind": "APIResourceList", "resources": None},
            "the discovery document's resources is null, not a list",
        ),
    ],
)
def test_a_group_version_document_without_resources_is_a_failed_read(
    clean: ApiServer, pki: Pki, tmp_path: Path, body: Any, reason: str
) -> None:
    clean.behaviour.replies["/apis/apps/v1"] = answer(body)
    code, document = audit_json(kubeconfig_for(clean, pki, tmp_path))
    assert code == 3
    notes = [n["message"] for n in document["notifications"]]
    assert {n.split(":")[0] for n in notes} == {
        "cannot list Deployment.apps",
        "cannot list ReplicaSet.apps",
        "cannot list StatefulSet.apps",
        "cannot list DaemonSet.apps",
    }
    assert all(f"discovery of /apis/apps/v1: 200 OK, but {reason}" in n for n in notes)


def test_a_group_without_versions_is_a_failed_read(
    clean: ApiServer, pki: Pki, tmp_path: Path
) -> None:
    groups = clean._discovery(["apis"])
    for group in groups["groups"]:
        if group["name"] == "apps":
            group["versions"] = None
    clean.behaviour.replies["/apis"] = answer(groups)
    code, document = audit_json(kubeconfig_for(clean, pki, tmp_path))
    assert code == 3
    notes = [n["message"] for n in document["notifications"]]
    assert len(notes) == 4 and all(
        ".apps: failed: discovery: /apis lists API group apps" in n for n in notes
    )


@pytest.mark.parametrize(
    ("path", "body", "reason"),
    [
        ("/apis", {"kind": "APIGroupList", "groups": None}, "groups is null, not a list"),
        ("/api", {"kind": "APIVersions"}, "versions is missing"),
    ],
)
def test_a_root_discovery_document_without_its_list_is_one_error_line(
    clean: ApiServer, pki: Pki, tmp_path: Path, path: str, body: Any, reason: str
) -> None:
    clean.behaviour.replies[path] = answer(body)
    result = cli("audit", "--kubeconfig", kubeconfig_for(clean, pki, tmp_path))
    assert result.returncode == 2
    [line] = result.stderr.splitlines()
    assert line.startswith(f"poolgate: error: cannot read API discovery ({path}) from ")
    assert reason in line


def test_a_continue_token_that_repeats_stops_the_list(
    clean: ApiServer, pki: Pki, tmp_path: Path
) -> None:
    """A proxy (or an aggregated API) that hands back the token it was given would page
    forever: the kind is a failed read, and the audit ends."""
    page = {
        **POD_LIST,
        "metadata": {"continue": "same-token"},
        "items": [{"metadata": {"name": "p", "namespace": "default"}, "spec": {}}],
    }
    clean.behaviour.replies["/api/v1/pods"] = answer(page)
    result = poolgate(
        "audit",
        "--kubeconfig",
        kubeconfig_for(clean, pki, tmp_path),
        "--format",
        "json",
        timeout=60,
    )
    assert result.returncode == 3, result.stderr
    [note] = json.loads(result.stdout)["notifications"]
    assert note["message"].startswith(
        "cannot list Pod: failed: the server repeated a continue token after 2 objects"
    )
    assert len(clean.queries("/api/v1/pods")) == 2


def test_endless_empty_pages_stop_the_list(clean: ApiServer, pki: Pki, tmp_path: Path) -> None:
    """A server that answers every page with no object and a new continue token would
    page until the CronJob's deadline: after EMPTY_PAGES_LIMIT such pages the kind is a
    failed read (found in review)."""
    from scanner.sources.cluster import EMPTY_PAGES_LIMIT

    served: list[int] = []

    def endless(query: dict[str, list[str]]) -> tuple[int, bytes]:
        served.append(1)
        page = {**POD_LIST, "metadata": {"continue": f"token-{len(served)}"}, "items": []}
        return 200, json.dumps(page).encode()

    clean.behaviour.replies["/api/v1/pods"] = endless
    code, document = audit_json(kubeconfig_for(clean, pki, tmp_path))
    assert code == 3
    [note] = document["notifications"]
    assert note["message"].startswith(
        f"cannot list Pod: failed: the server answered {EMPTY_PAGES_LIMIT} pages in a row "
        "with no object and a new continue token, after 0 objects"
    )
    assert len(served) == EMPTY_PAGES_LIMIT


def test_a_kind_served_only_at_an_unknown_version_is_named(pki: Pki, tmp_path: Path) -> None:
    """Kubernetes 1.31 with DRA on serves resource.k8s.io at v1alpha3 only: the claims
    exist but poolgate cannot read them. Not "none", not listed: a notification."""
    kinds = (
        *(kind for kind in DEFAULT_KINDS if kind.group != "resource.k8s.io"),
        _k("resource.k8s.io/v1alpha3", "ResourceClaim", "resourceclaims", True),
        _k("resource.k8s.io/v1alpha3", "DeviceClass", "deviceclasses", False),
    )
    with ApiServer(objects("clean"), pki, TOKEN, kinds=kinds) as server:
        config = kubeconfig_for(server, pki, tmp_path)
        code, document = audit_json(config)
        snap = tmp_path / "snap.json"
        taken = cli("snapshot", "--kubeconfig", config, "-o", str(snap))
    assert code == 3
    notes = {n["message"].split(":")[0]: n["message"] for n in document["notifications"]}
    assert set(notes) == {
        "cannot list ResourceClaim.resource.k8s.io",
        "cannot list DeviceClass.resource.k8s.io",
    }
    assert notes["cannot list ResourceClaim.resource.k8s.io"].startswith(
        "cannot list ResourceClaim.resource.k8s.io: unsupported version: resource.k8s.io "
        "serves ResourceClaim at v1alpha3 only; poolgate reads it at v1, v1beta2, v1beta1"
    )
    listed = json.loads(snap.read_text())["metadata"]["annotations"]["poolgate.io/listed"]
    assert "ResourceClaim.resource.k8s.io" not in listed.split(",")
    # Not served at any version: still simply none.
    assert "ResourceClaimTemplate.resource.k8s.io" in listed.split(",")
    assert taken.returncode == 3
    assert "could not list ResourceClaim.resource.k8s.io: unsupported version" in taken.stderr


def test_a_version_whose_discovery_fails_does_not_make_a_kind_none(
    pki: Pki, tmp_path: Path
) -> None:
    """resource.k8s.io served at v1alpha3 only, and its discovery document refused:
    whether ResourceClaims are there cannot be told, so the kind is not listed as
    complete with none (found in review: the failure read as "not served there")."""
    kinds = (
        *(kind for kind in DEFAULT_KINDS if kind.group != "resource.k8s.io"),
        _k("resource.k8s.io/v1alpha3", "ResourceClaim", "resourceclaims", True),
    )
    status = b'{"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 403}'
    with ApiServer(objects("clean"), pki, TOKEN, kinds=kinds) as server:
        server.behaviour.replies["/apis/resource.k8s.io/v1alpha3"] = lambda _: (403, status)
        config = kubeconfig_for(server, pki, tmp_path)
        snap = tmp_path / "snap.json"
        taken = cli("snapshot", "--kubeconfig", config, "-o", str(snap))
    assert taken.returncode == 3, taken.stderr
    listed = json.loads(snap.read_text())["metadata"]["annotations"]["poolgate.io/listed"]
    for kind in ("ResourceClaim", "ResourceClaimTemplate", "DeviceClass"):
        assert f"{kind}.resource.k8s.io" not in listed.split(","), kind
    assert "could not list ResourceClaim.resource.k8s.io" in taken.stderr


def test_a_group_gone_since_apis_is_simply_none(clean: ApiServer, pki: Pki, tmp_path: Path) -> None:
    """The GPU Operator's CRD deleted between /apis and /apis/nvidia.com/v1: no
    ClusterPolicy, as a list's 404 says, not a failed read and exit code 3."""
    status = b'{"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 404}'
    clean.behaviour.replies["/apis/nvidia.com/v1"] = lambda _: (404, status)
    snap = tmp_path / "snap.json"
    taken = cli("snapshot", "--kubeconfig", kubeconfig_for(clean, pki, tmp_path), "-o", str(snap))
    assert taken.returncode == 0, taken.stderr
    listed = json.loads(snap.read_text())["metadata"]["annotations"]["poolgate.io/listed"]
    assert "ClusterPolicy.nvidia.com" in listed.split(",")


@pytest.mark.parametrize("scheme", ["Bearer", "bearer", "BEARER"])
def test_the_test_server_reads_the_bearer_scheme_case_insensitively(
    lab: ApiServer, pki: Pki, scheme: str
) -> None:
    """RFC 6750 (with RFC 7235): the auth scheme is case-insensitive, as kube-apiserver
    reads it; the client's in-cluster loader sends ``bearer``."""
    import ssl
    import urllib.request

    context = ssl.create_default_context(cafile=str(pki.ca))
    request = urllib.request.Request(
        f"{lab.url}/api", headers={"Authorization": f"{scheme} {TOKEN}"}
    )
    with urllib.request.urlopen(request, context=context) as response:
        assert response.status == 200
