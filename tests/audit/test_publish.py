"""``poolgate audit --publish-reports`` and ``--format policyreport`` against the test API server.

The server (tests/audit/apiserver.py) serves the PolicyReport CRDs when a test adds
``REPORT_KINDS`` and records every PATCH and DELETE with its content type and body, so
these tests check what a real API server would receive: server-side apply requests
(``application/apply-patch+yaml``, ``fieldManager=poolgate``, ``force=true``) whose
bodies are valid against the vendored CRD schema, deletion of poolgate's own stale
reports only, and every failure as an error notification with exit code 3.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import policyreport_crd
import pytest
import yaml

from .apiserver import DEFAULT_KINDS, REPORT_KINDS, ApiServer, Fault, Pki, Write, write_kubeconfig
from .conftest import CONTEXT, ROOT, TOKEN, cli, objects, poolgate

POLICY_REPORT, CLUSTER_POLICY_REPORT = REPORT_KINDS
BASE = "/apis/wgpolicyk8s.io/v1alpha2"
MANAGED = {"app.kubernetes.io/managed-by": "poolgate"}


def with_uids(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The lab's objects with the uids a real API server gives every object."""
    for index, item in enumerate(items):
        item["metadata"]["uid"] = f"00000000-0000-4000-8000-{index:012d}"
    return items


def report(namespace: str, name: str, labels: dict[str, str], uid: str) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "labels": labels, "uid": uid}
    kind = "PolicyReport" if namespace else "ClusterPolicyReport"
    if namespace:
        metadata["namespace"] = namespace
    return {"apiVersion": "wgpolicyk8s.io/v1alpha2", "kind": kind, "metadata": metadata}


def kubeconfig_for(server: ApiServer, pki: Pki, tmp_path: Path) -> str:
    return str(write_kubeconfig(tmp_path / "kubeconfig", server.url, pki.ca, CONTEXT, token=TOKEN))


@pytest.fixture
def reporting(pki: Pki) -> Iterator[ApiServer]:
    """The lab cluster with the PolicyReport CRDs installed, and reports from earlier
    nights: poolgate's for a namespace that has no findings any more and a split part
    that is no longer needed, and another tool's, which is not poolgate's to delete."""
    earlier = [
        report("team-gone", "poolgate", MANAGED, "stale-1"),
        report("ml-research", "poolgate-2", MANAGED, "stale-2"),
        report("", "poolgate-2", MANAGED, "stale-3"),
        report(
            "ml-research", "polr-ns-ml-research", {"app.kubernetes.io/managed-by": "kyverno"}, "k-1"
        ),
    ]
    kinds = DEFAULT_KINDS + REPORT_KINDS
    with ApiServer(with_uids(objects("lab")) + earlier, pki, TOKEN, kinds=kinds) as server:
        yield server


def patches(server: ApiServer) -> list[Write]:
    return [write for write in server.writes if write.method == "PATCH"]


def test_publish_applies_the_reports_server_side(
    reporting: ApiServer, pki: Pki, tmp_path: Path
) -> None:
    out = tmp_path / "reports.yaml"
    result = poolgate(
        "audit",
        "--kubeconfig",
        kubeconfig_for(reporting, pki, tmp_path),
        "--publish-reports",
        "--format",
        "policyreport",
        "--output",
        str(out),
    )
    assert result.returncode == 1, result.stderr  # findings; the publish went through
    assert "published 3 policy reports, deleted 3 stale ones" in result.stderr
    written = policyreport_crd.load_stream(out.read_text(encoding="utf-8"))
    applied = patches(reporting)
    assert [write.path for write in applied] == [
        f"{BASE}/clusterpolicyreports/poolgate",
        f"{BASE}/namespaces/gpu-operator/policyreports/poolgate",
        f"{BASE}/namespaces/ml-research/policyreports/poolgate",
    ]
    for write, obj in zip(applied, written, strict=True):
        assert write.content_type == "application/apply-patch+yaml"
        assert write.query == {"fieldManager": ["poolgate"], "force": ["true"]}
        body = yaml.safe_load(write.body)  # JSON, which is YAML
        policyreport_crd.validate(body)
        assert body == obj  # what --format policyreport writes is what is applied
    results = [r for obj in written for r in obj["results"]]
    live = [r for r in results if "resources" in r]
    assert live and all(r["resources"][0]["uid"].startswith("00000000-") for r in live)
    assert all(r["timestamp"]["seconds"] > 0 for r in results)


