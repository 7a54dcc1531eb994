"""deploy/: the nightly audit's own manifests pass poolgate, and grant exactly what it reads."""

from __future__ import annotations

import ipaddress
import json
import os
import re
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from scanner.audit import reads
from scanner.audit import run as audit
from scanner.kinds import RESOURCE_CLAIM_KINDS, WORKLOAD_KINDS, WORKLOAD_TABLE
from scanner.kinds.resources import RESOURCES, by_kind
from scanner.pipeline import Ruleset, ScanOptions, load_ruleset

from .apiserver import ApiServer, Pki, write_kubeconfig
from .conftest import CONTEXT, ROOT, TOKEN, cli, objects

DRA_KINDS = RESOURCE_CLAIM_KINDS | {"DeviceClass"}

DEPLOY = ROOT / "deploy"
APISERVER_PLACEHOLDER = "API-SERVER-IP/32"
"""deploy/networkpolicy.yaml's API server address until the user sets it (docs/audit.md)."""


def manifests() -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for path in sorted(DEPLOY.glob("*.yaml")):
        found.extend(doc for doc in yaml.safe_load_all(path.read_text()) if doc)
    return found


def of_kind(kind: str) -> list[dict[str, Any]]:
    return [obj for obj in manifests() if obj["kind"] == kind]


@cache
def every_rule(mode: str) -> Ruleset:
    return load_ruleset(ScanOptions(enable_all=True, mode=mode))


def test_poolgate_scan_deploy_reports_nothing() -> None:
    result = cli("scan", str(DEPLOY), "--format", "json")
    assert result.returncode == 0, result.stdout + result.stderr
    document = json.loads(result.stdout)
    assert document["summary"]["findings"] == 0
    assert document["notifications"] == []
    # The one reviewed exception, with its reason in the manifest itself.
    assert [
        (f["ruleId"], f["object"]["kind"], f["suppression"]["kind"]) for f in document["findings"]
    ] == [("PG306", "RoleBinding", "in-source")]
    assert cli("scan", str(DEPLOY)).stdout.splitlines()[-1].startswith("no findings in ")


def test_kubectl_apply_of_the_directory_works_on_a_fresh_cluster() -> None:
    """`kubectl apply -f deploy/` applies the files in name order and leaves
    subdirectories out (found in review: cronjob.yaml came before the Namespace, and
    the policy-controller kind failed on every cluster without it). No cluster is
    available here: this checks the order and kinds kubectl would meet."""
    files = sorted(DEPLOY.glob("*.yaml"))
    first = [doc for doc in yaml.safe_load_all(files[0].read_text()) if doc]
    assert [doc["kind"] for doc in first] == ["Namespace"]
    built_in = {"apps", "batch", "networking.k8s.io", "rbac.authorization.k8s.io"}
    for obj in manifests():
        group = obj["apiVersion"].rpartition("/")[0]
        assert group in built_in or group == "", (obj["kind"], obj["apiVersion"])
    assert (DEPLOY / "optional" / "signature-policy.yaml").is_file()


def test_rbac_grants_exactly_what_the_facts_are_read_from_and_the_audit_lists() -> None:
    """deploy/rbac.yaml is a file users apply; what it must grant comes from the fact
    declarations (``scanner.model.facts``, through ``scanner.audit.reads``): every kind
    a subject is made from or a fact is read from, which is also what the audit lists
    with every bundled rule enabled."""
    implied = {(r.group, r.plural) for r in by_kind(reads.granted_kinds())}
    planned = {(r.group, r.plural) for r in audit.plan(every_rule("audit").rules)}
    assert planned == implied
    granted: set[tuple[str, str]] = set()
    for role in of_kind("ClusterRole") + of_kind("Role"):
        for rule in role["rules"]:
            assert sorted(rule["verbs"]) == ["get", "list"], rule
            assert "nonResourceURLs" not in rule and "resourceNames" not in rule
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    assert "*" not in (group, resource)
                    granted.add((group, resource))
    assert granted == implied, (sorted(implied - granted), sorted(granted - implied))
    assert ("", "secrets") not in granted


def test_configmaps_only_in_the_operator_namespace() -> None:
    [cluster_role] = of_kind("ClusterRole")
    assert not [r for r in cluster_role["rules"] if "configmaps" in r["resources"]]
    [role] = of_kind("Role")
    assert role["metadata"]["namespace"] == "gpu-operator"
    assert role["rules"] == [
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}
    ]
    [binding] = of_kind("RoleBinding")
    assert binding["roleRef"]["name"] == role["metadata"]["name"]


