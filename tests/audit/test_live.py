"""``poolgate audit`` and ``poolgate snapshot`` against a real HTTP API, end to end.

No Kubernetes cluster is available where these tests run. Each test starts the
API server of ``tests/audit/apiserver.py`` (HTTPS with a CA generated for the
session, bearer-token or client-certificate auth, discovery and the list
protocol with pagination, 403 ``Status`` objects, 410 on expired continue
tokens, 429/5xx and slow answers), writes a real kubeconfig file for it, and runs
the ``poolgate`` command in a subprocess. poolgate reaches the server through the
official ``kubernetes`` client exactly as it reaches a real cluster: the same
command runs unchanged against one (``poolgate audit --kubeconfig ~/.kube/config
--context prod``, or with no options inside a pod).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from .apiserver import DEFAULT_KINDS, ApiServer, Fault, Pki, _k, write_kubeconfig
from .conftest import CONTEXT, ROOT, TOKEN, cli, objects, poolgate


def report(result: Any) -> dict[str, Any]:
    assert "Traceback" not in result.stderr, result.stderr
    document: dict[str, Any] = json.loads(result.stdout)
    return document


def findings(document: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    return sorted(
        (f["ruleId"], f["location"]["uri"], f["message"], f["fingerprint"])
        for f in document["findings"]
    )


def rule_ids(document: dict[str, Any]) -> set[str]:
    return {f["ruleId"] for f in document["findings"]}


def test_live_audit_equals_snapshot_audit(lab: ApiServer, kubeconfig: Path, tmp_path: Path) -> None:
    live = poolgate(
        "audit", "--kubeconfig", str(kubeconfig), "--context", CONTEXT, "--format", "json"
    )
    assert live.returncode == 1, live.stderr
    live_report = report(live)
    # The live-only rules see status, and the URIs name the context (encoded: "@").
    assert {"PG602", "PG603", "PG604", "PG605", "PG301"} <= rule_ids(live_report)
    assert all(
        f["location"]["uri"].startswith("cluster://admin%40gpu-lab/")
        for f in live_report["findings"]
    )
    assert live_report["notifications"] == []
    [pending] = [f["message"] for f in live_report["findings"] if f["ruleId"] == "PG603"]
    assert "not scheduled: 0/2 nodes are available: 2 node(s) had untolerated taint" in pending
    assert pending.endswith(
        "(pool contract: untolerated taints: h100-train: nvidia.com/gpu=present:NoSchedule)"
    )

    snap = tmp_path / "snapshot.json"
    taken = poolgate("snapshot", "--kubeconfig", str(kubeconfig), "-o", str(snap))
    assert taken.returncode == 0, taken.stderr
    assert "objects from context admin@gpu-lab" in taken.stderr
    offline = poolgate("audit", "--snapshot", str(snap), "--format", "json")
    assert offline.returncode == 1, offline.stderr
    assert findings(report(offline)) == findings(live_report)
    assert report(offline)["summary"] == live_report["summary"]


def test_kubectl_dump_audits_like_the_live_cluster(
    lab: ApiServer, kubeconfig: Path, tmp_path: Path
) -> None:
    """A `kubectl get -o json` List (no poolgate annotations) with --context names
    the cluster; it holds the same objects, so the findings are the same, except those
    resting on a kind it does not hold. The lab has no NetworkPolicy and no signature
    policy: the live audit listed them and knows there are none, a dump cannot say so
    (found in review: PG305 and PG502 reported their absence), so those rules do not run."""
    live = report(cli("audit", "--kubeconfig", str(kubeconfig), "--format", "json"))
    listed = [obj for obj in objects("lab") if obj["kind"] != "Secret"]
    dump = tmp_path / "dump.json"
    dump.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": listed}))
    offline = report(
        cli("audit", "--snapshot", str(dump), "--context", CONTEXT, "--format", "json")
    )
    absent = ("PG305", "PG502")
    assert {finding[0] for finding in findings(live)} >= set(absent)
    assert findings(offline) == [f for f in findings(live) if f[0] not in absent]
    [note] = [n["message"] for n in offline["notifications"] if "did not run" in n["message"]]
    assert note.endswith("rules that need kinds it does not hold did not run: PG305, PG502")


def test_secrets_are_never_requested_and_configmaps_only_in_operator_namespaces(
    lab: ApiServer, kubeconfig: Path, tmp_path: Path
) -> None:
    snap = tmp_path / "snapshot.json"
    assert cli("snapshot", "--kubeconfig", str(kubeconfig), "-o", str(snap)).returncode == 0
    paths = lab.paths()
    assert not [path for path in paths if "secrets" in path]
    configmap_lists = [path for path in paths if path.endswith("/configmaps")]
    # nvidia-gpu-operator is configured too, but does not exist here: not listed.
    assert configmap_lists == ["/api/v1/namespaces/gpu-operator/configmaps"]
    items = json.loads(snap.read_text())["items"]
    assert {item["kind"] for item in items if item["kind"] == "Secret"} == set()
    assert [i["metadata"]["name"] for i in items if i["kind"] == "ConfigMap"] == [
        "time-slicing-config"
    ]


def test_snapshot_records_context_time_and_listed_kinds(kubeconfig: Path, tmp_path: Path) -> None:
    snap = tmp_path / "snapshot.json"
    assert cli("snapshot", "--kubeconfig", str(kubeconfig), "-o", str(snap)).returncode == 0
    document = json.loads(snap.read_text())
    assert (document["apiVersion"], document["kind"]) == ("v1", "List")
    annotations = document["metadata"]["annotations"]
    assert annotations["poolgate.io/context"] == CONTEXT
    assert annotations["poolgate.io/captured-at"].endswith("Z")
    listed = annotations["poolgate.io/listed"].split(",")
    # Served kinds, and kinds of groups this cluster does not serve (complete: none).
    assert {"Pod", "Deployment.apps", "ClusterPolicy.nvidia.com", "NodePool.karpenter.sh"} <= set(
        listed
    )
    # List items from the API lack apiVersion/kind; the snapshot has them back.
    pods = [item for item in document["items"] if item["kind"] == "Pod"]
    assert pods and all(item["apiVersion"] == "v1" for item in pods)
    # DRA at the version this server serves (v1beta1), discovered, not assumed.
    assert "DeviceClass.resource.k8s.io" in listed


def test_pagination_and_an_expired_continue_token(
    lab: ApiServer, kubeconfig: Path, tmp_path: Path
) -> None:
    baseline = report(cli("audit", "--kubeconfig", str(kubeconfig), "--format", "json"))
    lab.requests.clear()
    lab.behaviour.expire_continue.add("pods")
    paged = cli("audit", "--kubeconfig", str(kubeconfig), "--format", "json", "--page-size", "1")
    pod_queries = lab.queries("/api/v1/pods")
    # 3 pods, one per page; the first continue expires (410), so the list starts over.
    assert [q.get("continue") is not None for q in pod_queries] == [
        False,
        True,
        False,
        True,
        True,
    ]
    assert all(q["limit"] == ["1"] for q in pod_queries)
    assert findings(report(paged)) == findings(baseline)
    assert report(paged)["notifications"] == []


def test_retries_on_429_5xx_and_timeouts(lab: ApiServer, kubeconfig: Path) -> None:
    baseline = report(cli("audit", "--kubeconfig", str(kubeconfig), "--format", "json"))
    lab.requests.clear()
    lab.behaviour.faults = {
        "discovery": [Fault(status=503)],
        "pods": [Fault(status=429, retry_after="0"), Fault(status=500)],
        "nodes": [Fault(delay=3.0)],  # past --request-timeout: the client gives up, retries
        "deployments.apps": [Fault(status=502)],
    }
    result = cli(
        "audit", "--kubeconfig", str(kubeconfig), "--format", "json", "--request-timeout", "1"
    )
    assert findings(report(result)) == findings(baseline)
    assert report(result)["notifications"] == []
    assert len(lab.queries("/api/v1/pods")) == 3
    assert len(lab.queries("/api/v1/nodes")) == 2
    assert all(not queue for queue in lab.behaviour.faults.values())


def test_forbidden_kind_is_named_with_the_rules_that_did_not_run(pki: Pki, tmp_path: Path) -> None:
    """Acceptance: one kind forbidden, nothing else wrong -> exit 3, rules named."""
    with ApiServer(objects("clean"), pki, TOKEN) as server:
        config = write_kubeconfig(tmp_path / "kubeconfig", server.url, pki.ca, CONTEXT, token=TOKEN)
        clean = cli("audit", "--kubeconfig", str(config), "--format", "json")
        assert clean.returncode == 0, clean.stdout + clean.stderr
        server.behaviour.forbidden.add("pods")
        result = poolgate("audit", "--kubeconfig", str(config), "--format", "json")
        text = cli("audit", "--kubeconfig", str(config))
    assert result.returncode == 3, result.stdout + result.stderr
    document = report(result)
    assert document["summary"]["findings"] == 0
    [note] = document["notifications"]
    assert note["level"] == "error"
    message = note["message"]
    assert message.startswith("cannot list Pod: forbidden: 403 Forbidden: pods is forbidden: ")
    # Rules that judge each workload or Pod on its own facts did not run on Pods; rules
    # whose facts gather Pods (pool tenants, a namespace's GPU workloads, the pools a
    # Pending pod could go to) did not run at all. Each is named once.
    stopped = message.split("; rules that did not run: ")[1].split(";")[0].split(", ")
    named = message.split("rules that did not run on Pod objects: ")[1].split(", ")
    assert {"PG301", "PG302", "PG501", "PG602"} <= set(named)
    assert {"PG201", "PG304", "PG305", "PG603", "PG605"} <= set(stopped)
    assert not set(stopped) & set(named)
    assert "PG604" not in named + stopped  # reads Nodes only
    assert text.returncode == 3
    assert "poolgate: error: cannot list Pod: forbidden" in text.stdout


def test_forbidden_admission_policies_stop_pg605(pki: Pki, tmp_path: Path) -> None:
    """The clean cluster's admission floor cannot be read: PG605 does not run (it
    would otherwise conclude "no floor" from a list it never got) and says so."""
    with ApiServer(objects("clean"), pki, TOKEN) as server:
        config = write_kubeconfig(tmp_path / "kubeconfig", server.url, pki.ca, CONTEXT, token=TOKEN)
        clean = report(cli("audit", "--kubeconfig", str(config), "--format", "json"))
        assert "PG605" not in rule_ids(clean)  # the floor is there and Deny-bound
        server.behaviour.forbidden.add("validatingadmissionpolicies.admissionregistration.k8s.io")
        result = cli("audit", "--kubeconfig", str(config), "--format", "json")
    assert result.returncode == 3, result.stdout + result.stderr
    document = report(result)
    assert document["summary"]["findings"] == 0
    [note] = document["notifications"]
    assert note["level"] == "error"
    assert note["message"].startswith(
        "cannot list ValidatingAdmissionPolicy.admissionregistration.k8s.io: forbidden: "
        "403 Forbidden: "
    )
    # The admission preview (PG606) reads the policies too.
    assert note["message"].endswith("; rules that did not run: PG605, PG606")


def test_the_cluster_finding_of_the_lab(lab: ApiServer, kubeconfig: Path) -> None:
    document = report(cli("audit", "--kubeconfig", str(kubeconfig), "--format", "json"))
    [finding] = [f for f in document["findings"] if f["ruleId"] == "PG605"]
    assert finding["location"] == {
        "uri": "cluster://admin%40gpu-lab/_cluster",
        "line": None,
        "column": None,
        "path": "",
    }
    assert finding["object"]["kind"] == "Cluster"
    assert finding["message"].endswith(
        "ValidatingAdmissionPolicy 'gpu-pod-floor' does not count: it is bound with "
        "validationActions Audit, Warn and not Deny: they report but admit the pod"
    )


def test_forbidden_operator_namespace_configmaps(pki: Pki, tmp_path: Path) -> None:
    with ApiServer(objects("lab"), pki, TOKEN) as server:
        server.behaviour.forbidden_in.add(("gpu-operator", "configmaps"))
        config = write_kubeconfig(tmp_path / "kubeconfig", server.url, pki.ca, CONTEXT, token=TOKEN)
        result = cli("audit", "--kubeconfig", str(config), "--format", "json")
    notes = [n["message"] for n in report(result)["notifications"]]
    assert len(notes) == 1
    assert notes[0].startswith("cannot list ConfigMap (namespace gpu-operator): forbidden")


def test_configmaps_only_where_an_operator_namespace_exists_even_without_namespace_rules(
    pki: Pki, tmp_path: Path
) -> None:
    """With every rule that reads Namespaces disabled, ConfigMaps are still listed only
    in the operator namespaces that exist: the lab has gpu-operator, not
    nvidia-gpu-operator, where deploy/'s Role grants nothing (a 403 there made the
    nightly audit incomplete, found in review)."""
    from scanner.audit import run as audit
    from scanner.pipeline import ScanOptions, load_ruleset

    rules = load_ruleset(ScanOptions(mode="audit")).rules
    namespace_rules = sorted(rule.id for rule in rules if "Namespace" in audit.needed_kinds([rule]))
    assert namespace_rules and "ConfigMap" in audit.needed_kinds(rules)
    with ApiServer(objects("lab"), pki, TOKEN) as server:
        server.behaviour.forbidden_in.add(("nvidia-gpu-operator", "configmaps"))
        config = write_kubeconfig(tmp_path / "kubeconfig", server.url, pki.ca, CONTEXT, token=TOKEN)
        result = cli(
            "audit", "--kubeconfig", str(config), "--format", "json",
            "--disable", ",".join(namespace_rules),
        )  # fmt: skip
        asked = [path for path in server.paths() if path.endswith("/configmaps")]
    assert result.returncode in (0, 1), result.stderr
    assert report(result)["notifications"] == []
    assert asked == ["/api/v1/namespaces/gpu-operator/configmaps"]


def test_client_certificate_auth(pki: Pki, tmp_path: Path) -> None:
    with ApiServer(objects("lab"), pki, TOKEN) as server:
        config = write_kubeconfig(
            tmp_path / "kubeconfig",
            server.url,
            pki.ca,
            "kind-gpu-lab",
            client_cert=pki.client_cert,
            client_key=pki.client_key,
        )
        result = cli("audit", "--kubeconfig", str(config), "--format", "json")
    assert result.returncode == 1, result.stderr
    assert "PG603" in rule_ids(report(result))
    assert report(result)["findings"][0]["location"]["uri"].startswith("cluster://kind-gpu-lab/")


def test_kubeconfig_from_the_environment(lab: ApiServer, kubeconfig: Path) -> None:
    result = cli("audit", "--format", "json", env={"KUBECONFIG": str(kubeconfig)})
    assert result.returncode == 1, result.stderr
    assert "PG602" in rule_ids(report(result))


@pytest.mark.parametrize(
    ("problem", "expected"),
    [
        ("wrong-ca", "CERTIFICATE_VERIFY_FAILED"),
        ("insecure", "disables TLS verification"),
        ("bad-token", "401 Unauthorized"),
        ("no-context", "has no context 'prod'"),
    ],
)
def test_connection_problems_are_one_clear_line(
    lab: ApiServer, pki: Pki, tmp_path: Path, problem: str, expected: str
) -> None:
    ca = pki.other_ca if problem == "wrong-ca" else pki.ca
    token = "not-the-token" if problem == "bad-token" else TOKEN
    config = write_kubeconfig(
        tmp_path / "kubeconfig", lab.url, ca, CONTEXT, token=token, insecure=problem == "insecure"
    )
    args = ["audit", "--kubeconfig", str(config)]
    if problem == "no-context":
        args += ["--context", "prod"]
    result = cli(*args)
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("poolgate: error: "), result.stderr
    assert expected in lines[0]


def test_eks_context_names_are_one_uri_segment(lab: ApiServer, pki: Pki, tmp_path: Path) -> None:
    arn = "arn:aws:eks:us-east-1:123456789012:cluster/gpu-prod"
    config = write_kubeconfig(tmp_path / "kubeconfig", lab.url, pki.ca, arn, token=TOKEN)
    result = cli(
        "audit",
        "--kubeconfig",
        str(config),
        "--format",
        "json",
        "--format",
        "sarif",
        "--output",
        "-",
        "--output",
        str(tmp_path / "audit.sarif"),
    )
    encoded = "arn%3Aaws%3Aeks%3Aus-east-1%3A123456789012%3Acluster%2Fgpu-prod"
    uris = {f["location"]["uri"] for f in report(result)["findings"]}
    assert f"cluster://{encoded}/ml-research/Pod/llama-finetune-0" in uris
    sarif = json.loads((tmp_path / "audit.sarif").read_text())
    locations = [r["locations"][0] for r in sarif["runs"][0]["results"]]
    # SARIF moves a context that is not a host name behind an empty authority,
    # encoded once (not %253A).
    assert f"cluster:///{encoded}/ml-research/Pod/llama-finetune-0" in {
        loc["logicalLocations"][0]["properties"]["uri"] for loc in locations
    }
    assert "ml-research/Pod/llama-finetune-0" in {
        loc["logicalLocations"][0]["fullyQualifiedName"] for loc in locations
    }


def test_progress_on_stderr(kubeconfig: Path) -> None:
    quiet = cli("audit", "--kubeconfig", str(kubeconfig), "--format", "json")
    assert quiet.stderr == ""
    loud = cli("audit", "--kubeconfig", str(kubeconfig), "--format", "json", "--progress")
    lines = loud.stderr.splitlines()
    assert "  pods: 3" in lines
    assert "  configmaps: 1 in gpu-operator" in lines
    assert "  clusterpolicies.nvidia.com: 1" in lines
    assert not [line for line in lines if "karpenter" in line]  # not served: quiet


def test_drift_since_last_night(pki: Pki, tmp_path: Path) -> None:
    lab_objects = objects("lab")
    with ApiServer(lab_objects, pki, TOKEN) as server:
        config = write_kubeconfig(tmp_path / "kubeconfig", server.url, pki.ca, CONTEXT, token=TOKEN)
        last_night = tmp_path / "last.json"
        first = cli("audit", "--kubeconfig", str(config), "--format", "json", "-o", str(last_night))
        assert first.returncode == 1, first.stderr
    # Overnight: the privileged debug pod is gone, a new unpinned pod appeared.
    tonight = [o for o in lab_objects if o["metadata"]["name"] != "debug-shell"]
    tonight.append(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "scratch", "namespace": "ml-research"},
            "spec": {"containers": [{"name": "sh", "image": "busybox:1.36"}]},
            "status": {"phase": "Running"},
        }
    )
    with ApiServer(tonight, pki, TOKEN) as server:
        config = write_kubeconfig(tmp_path / "kubeconfig", server.url, pki.ca, CONTEXT, token=TOKEN)
        as_json = cli(
            "audit", "--kubeconfig", str(config), "--format", "json", "--compare", str(last_night)
        )
        as_text = cli("audit", "--kubeconfig", str(config), "--compare", str(last_night))
    document = report(as_json)
    drift = document["drift"]
    resolved = {(f["ruleId"], f["object"]["name"]) for f in drift["resolved"]}
    assert ("PG301", "debug-shell") in resolved
    new = {f["fingerprint"] for f in document["findings"] if f.get("drift") == "new"}
    assert new == set(drift["new"])
    assert {f["object"]["name"] for f in document["findings"] if f.get("drift") == "new"} == {
        "scratch"
    }
    assert drift["counts"]["unchanged"] == len(drift["unchanged"]) > 0
    first_line = as_text.stdout.splitlines()[0]
    assert first_line.startswith(f"Since the last audit ({last_night}): ")
    assert f"{drift['counts']['new']} new," in first_line
    assert "  resolved   cluster://admin%40gpu-lab/ml-research/Pod/debug-shell error PG301" in (
        as_text.stdout
    )


def test_drift_does_not_call_unreadable_findings_resolved(pki: Pki, tmp_path: Path) -> None:
    with ApiServer(objects("lab"), pki, TOKEN) as server:
        config = write_kubeconfig(tmp_path / "kubeconfig", server.url, pki.ca, CONTEXT, token=TOKEN)
        last_night = tmp_path / "last.json"
        cli("audit", "--kubeconfig", str(config), "--format", "json", "-o", str(last_night))
        server.behaviour.forbidden.add("pods")
        result = cli(
            "audit", "--kubeconfig", str(config), "--format", "json", "--compare", str(last_night)
        )
    drift = report(result)["drift"]
    assert not [f for f in drift["resolved"] if f["object"]["kind"] == "Pod"]
    assert ("PG603", "llama-finetune-0") in {
        (f["ruleId"], f["object"]["name"]) for f in drift["unverified"]
    }


NEEDY_RULE = """\
id: ACME601
name: namespace-needs-policies
level: error
summary: A rule whose facts come from NetworkPolicies.
description: Fires on every namespace; stands for a rule that joins NetworkPolicies.
remediation: None needed.
subject: object
modes: [audit]
needs: [NetworkPolicy]
match:
  kinds: [Namespace]