def test_publish_prunes_only_its_own_stale_reports(
    reporting: ApiServer, pki: Pki, tmp_path: Path
) -> None:
    result = cli(
        "audit", "--kubeconfig", kubeconfig_for(reporting, pki, tmp_path), "--publish-reports"
    )
    assert result.returncode == 1, result.stderr
    deletes = [write for write in reporting.writes if write.method == "DELETE"]
    assert sorted(write.path for write in deletes) == [
        f"{BASE}/clusterpolicyreports/poolgate-2",
        f"{BASE}/namespaces/ml-research/policyreports/poolgate-2",
        f"{BASE}/namespaces/team-gone/policyreports/poolgate",
    ]
    for write in deletes:  # only the object listed: a report made again meanwhile stays
        assert json.loads(write.body)["preconditions"]["uid"].startswith("stale-")
    # Listed by poolgate's label, never another tool's reports.
    lists = [q for m, p, q in reporting.requests if m == "GET" and p == f"{BASE}/policyreports"]
    assert lists and all(
        q["labelSelector"] == ["app.kubernetes.io/managed-by=poolgate"] for q in lists
    )
    stored = {
        (o["metadata"]["namespace"], o["metadata"]["name"]) for o in reporting.stored(POLICY_REPORT)
    }
    assert stored == {
        ("gpu-operator", "poolgate"),
        ("ml-research", "poolgate"),
        ("ml-research", "polr-ns-ml-research"),  # Kyverno's
    }
    assert [o["metadata"]["name"] for o in reporting.stored(CLUSTER_POLICY_REPORT)] == ["poolgate"]


def test_a_second_night_updates_in_place(reporting: ApiServer, pki: Pki, tmp_path: Path) -> None:
    config = kubeconfig_for(reporting, pki, tmp_path)
    cli("audit", "--kubeconfig", config, "--publish-reports")
    first = {o["metadata"]["uid"] for o in reporting.stored(POLICY_REPORT)}
    second = cli("audit", "--kubeconfig", config, "--publish-reports")
    assert "published 3 policy reports" in second.stderr
    assert "deleted" not in second.stderr  # nothing stale the second night
    assert {o["metadata"]["uid"] for o in reporting.stored(POLICY_REPORT)} == first


def test_crds_not_installed_is_an_error_notification_and_exit_3(
    lab: ApiServer, kubeconfig: Path, tmp_path: Path
) -> None:
    out, reports = tmp_path / "audit.json", tmp_path / "reports.yaml"
    result = cli(
        "audit",
        "--kubeconfig",
        str(kubeconfig),
        "--publish-reports",
        "--fail-on",
        "never",
        "--format",
        "json",
        "--output",
        str(out),
        "--format",
        "policyreport",
        "--output",
        str(reports),
    )
    assert result.returncode == 3, result.stderr
    assert "Traceback" not in result.stderr
    [note] = json.loads(out.read_text())["notifications"]
    assert note["level"] == "error"
    assert note["message"].startswith(
        "the cluster does not serve wgpolicyk8s.io/v1alpha2: the PolicyReport CRDs are not installed"
    )
    assert not lab.writes  # nothing was tried after discovery said so
    # The reports are still written, and say the publish failed.
    objects = policyreport_crd.load_stream(reports.read_text(encoding="utf-8"))
    errors = [r for r in objects[0]["results"] if r["result"] == "error"]
    assert [r["message"] for r in errors] == [note["message"]]


def test_findings_still_decide_the_exit_code_when_the_publish_fails(
    lab: ApiServer, kubeconfig: Path
) -> None:
    result = cli("audit", "--kubeconfig", str(kubeconfig), "--publish-reports", "--format", "json")
    assert result.returncode == 1  # findings at or above --fail-on, as with any notification
    assert json.loads(result.stdout)["notifications"][0]["level"] == "error"


def test_forbidden_stops_at_the_first_report_and_deletes_nothing(pki: Pki, tmp_path: Path) -> None:
    with ApiServer(objects("lab"), pki, TOKEN, kinds=DEFAULT_KINDS + REPORT_KINDS) as server:
        server.behaviour.forbidden |= {
            "policyreports.wgpolicyk8s.io",
            "clusterpolicyreports.wgpolicyk8s.io",
        }
        result = cli(
            "audit",
            "--kubeconfig",
            kubeconfig_for(server, pki, tmp_path),
            "--publish-reports",
            "--fail-on",
            "never",
            "--format",
            "json",
        )
        assert result.returncode == 3, result.stderr
        messages = [n["message"] for n in json.loads(result.stdout)["notifications"]]
        assert messages[0].startswith("cannot apply ClusterPolicyReport poolgate: 403 Forbidden: ")
        assert 'cannot patch resource "clusterpolicyreports"' in messages[0]
        assert messages[1:] == ["2 more reports were not tried"]
        assert [write.method for write in server.writes] == ["PATCH"]