def test_cronjob_runs_the_audit_as_a_dedicated_non_root_identity() -> None:
    [cronjob] = of_kind("CronJob")
    pod = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    [sa] = of_kind("ServiceAccount")
    assert pod["serviceAccountName"] == sa["metadata"]["name"] != "default"
    [container] = pod["containers"]
    assert "@sha256:" in container["image"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    script = container["args"][0]
    assert "poolgate audit --fail-on never" in script
    assert "--compare latest.json" in script
    # Reading the cluster ends in time to write a report before the Job is killed.
    [deadline] = re.findall(r"--deadline (\d+)", script)
    assert int(deadline) <= cronjob["spec"]["jobTemplate"]["spec"]["activeDeadlineSeconds"] - 600
    [binding] = of_kind("ClusterRoleBinding")
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": sa["metadata"]["name"], "namespace": "poolgate"}
    ]


def test_network_policy_denies_all_but_egress_to_the_api_server() -> None:
    """Found in review: the allow rule had ports but no ``to:``, so the audit pod could
    reach port 443 and 6443 anywhere, while the docs said "API server only". Every
    egress rule now names its destinations, only ``ipBlock`` addresses (a pod or
    namespace selector would reach other pods), no DNS; as shipped the address is a
    placeholder the API server refuses, so an unset one allows nothing."""
    policies = {p["metadata"]["name"]: p["spec"] for p in of_kind("NetworkPolicy")}
    deny = policies["default-deny"]
    assert deny == {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}
    allow = policies["audit-to-apiserver"]
    assert allow["policyTypes"] == ["Egress"] and "ingress" not in allow
    assert allow["podSelector"] == {"matchLabels": {"app.kubernetes.io/name": "poolgate-audit"}}
    for spec in policies.values():
        for rule in spec.get("egress", []):
            assert rule.get("to"), f"an egress rule without destinations allows all: {rule}"
            assert [sorted(peer) for peer in rule["to"]] == [["ipBlock"]] * len(rule["to"])
            assert rule.get("ports"), f"an egress rule without ports allows every port: {rule}"
            ports = sorted((port["protocol"], port["port"]) for port in rule["ports"])
            assert ports == [("TCP", 443), ("TCP", 6443)]  # no DNS (53), nothing else
    [rule] = allow["egress"]
    cidrs = [peer["ipBlock"]["cidr"] for peer in rule["to"]]
    assert cidrs == [APISERVER_PLACEHOLDER]
    with pytest.raises(ValueError):  # so the API server refuses it until it is set
        ipaddress.ip_network(APISERVER_PLACEHOLDER)


def test_the_docs_say_how_to_set_the_api_server_address() -> None:
    page = (ROOT / "docs" / "audit.md").read_text()
    text = (DEPLOY / "networkpolicy.yaml").read_text()
    for where in (page, text):
        assert (
            "kubectl get endpointslices -n default -l kubernetes.io/service-name=kubernetes"
            in where
        )
        assert f"sed -i 's|{APISERVER_PLACEHOLDER}|" in where
    assert "\n## The API server's address\n" in page


def test_every_kind_the_model_knows_is_listable() -> None:
    listable = {(r.group, r.kind) for r in RESOURCES}
    for entry in WORKLOAD_TABLE:
        groups = [entry.group] if entry.group is not None else ["", "apps", "batch"]
        assert any((group, entry.kind) in listable for group in groups), entry.kind


def test_plan_follows_the_rules() -> None:
    rules = {rule.id: rule for rule in every_rule("audit").rules}
    only_nodes = audit.plan([rules["PG604"]])
    assert [(r.group, r.kind) for r in only_nodes] == [("", "Node")]
    pods_and_policies = audit.plan([rules["PG602"]])
    assert {(r.group, r.kind) for r in pods_and_policies} == {
        ("", "Pod"),
        ("nvidia.com", "ClusterPolicy"),
        ("kyverno.io", "ClusterPolicy"),  # same kind name; the rule's condition tells them apart
    }
    # A rule over derived facts: its subjects and the kinds of the facts it reads.
    privileged = audit.plan([rules["PG301"]])  # workload.containers, workload.namespace
    assert {r.kind for r in privileged} == WORKLOAD_KINDS
    identity = {r.kind for r in audit.plan([rules["PG402"]])}  # workload.serviceAccount
    assert identity == WORKLOAD_KINDS | {"ServiceAccount", "PodIdentityAssociation"} | DRA_KINDS
    default_deny = audit.plan([rules["PG305"]])  # ns.defaultDeny, ns.gpuWorkloads
    assert {r.kind for r in default_deny} == WORKLOAD_KINDS | DRA_KINDS | {
        "Namespace",
        "NetworkPolicy",
        # ns.otherNetworkPolicies: other engines' policies (Calico, Cilium, ANP)
        *("CiliumNetworkPolicy", "CiliumClusterwideNetworkPolicy", "GlobalNetworkPolicy"),
        *("AdminNetworkPolicy", "BaselineAdminNetworkPolicy"),
    }
    assert default_deny[0].kind == "Namespace"  # listed first
    # The bundled rules together read every kind the table has.
    assert len(audit.plan(rules.values())) == len(RESOURCES)


