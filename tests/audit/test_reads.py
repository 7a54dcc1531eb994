"""The rule -> kinds relation (``scanner.audit.reads``): what the plan lists and what stops
a rule are one relation, and it matches what the model really joins.

No Kubernetes cluster is available where these tests run: the live tests use the
HTTPS API server of ``tests/audit/apiserver.py`` through the official ``kubernetes``
client and a real kubeconfig, the same code path as against a real cluster.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from scanner.audit import reads as relation
from scanner.audit import run as audit
from scanner.cel.analysis import analyze_rule
from scanner.kinds import WORKLOAD_KINDS
from scanner.kinds.resources import RESOURCES
from scanner.pipeline import Ruleset, ScanOptions, load_ruleset
from scanner.ruleset.load import Rule
from scanner.sources.snapshot import Capture, KindKey, Unavailable, api_group

from .apiserver import ApiServer, Pki, write_kubeconfig
from .conftest import CONTEXT, ROOT, TOKEN, cli, objects

NOW = datetime.datetime(2025, 6, 1, 12, tzinfo=datetime.UTC)
EVERY_KIND = frozenset(resource.key for resource in RESOURCES)
SIGNATURES = {"ClusterImagePolicy", "ClusterPolicy", "Policy", "Namespace"}
KUEUE = {"LocalQueue", "ClusterQueue", "ResourceFlavor"}
NAMESPACE_FACTS = (
    WORKLOAD_KINDS
    | {"ResourceClaim", "ResourceClaimTemplate", "DeviceClass"}
    | {
        "Namespace",
        "NetworkPolicy",
        *("CiliumNetworkPolicy", "CiliumClusterwideNetworkPolicy", "GlobalNetworkPolicy"),
        *("AdminNetworkPolicy", "BaselineAdminNetworkPolicy"),
    }
)


@cache
def ruleset() -> Ruleset:
    return load_ruleset(ScanOptions(mode="audit"))


def bundled() -> list[Rule]:
    return [rule for rule in ruleset().rules if not rule.builtin]


def test_the_plan_lists_exactly_what_each_rule_reads() -> None:
    """And Namespaces with ConfigMaps: those are listed only in the operator
    namespaces that exist (a rule that reads no Namespace, such as PG202, listed
    ConfigMaps in namespaces the deploy Role does not cover, found in review)."""
    for rule in bundled():
        planned = {resource.kind for resource in audit.plan([rule])}
        reads = relation.reads(rule).kinds & relation.ALL_KINDS
        assert planned == reads | ({"Namespace"} if "ConfigMap" in reads else set()), rule.id


def test_a_missing_kind_stops_exactly_the_rules_that_read_it() -> None:
    """Every kind the plan lists for a rule, forbidden: the rule does not run when the
    kind is a join, does not run on that kind when it is only a subject, and is never
    left untouched. So coverage and plan cannot disagree."""
    rules = bundled()
    for resource in audit.plan(rules):
        denied = Unavailable(resource.group, resource.kind, "forbidden", "403 Forbidden")
        capture = Capture(CONTEXT, NOW, [], EVERY_KIND - {resource.key}, [denied])
        covered = audit.coverage(capture, rules)
        for rule in rules:
            read = relation.reads(rule)
            if resource.kind in read.joins:
                assert rule.id in covered.blocked, (rule.id, resource.kind)
            elif resource.kind in read.subjects:
                assert rule.id not in covered.blocked, (rule.id, resource.kind)
                assert (rule.id, resource.kind) in covered.unseen, (rule.id, resource.kind)
            else:
                assert rule.id not in covered.blocked, (rule.id, resource.kind)


def test_a_missing_kind_no_rule_reads_is_only_a_note() -> None:
    """A snapshot taken with PG306 enabled could not list Roles; audited with PG301
    alone, nothing rests on Roles: a note, not an incomplete audit."""
    [privileged] = [rule for rule in bundled() if rule.id == "PG301"]
    denied = Unavailable("rbac.authorization.k8s.io", "Role", "forbidden", "403 Forbidden")
    capture = Capture(CONTEXT, NOW, [], EVERY_KIND - {denied.key}, [denied])
    covered = audit.coverage(capture, [privileged])
    assert covered.blocked == frozenset() and covered.unseen == frozenset()
    [note] = covered.notifications
    assert note.level.name == "NOTE"
    assert note.message.endswith("; no enabled rule reads it")


@pytest.mark.parametrize(
    ("source", "kinds"),
    [
        ("workload.serviceAccount.identity == ''", {"ServiceAccount", "PodIdentityAssociation"}),
        ("workload.namespace in config.operatorNamespaces", set()),
        ("ns.defaultDeny", {"NetworkPolicy"}),
        ("workload.ns.pssEnforce", {"Namespace"}),
        ("workload.containers.all(c, c.signature.covered)", SIGNATURES),
        ("workload.containers.all(c, c['signature'] != null)", SIGNATURES),
        ("workload.containers.all(c, c.image != '')", set()),
        ("node.taints.size() > 0", set()),
        ("node.identity.broadScopes", {"EC2NodeClass"}),
        (
            "cluster.rbac.writers",
            {
                "Role",
                "RoleBinding",
                "ClusterRole",
                "ClusterRoleBinding",
                "ClusterPolicy",
                "ConfigMap",
                "Node",
            },
        ),
        ("'workload.serviceAccount'", set()),  # only text
        ("workload.queuedPlacement == ''", KUEUE),
    ],
)
def test_fact_kinds(source: str, kinds: set[str]) -> None:
    assert relation.fact_kinds(analyze_rule((source,))) == kinds


@pytest.mark.parametrize(
    ("source", "queues"),
    [
        ("workload.targets.size() > 0", True),  # a queued workload has none
        ("pool.tenants.size() > 1", True),  # its tenants are the workloads it is a target of
        ("workload.runningShared && workload.runningNode.trustDomains.size() > 1", False),
    ],
)
def test_placement_reads_kueue_and_what_runs_where_does_not(source: str, queues: bool) -> None:
    """Found in review: what a node runs comes from live pods, never from a queue, so a
    rule about it must keep running when LocalQueues cannot be listed."""
    assert (relation.fact_kinds(analyze_rule((source,))) >= KUEUE) is queues
    assert not (KUEUE & relation.fact_kinds(analyze_rule((source,)))) or queues


@pytest.mark.parametrize(
    ("source", "kinds"),
    [
        ("size(workload) > 0", relation.ALL_KINDS),  # used whole
        ("workload.someNewFact", relation.ALL_KINDS),  # a field the table does not know
        ("workload.ns.someNewFact", NAMESPACE_FACTS),
        ("workload[x] == 1", relation.ALL_KINDS),  # indexed with a value
    ],
)
def test_what_cannot_be_told_reads_everything_it_might(source: str, kinds: frozenset[str]) -> None:
    assert relation.fact_kinds(analyze_rule((source,))) == kinds


# -- the relation against the model ----------------------------------------------------


def _fixture_clusters() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    sets = {
        "audit/lab": sorted((ROOT / "tests/audit/lab").glob("*.yaml")),
        "audit/clean": sorted((ROOT / "tests/audit/clean").glob("*.yaml")),
    }
    for directory in sorted((ROOT / "fixtures/scenarios").iterdir()):
        sets[f"scenarios/{directory.name}"] = sorted(directory.rglob("*.yaml"))
    for directory in sorted((ROOT / "fixtures/rules").iterdir()):
        for path in sorted(directory.glob("*.yaml")):
            sets[f"rules/{directory.name}/{path.name}"] = [path]
    for name, paths in sets.items():
        try:
            documents = [d for p in paths for d in yaml.safe_load_all(p.read_text())]
        except yaml.YAMLError:
            continue  # PG001 fixtures: not objects
        found = [d for d in documents if isinstance(d, dict) and isinstance(d.get("kind"), str)]
        if found:
            yield name, found


def _key(body: dict[str, Any]) -> KindKey:
    return (api_group(str(body.get("apiVersion", ""))), str(body["kind"]))


def _findings(
    bodies: list[dict[str, Any]], missing: KindKey | None = None
) -> tuple[set[tuple[str, str, str]], audit.Coverage]:
    bodies = json.loads(json.dumps(bodies))
    listed, unavailable = EVERY_KIND, []
    if missing is not None:
        listed = EVERY_KIND - {missing}
        unavailable = [Unavailable(missing[0], missing[1], "forbidden", "403 Forbidden")]
        bodies = [body for body in bodies if _key(body) != missing]
    report, covered = audit.evaluate(Capture(CONTEXT, NOW, bodies, listed, unavailable), ruleset())
    found = {
        (f.rule_id, f.fingerprint, f.ref.kind if f.ref is not None else "") for f in report.findings
    }
    return found, covered


def _owned_by(bodies: list[dict[str, Any]], kind: str) -> set[str]:
    """Kinds of objects a ``kind`` object controls: without their controller they are
    checked as themselves (docs/audit.md, "Controlled objects are checked once")."""
    return {
        str(body["kind"])
        for body in bodies
        if any(
            isinstance(ref, dict) and ref.get("kind") == kind
            for ref in (body.get("metadata") or {}).get("ownerReferences") or []
        )
    }


@pytest.mark.parametrize(
    ("name", "bodies"), [pytest.param(*case, id=case[0]) for case in _fixture_clusters()]
)
def test_a_rule_that_runs_without_a_kind_judges_the_rest_as_before(
    name: str, bodies: list[dict[str, Any]]
) -> None:
    """For each kind in a fixture cluster, audited as if it were forbidden: every rule
    that still runs reports exactly what it reported with the kind, on objects of other
    kinds. The only difference allowed: objects that kind controlled are checked as
    themselves (more findings, each true of the object). A fact added to the model
    without its kinds in scanner/audit/run.py fails here."""
    full, _ = _findings(bodies)
    for key in sorted({_key(body) for body in bodies} & EVERY_KIND):
        without, covered = _findings(bodies, key)
        freed = _owned_by(bodies, key[1])
        for rule in ruleset().rules:
            if rule.id in covered.blocked:
                continue
            before = {f for f in full if f[0] == rule.id and f[2] != key[1]}
            after = {f for f in without if f[0] == rule.id and f[2] != key[1]}
            assert before <= after, (name, key, rule.id, "lost", before - after)
            assert {f[2] for f in after - before} <= freed, (name, key, rule.id, after - before)


# -- live: a forbidden join ----------------------------------------------------------


def test_a_forbidden_join_stops_the_rule_that_reads_it(pki: Pki, tmp_path: Path) -> None:
    """The clean cluster with NetworkPolicies forbidden: PG305 would conclude "no
    default-deny NetworkPolicy" from a list it never got. It does not run; the report
    says so and the audit is incomplete (exit 3), not failed (exit 1)."""
    with ApiServer(objects("clean"), pki, TOKEN) as server:
        config = write_kubeconfig(tmp_path / "kubeconfig", server.url, pki.ca, CONTEXT, token=TOKEN)
        args = ("audit", "--kubeconfig", str(config), "--format", "json")
        assert cli(*args).returncode == 0
        server.behaviour.forbidden = {"networkpolicies.networking.k8s.io"}
        result = cli(*args)
        snap = tmp_path / "snap.json"
        assert cli("snapshot", "--kubeconfig", str(config), "-o", str(snap)).returncode == 3
    assert result.returncode == 3, result.stdout
    document = json.loads(result.stdout)
    assert document["findings"] == []
    [note] = document["notifications"]
    assert note["message"].startswith("cannot list NetworkPolicy.networking.k8s.io: forbidden")
    stopped = note["message"].split("; rules that did not run: ")[1].split(", ")
    assert stopped == ["PG305"]  # the one rule that reads NetworkPolicies
    offline = cli("audit", "--snapshot", str(snap), "--format", "json")
    assert offline.returncode == 3
    assert json.loads(offline.stdout)["notifications"] == document["notifications"]


@pytest.mark.parametrize(
    ("label", "rule_id"),
    [
        ("serviceaccounts", "PG402"),  # workload.serviceAccount
        ("namespaces", "PG502"),  # signature opt-in label of the namespace
        ("nodes", "PG105"),  # the pools a workload selects
    ],
)
def test_a_forbidden_join_never_turns_findings_resolved(
    pki: Pki, tmp_path: Path, label: str, rule_id: str
) -> None:
    with ApiServer(objects("lab"), pki, TOKEN) as server:
        config = write_kubeconfig(tmp_path / "kubeconfig", server.url, pki.ca, CONTEXT, token=TOKEN)
        last_night = tmp_path / "last.json"
        cli("audit", "--kubeconfig", str(config), "--format", "json", "-o", str(last_night))
        assert rule_id in {f["ruleId"] for f in json.loads(last_night.read_text())["findings"]}
        server.behaviour.forbidden = {label}
        result = cli(
            "audit", "--kubeconfig", str(config), "--format", "json", "--compare", str(last_night)
        )
    drift = json.loads(result.stdout)["drift"]
    assert drift["resolved"] == []
    assert rule_id in {f["ruleId"] for f in drift["unverified"]}


SERVICE_RULE = """\
id: ACME701
name: service-loadbalancer
level: error
summary: Services must not be of type LoadBalancer.
description: A user rule over a kind poolgate's resource table does not hold.
remediation: Use an Ingress.
subject: object
match:
  kinds: [Service]