violations: '[{"message": "checked against NetworkPolicies"}]'
"""


def test_a_rule_that_needs_a_forbidden_kind_does_not_run(
    lab: ApiServer, kubeconfig: Path, tmp_path: Path
) -> None:
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "ACME601-namespace-needs-policies.yaml").write_text(NEEDY_RULE)
    args = ["audit", "--kubeconfig", str(kubeconfig), "--rules", str(rules), "--format", "json"]
    assert "ACME601" in rule_ids(report(cli(*args)))
    lab.behaviour.forbidden.add("networkpolicies.networking.k8s.io")
    document = report(cli(*args))
    assert "ACME601" not in rule_ids(document)
    [note] = document["notifications"]
    assert note["message"].startswith("cannot list NetworkPolicy.networking.k8s.io: forbidden")
    assert "rules that did not run: ACME601" in note["message"]
    # The snapshot remembers, and auditing it says the same.
    snap = tmp_path / "snap.json"
    taken = cli("snapshot", "--kubeconfig", str(kubeconfig), "--rules", str(rules), "-o", str(snap))
    assert taken.returncode == 3
    assert "poolgate: warning: could not list NetworkPolicy.networking.k8s.io: forbidden" in (
        taken.stderr
    )
    offline = report(
        cli("audit", "--snapshot", str(snap), "--rules", str(rules), "--format", "json")
    )
    assert offline["notifications"] == document["notifications"]
    assert findings(offline) == findings(document)


def test_a_kind_gone_since_discovery_is_simply_empty(lab: ApiServer, kubeconfig: Path) -> None:
    lab.behaviour.faults["clusterpolicies.nvidia.com"] = [Fault(status=404)]
    result = cli("audit", "--kubeconfig", str(kubeconfig), "--format", "json")
    document = report(result)
    assert document["notifications"] == []
    assert not [f for f in document["findings"] if f["object"]["kind"] == "ClusterPolicy"]


def test_no_kubeconfig_anywhere_is_a_usage_line() -> None:
    result = cli("audit")
    assert result.returncode == 2
    assert result.stderr.startswith("poolgate: error: kubeconfig ")
    assert "does not exist" in result.stderr and len(result.stderr.splitlines()) == 1


def test_snapshot_and_kubeconfig_exclude_each_other(kubeconfig: Path, tmp_path: Path) -> None:
    result = cli("audit", "--kubeconfig", str(kubeconfig), "--snapshot", str(tmp_path / "s.json"))
    assert result.returncode == 2
    assert "--snapshot and --kubeconfig exclude each other" in result.stderr


def test_an_api_server_that_stops_answering_still_gives_a_report(
    lab: ApiServer, kubeconfig: Path
) -> None:
    """Found in review: with no overall budget, an API server that stopped answering
    after discovery kept the nightly Job busy past its activeDeadlineSeconds, which
    killed it with no report. Past --deadline the kinds left are reported as not
    read, with the rules they stopped (exit code 3), and the report is written."""
    import time

    for kind in lab.kinds:
        lab.behaviour.faults[kind.label] = [Fault(delay=0.6)] * 10
    started = time.monotonic()
    limits = ("--request-timeout", "0.3", "--deadline", "1")
    result = cli("audit", "--kubeconfig", str(kubeconfig), "--format", "json", *limits)
    assert time.monotonic() - started < 10
    assert result.returncode == 3, result.stderr
    notes = [note["message"] for note in report(result)["notifications"]]
    assert any(note.startswith("cannot list Pod: not read: the deadline") for note in notes)
    assert any("rules that did not run: " in note for note in notes)
    assert len(notes) > 10  # every kind the lab serves and the rules read


def _fixture(path: str) -> list[dict[str, Any]]:
    text = (ROOT / "fixtures/rules" / path).read_text()
    return [body for body in yaml.safe_load_all(text) if body]


KUEUE = (
    _k("kueue.x-k8s.io/v1beta1", "LocalQueue", "localqueues", True, custom=True),
    _k("kueue.x-k8s.io/v1beta1", "ClusterQueue", "clusterqueues", False, custom=True),
    _k("kueue.x-k8s.io/v1beta1", "ResourceFlavor", "resourceflavors", False, custom=True),
)


def test_kueue_queues_and_flavors_are_read_to_place_queued_jobs(pki: Pki, tmp_path: Path) -> None:
    """A cluster running Kueue: the audit lists LocalQueues, ClusterQueues and
    ResourceFlavors (``kueue.x-k8s.io``, served here at ``v1beta1`` only, as by a Kueue
    before v0.15), so a suspended job its flavor places (SKU label and GPU toleration
    added at admission) gets no PG104 or PG105, while one whose flavor adds nothing is
    judged as written. With LocalQueues forbidden those rules do not run at all: they
    would otherwise have to guess where Kueue sends the job."""
    placed, judged = (
        _fixture("PG104/pass-kueue-flavor.yaml"),
        _fixture("PG105/fire-kueue-flavor-adds-nothing.yaml"),
    )
    with ApiServer(placed, pki, TOKEN, DEFAULT_KINDS + KUEUE) as server:
        config = write_kubeconfig(tmp_path / "kubeconfig", server.url, pki.ca, CONTEXT, token=TOKEN)
        result = cli("audit", "--kubeconfig", str(config), "--format", "json")
        listed = [path for path in server.paths() if "/kueue.x-k8s.io/" in path]
        server.behaviour.forbidden.add("localqueues.kueue.x-k8s.io")
        blocked = cli(
            "audit", "--kubeconfig", str(config), "--format", "json", "--fail-on", "never"
        )
    assert result.returncode in (0, 1), result.stdout + result.stderr
    assert not {"PG104", "PG105"} & rule_ids(report(result))
    for plural in ("localqueues", "clusterqueues", "resourceflavors"):
        assert any(path.endswith(f"/kueue.x-k8s.io/v1beta1/{plural}") for path in listed), listed
    assert blocked.returncode == 3, blocked.stdout + blocked.stderr
    [note] = [n for n in report(blocked)["notifications"] if "LocalQueue" in n["message"]]
    assert note["message"].startswith("cannot list LocalQueue.kueue.x-k8s.io: forbidden")
    stopped = note["message"].split("; rules that did not run: ")[1].split(";")[0].split(", ")
    assert {"PG104", "PG105", "PG106", "PG108", "PG201"} <= set(stopped)
    with ApiServer(judged, pki, TOKEN, DEFAULT_KINDS + KUEUE) as server:
        config = write_kubeconfig(tmp_path / "kubeconfig", server.url, pki.ca, CONTEXT, token=TOKEN)
        result = cli("audit", "--kubeconfig", str(config), "--format", "json")
    assert "PG105" in rule_ids(report(result)), result.stdout