def test_audit_only_rules_do_not_run_in_scan() -> None:
    scan_rules = {rule.id for rule in load_ruleset(ScanOptions()).rules}
    audit_rules = {rule.id for rule in load_ruleset(ScanOptions(mode="audit")).rules}
    assert {"PG602", "PG603", "PG604"} <= audit_rules - scan_rules
    assert "PG301" in scan_rules & audit_rules


def test_rules_test_runs_audit_only_rules() -> None:
    fixtures = ROOT / "fixtures" / "rules"
    result = cli("rules", "test", str(fixtures), "-v")
    for rule_id in ("PG602", "PG603", "PG604"):
        assert f"ok   {rule_id} {fixtures}/{rule_id}/fire" in result.stdout


def test_the_nightly_script_keeps_drift_across_a_night_that_did_not_run(
    pki: Pki, tmp_path: Path
) -> None:
    """deploy/cronjob.yaml's own script, four nights in a row: the audit runs (and
    only the newest nights of reports stay), then cannot (exit 2: no kubeconfig),
    then runs again and still compares with the first; then latest.json is cut short,
    and the script sets it aside and audits without drift.
    No cluster is available here: the script runs against the test API server
    (tests/audit/apiserver.py), through a real kubeconfig, as it would in the pod."""
    [cronjob] = of_kind("CronJob")
    script = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
    reports = tmp_path / "reports"
    reports.mkdir()
    body = script["args"][0].replace("cd /reports", f"cd {reports}")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "poolgate"
    wrapper.write_text(f'#!/bin/sh\nexec {sys.executable} -m scanner "$@"\n')
    wrapper.chmod(0o755)

    def night(kubeconfig: Path) -> subprocess.CompletedProcess[str]:
        env = {
            "PATH": f"{bin_dir}:{os.environ['PATH']}",
            "PYTHONPATH": str(ROOT),
            "HOME": str(tmp_path),
            "KUBECONFIG": str(kubeconfig),
            "POOLGATE_KEEP_NIGHTS": "2",
        }
        return subprocess.run(
            ["/bin/sh", "-c", body], env=env, capture_output=True, text=True, timeout=300
        )

    # Reports of three earlier nights: with two kept, the oldest two go.
    for day in ("20260101", "20260102", "20260103"):
        for suffix in ("txt", "sarif"):
            (reports / f"audit-{day}T021700Z.{suffix}").write_text("old")

    with ApiServer(objects("lab"), pki, TOKEN) as server:
        config = write_kubeconfig(tmp_path / "kc", server.url, pki.ca, CONTEXT, token=TOKEN)
        assert night(config).returncode == 0
        first = json.loads((reports / "latest.json").read_text())
        for suffix in ("txt", "sarif"):
            kept = sorted(path.name for path in reports.glob(f"audit-*.{suffix}"))
            assert len(kept) == 2 and kept[0] == f"audit-20260103T021700Z.{suffix}", kept
        down = night(tmp_path / "no-such-kubeconfig")
        assert down.returncode == 2, down.stderr
        assert json.loads((reports / "latest.json").read_text()) == first
        assert not (reports / "latest.json.new").exists()
        assert not list(reports.glob("latest.json.refused-*"))  # not its fault: put back
        third = night(config)
        assert third.returncode == 0, third.stderr
        drift = json.loads((reports / "latest.json").read_text())["drift"]
        assert drift["counts"]["unchanged"] == len(first["findings"]) > 0

        # latest.json cut short (a full volume, say): set aside, and the audit runs
        # without drift instead of failing every night from now on.
        (reports / "latest.json").write_text('{"version": 1, "findings": [')
        fourth = night(config)
        assert fourth.returncode == 0, fourth.stderr
        latest = json.loads((reports / "latest.json").read_text())
        assert "drift" not in latest and len(latest["findings"]) == len(first["findings"])
        [refused] = reports.glob("latest.json.refused-*")
        assert refused.read_text() == '{"version": 1, "findings": ['