validations:
  - expression: '!has(object.spec.type) || object.spec.type != "LoadBalancer"'
    message: Service is a LoadBalancer
    path: spec.type
"""
SERVICE = {
    "apiVersion": "v1",
    "kind": "Service",
    "metadata": {"name": "public", "namespace": "ml-research"},
    "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]},
}


def test_a_user_rule_over_a_kind_the_audit_cannot_list_is_named(pki: Pki, tmp_path: Path) -> None:
    """The audit lists only the kinds of its resource table: a rule over Services never
    sees one live. Not a silent pass: an error notification names the rule and the kind
    (exit 3). A kubectl dump that holds Services is audited by it as usual."""
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "ACME701-service-loadbalancer.yaml").write_text(SERVICE_RULE)
    with ApiServer([*objects("clean"), SERVICE], pki, TOKEN) as server:
        config = write_kubeconfig(tmp_path / "kubeconfig", server.url, pki.ca, CONTEXT, token=TOKEN)
        result = cli(
            "audit", "--kubeconfig", str(config), "--rules", str(rules), "--format", "json"
        )
        assert not [path for path in server.paths() if "services" in path]
    assert result.returncode == 3, result.stdout
    [note] = json.loads(result.stdout)["notifications"]
    assert note["level"] == "error"
    assert note["message"].startswith("cannot list Service: not listable: poolgate does not list")
    assert note["message"].endswith("; rules that did not run on Service objects: ACME701")
    dump = tmp_path / "dump.json"
    dump.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [SERVICE]}))
    offline = cli("audit", "--snapshot", str(dump), "--rules", str(rules), "--format", "json")
    assert "ACME701" in {f["ruleId"] for f in json.loads(offline.stdout)["findings"]}