def test_a_busy_api_server_is_retried(pki: Pki, tmp_path: Path) -> None:
    with ApiServer(objects("lab"), pki, TOKEN, kinds=DEFAULT_KINDS + REPORT_KINDS) as server:
        server.behaviour.faults["patch clusterpolicyreports.wgpolicyk8s.io"] = [
            Fault(status=503),
            Fault(status=429, retry_after="0"),
        ]
        result = cli(
            "audit", "--kubeconfig", kubeconfig_for(server, pki, tmp_path), "--publish-reports"
        )
        assert result.returncode == 1, result.stderr
        assert "published 3 policy reports" in result.stderr
        paths = [write.path for write in patches(server)]
        assert paths.count(f"{BASE}/clusterpolicyreports/poolgate") == 3
        assert len(server.stored(CLUSTER_POLICY_REPORT)) == 1


def test_a_namespace_deleted_since_the_audit_is_a_warning(pki: Pki, tmp_path: Path) -> None:
    """The lab's ml-research workloads are listed, but its Namespace object is gone by the
    time the report is applied: the API server answers 404 for the namespace."""
    served = [
        o
        for o in objects("lab")
        if (o["kind"], o["metadata"]["name"]) != ("Namespace", "ml-research")
    ]
    with ApiServer(served, pki, TOKEN, kinds=DEFAULT_KINDS + REPORT_KINDS) as server:
        result = cli(
            "audit",
            "--kubeconfig",
            kubeconfig_for(server, pki, tmp_path),
            "--publish-reports",
            "--format",
            "json",
        )
        notes = json.loads(result.stdout)["notifications"]
        assert {
            "level": "warning",
            "message": "PolicyReport ml-research/poolgate not applied: its namespace no longer exists",
        }.items() <= notes[-1].items()
        assert not [n for n in notes if n["level"] == "error"]
        assert [o["metadata"]["namespace"] for o in server.stored(POLICY_REPORT)] == [
            "gpu-operator"
        ]


def test_publish_needs_a_live_audit(tmp_path: Path) -> None:
    snapshot = tmp_path / "snap.json"
    snapshot.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": []}))
    result = cli("audit", "--snapshot", str(snapshot), "--publish-reports")
    assert result.returncode == 2
    assert "--publish-reports applies the reports in the audited cluster" in result.stderr


def test_a_snapshot_audit_writes_reports_with_uids() -> None:
    """A ``kubectl get -o yaml`` dump holds each object's uid; its findings name them."""
    result = poolgate(
        "audit", "--snapshot", "tests/audit/controlled/dump.yaml", "--format", "policyreport"
    )
    assert result.returncode == 1, result.stderr
    written = policyreport_crd.load_stream(result.stdout)
    assert [(o["kind"], o["metadata"].get("namespace")) for o in written] == [
        ("ClusterPolicyReport", None),
        ("PolicyReport", "team-a"),
        ("PolicyReport", "team-b"),
    ]
    dump = yaml.safe_load_all(Path(ROOT, "tests/audit/controlled/dump.yaml").read_text())
    uids = {
        (o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]): o["metadata"]["uid"]
        for o in dump
        if o and "uid" in o["metadata"]
    }
    resources = [r["resources"][0] for o in written for r in o["results"]]
    with_uid = [r for r in resources if "uid" in r]
    assert with_uid
    for resource in with_uid:
        key = (resource["kind"], resource.get("namespace", ""), resource["name"])
        assert uids[key] == resource["uid"]
    # Namespaces are cluster-scoped: PG304 is in the ClusterPolicyReport.
    assert {r["rule"] for r in written[0]["results"]} == {"PG304"}


def test_the_optional_rbac_grants_what_the_publish_does_and_no_more(
    reporting: ApiServer, pki: Pki, tmp_path: Path
) -> None:
    """deploy/optional/policyreports-rbac.yaml: exactly the verbs a publish uses, on the
    two report kinds, for the audit's ServiceAccount; deploy/rbac.yaml stays read-only."""
    documents = yaml.safe_load_all((ROOT / "deploy/optional/policyreports-rbac.yaml").read_text())
    role, binding = (doc for doc in documents if doc)
    [rule] = role["rules"]
    assert rule["apiGroups"] == ["wgpolicyk8s.io"]
    assert sorted(rule["resources"]) == ["clusterpolicyreports", "policyreports"]
    granted = set(rule["verbs"])
    assert granted == {"create", "patch", "list", "delete"}
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": role["metadata"]["name"],
    }
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "poolgate-audit", "namespace": "poolgate"}
    ]
    cli("audit", "--kubeconfig", kubeconfig_for(reporting, pki, tmp_path), "--publish-reports")
    used = set()
    for method, path, _ in reporting.requests:
        if not path.startswith(BASE + "/"):
            continue
        # A server-side apply that creates the object is authorized as create, else patch.
        used |= {"GET": {"list"}, "PATCH": {"create", "patch"}, "DELETE": {"delete"}}[method]
    assert used == granted
