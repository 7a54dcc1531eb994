"""PG605 in the audit: one finding about the cluster, at ``cluster://<context>/_cluster``,
in every reporter; not run when the admission kinds cannot be read."""

from __future__ import annotations

import datetime
import io
import json
from dataclasses import replace
from functools import cache
from typing import Any

import pytest

from scanner.audit import run as audit
from scanner.audit.reads import reads
from scanner.config.values import Config, Require
from scanner.findings import drift
from scanner.findings.records import Finding
from scanner.findings.report import Report
from scanner.kinds import WORKLOAD_KINDS
from scanner.kinds.resources import RESOURCES
from scanner.pipeline import Ruleset, ScanOptions, load_ruleset
from scanner.reporters import writer_for
from scanner.sources.snapshot import Capture, Unavailable

NOW = datetime.datetime(2025, 6, 1, 2, 17, tzinfo=datetime.UTC)
EVERY_KIND = frozenset(resource.key for resource in RESOURCES)
CONTEXT = "arn:aws:eks:eu-west-1:1:cluster/prod"
URI = "cluster://arn%3Aaws%3Aeks%3Aeu-west-1%3A1%3Acluster%2Fprod/_cluster"

GPU_POD: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "train-0", "namespace": "ml"},
    "spec": {
        "runtimeClassName": "nvidia",
        "nodeSelector": {"sku": "h100"},
        "containers": [{"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": 1}}}],
    },
    "status": {"phase": "Running"},
}
PODS_ON_CREATE = {
    "resourceRules": [
        {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}
    ]
}


def vap(name: str, expression: str, match: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": {
            "matchConstraints": match or PODS_ON_CREATE,
            "validations": [{"expression": expression}],
        },
    }


def bind(policy: str, *actions: str) -> dict[str, Any]:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": policy},
        "spec": {"policyName": policy, "validationActions": list(actions)},
    }


RUNTIME_CLASS = "object.spec.runtimeClassName == 'nvidia'"
SKU = "'sku' in object.spec.nodeSelector"


@cache
def ruleset(engine: str = "cpp", runtime_class: str = "nvidia") -> Ruleset:
    config = Config(require=Require(runtime_class=runtime_class))
    return load_ruleset(ScanOptions(engine=engine, mode="audit", config=config))


def run(
    *objects: dict[str, Any],
    listed: frozenset[tuple[str, str]] | None = EVERY_KIND,
    unavailable: tuple[Unavailable, ...] = (),
    rules: Ruleset | None = None,
) -> tuple[Report, audit.Coverage]:
    capture = Capture(CONTEXT, NOW, list(objects), listed, list(unavailable))
    return audit.evaluate(capture, rules or ruleset())


def pg605(report: Report) -> list[Finding]:
    return [finding for finding in report.findings if finding.rule_id == "PG605"]


@pytest.mark.parametrize("engine", ["cpp", "python"])
def test_a_cluster_without_any_policy_is_one_finding_about_the_cluster(engine: str) -> None:
    report, _ = run(GPU_POD, rules=ruleset(engine))
    [finding] = pg605(report)
    assert finding.location.uri == URI
    # No position: a cluster object has no file and no lines.
    assert (finding.location.line, finding.location.column, finding.location.path) == (0, 0, "")
    assert finding.source_type == "cluster"
    assert finding.ref is not None and finding.ref.logical_name == "Cluster/cluster"
    assert finding.message == (
        "no ValidatingAdmissionPolicy with a Deny binding enforces runtimeClassName and the "
        "SKU/pool node selection for GPU pods (1 GPU workload, e.g. ml/Pod/train-0); "
        "the cluster has no ValidatingAdmissionPolicy"
    )


def test_the_fingerprint_does_not_depend_on_the_context() -> None:
    [prod] = pg605(run(GPU_POD)[0])
    capture = Capture("in-cluster", NOW, [GPU_POD], EVERY_KIND)
    [inside] = pg605(audit.evaluate(capture, ruleset())[0])
    assert inside.location.uri == "cluster://in-cluster/_cluster"
    assert inside.fingerprint == prod.fingerprint


def test_a_deny_bound_floor_is_quiet_and_warn_only_is_named() -> None:
    floor = vap("gpu-floor", f"{RUNTIME_CLASS} && {SKU}")
    assert pg605(run(GPU_POD, floor, bind("gpu-floor", "Deny"))[0]) == []
    [finding] = pg605(run(GPU_POD, floor, bind("gpu-floor", "Warn", "Audit"))[0])
    assert finding.message.endswith(
        "; ValidatingAdmissionPolicy 'gpu-floor' does not count: it is bound with "
        "validationActions Audit, Warn and not Deny: they report but admit the pod"
    )


def test_a_policy_on_pod_controllers_only_is_named() -> None:
    controllers = {
        "resourceRules": [
            {
                "apiGroups": ["apps"],
                "apiVersions": ["v1"],
                "operations": ["CREATE"],
                "resources": ["deployments", "statefulsets"],
            }
        ]
    }
    floor = vap("gpu-floor", f"{RUNTIME_CLASS} && {SKU}", controllers)
    [finding] = pg605(run(GPU_POD, floor, bind("gpu-floor", "Deny"))[0])
    assert finding.message.endswith(
        "'gpu-floor' does not count: it does not match Pods on CREATE (only pod controllers: "
        "deployments.apps, statefulsets.apps; pods created any other way are not checked)"
    )


def test_two_policies_may_share_the_floor_and_runtime_class_can_be_off() -> None:
    runtime = vap("runtime-class", RUNTIME_CLASS)
    sku = vap("sku", SKU)
    both = [runtime, bind("runtime-class", "Deny"), sku, bind("sku", "Deny", "Audit")]
    assert pg605(run(GPU_POD, *both)[0]) == []
    [finding] = pg605(run(GPU_POD, runtime, bind("runtime-class", "Deny"))[0])
    assert "enforces the SKU/pool node selection for GPU pods" in finding.message
    assert finding.message.endswith(
        "; no ValidatingAdmissionPolicy reads the SKU/pool node selection"
    )
    # require.runtimeClass: false (PG103 off): the SKU selection alone is the floor.
    off = ruleset("cpp", runtime_class="")
    assert pg605(run(GPU_POD, sku, bind("sku", "Deny"), rules=off)[0]) == []


def test_no_gpu_workloads_no_finding() -> None:
    cpu = {**GPU_POD, "spec": {"containers": [{"name": "c", "image": "x"}]}}
    assert pg605(run(cpu)[0]) == []


def test_forbidden_policies_stop_the_rule_with_a_notification() -> None:
    denied = Unavailable(
        "admissionregistration.k8s.io", "ValidatingAdmissionPolicy", "forbidden", "403 Forbidden"
    )
    listed = EVERY_KIND - {denied.key}
    report, covered = run(GPU_POD, listed=listed, unavailable=(denied,))
    assert pg605(report) == []
    assert "PG605" in covered.blocked
    [note] = report.notifications
    assert note.message.startswith(
        "cannot list ValidatingAdmissionPolicy.admissionregistration.k8s.io: forbidden"
    )
    assert "rules that did not run: PG605" in note.message
    assert "did not run on ValidatingAdmissionPolicy objects" not in note.message


def test_forbidden_pods_stop_pg605_and_leave_it_unverified_not_resolved() -> None:
    """The GPU workloads PG605 counts may be the pods it could not list: it does not run,
    and last night's finding must not turn into "resolved" in drift."""
    denied = Unavailable("", "Pod", "forbidden", "403 Forbidden")
    report, covered = run(listed=EVERY_KIND - {denied.key}, unavailable=(denied,))
    assert pg605(report) == []
    [note] = report.notifications
    assert note.message.startswith("cannot list Pod: forbidden")
    assert "PG605" in note.message.split("rules that did not run: ")[1].split(";")[0]
    assert "PG605" in covered.blocked
    checked = drift.checker({"PG605"} - covered.blocked, covered.unseen)
    assert not checked("PG605", "Cluster")


def test_a_dump_without_admission_kinds_does_not_run_the_rule() -> None:
    """A `kubectl get` dump cannot say "there are none": PG605 needs both kinds in it."""
    report, covered = run(GPU_POD, listed=None)
    assert pg605(report) == [] and "PG605" in covered.blocked
    assert any("PG605" in note.message for note in report.notifications)
    floor = vap("gpu-floor", RUNTIME_CLASS)
    [finding] = pg605(run(GPU_POD, floor, bind("gpu-floor", "Deny"), listed=None)[0])
    assert "enforces the SKU/pool node selection" in finding.message


def test_the_audit_lists_the_admission_kinds_for_pg605() -> None:
    rules = [rule for rule in ruleset().rules if rule.id == "PG605"]
    planned = {resource.key for resource in audit.plan(rules)}
    assert {
        ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy"),
        ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding"),
        ("", "Pod"),
        ("apps", "Deployment"),
    } <= planned
    # The GPU workloads it counts are joins: a 403 on one of them stops it.
    assert reads(rules[0]).subjects == frozenset()
    assert reads(rules[0]).joins >= WORKLOAD_KINDS


def test_pg605_does_not_run_in_scan() -> None:
    scan = load_ruleset(ScanOptions())
    assert "PG605" not in {rule.id for rule in scan.rules}


def render(report: Report, fmt: str) -> str:
    stream = io.StringIO()
    writer_for(fmt)(report, stream)
    return stream.getvalue()


def test_text_and_json_reporters() -> None:
    report = replace(run(GPU_POD)[0], repo_root="/work/repo")
    text = render(report, "text")
    assert f"\n{URI} warning PG605 no ValidatingAdmissionPolicy with a Deny binding" in (
        "\n" + text
    )
    [entry] = [f for f in json.loads(render(report, "json"))["findings"] if f["ruleId"] == "PG605"]
    assert entry["location"] == {"uri": URI, "line": None, "column": None, "path": ""}
    assert entry["object"] == {
        "apiVersion": "poolgate.io/v1alpha1",
        "kind": "Cluster",
        "namespace": "",
        "name": "cluster",
    }
