"""``--format policyreport``: wgpolicyk8s.io/v1alpha2 reports, valid against the upstream CRDs.

Every stream here is validated against the vendored CRD schema (tests/policyreport_crd.py,
strict about unknown fields, which the API server would silently drop).
"""

from __future__ import annotations

import dataclasses
import datetime
import io
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import cli_run
import policyreport_crd
import pytest
import yaml

from scanner.findings.records import Finding, Level, Location, Notification
from scanner.findings.report import Report
from scanner.inventory import ObjectRef
from scanner.reporters import FORMATS
from scanner.reporters import policyreport as pr

from .conftest import NODE, RULES

WHEN = datetime.datetime(2025, 6, 1, 2, 17, 30, 123456, tzinfo=datetime.UTC)
DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def build(report: Report, **found: Any) -> list[dict[str, Any]]:
    objects = pr.build(report, pr.Found(WHEN, **found))
    policyreport_crd.validate_all(objects)
    return objects


def by_name(objects: list[dict[str, Any]]) -> dict[tuple[str, str, str], dict[str, Any]]:
    return {
        (o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]): o for o in objects
    }


def results(objects: list[dict[str, Any]], rule: str) -> list[dict[str, Any]]:
    return [r for o in objects for r in o["results"] if r.get("rule") == rule]


def test_the_format_is_registered() -> None:
    assert "policyreport" in FORMATS


def test_each_finding_maps_to_a_result(report: Report) -> None:
    objects = build(report, uids={NODE: "0f1e2d3c-node"})
    reports = by_name(objects)
    assert set(reports) == {
        ("ClusterPolicyReport", "", "poolgate"),
        ("PolicyReport", "ml", "poolgate"),
    }
    [privileged] = results(objects, "PG301")
    assert privileged == {
        "policy": "PG301-privileged-outside-operator",
        "rule": "PG301",
        "result": "fail",
        "severity": "high",  # securitySeverity 8.0
        "category": "security",
        "message": 'container "cuda" runs privileged',
        "source": "poolgate",
        "scored": True,
        "timestamp": {"seconds": int(WHEN.timestamp()), "nanos": 123456000},
        "resources": [
            {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "ml", "name": "train"}
        ],
        "properties": {
            "level": "error",
            "fingerprint": report.findings[
                [f.rule_id for f in report.findings].index("PG301")
            ].fingerprint,
            "path": "spec.template.spec.containers[0].securityContext",
            "file": "k8s/train.yaml:12",
        },
    }
    assert privileged in reports[("PolicyReport", "ml", "poolgate")]["results"]


def test_suppressed_findings_are_skip_with_their_reason(report: Report) -> None:
    [suppressed] = results(build(report), "PG204")
    assert suppressed["result"] == "skip"
    assert suppressed["severity"] == "medium"  # a warning without securitySeverity
    assert suppressed["properties"]["suppression"] == "in-source"
    assert suppressed["properties"]["justification"] == "pool is untainted during migration"


def test_rule_errors_are_error_results(report: Report) -> None:
    [errored] = results(build(report), "PG103")
    assert errored["result"] == "error"
    assert errored["message"] == "no such key: runtimeClassName"
    assert errored["category"] == "gpu"  # the rule's first tag


def test_cluster_scoped_objects_and_documents_without_identity_go_to_the_cluster_report(
    report: Report,
) -> None:
    objects = build(report, uids={NODE: "0f1e2d3c-node"})
    cluster = by_name(objects)[("ClusterPolicyReport", "", "poolgate")]
    node, broken = sorted(cluster["results"], key=lambda r: r["rule"], reverse=True)
    assert node["rule"] == "PG401" and node["severity"] == "info"  # a note
    assert node["resources"] == [
        {"apiVersion": "v1", "kind": "Node", "name": "gpu-node-1", "uid": "0f1e2d3c-node"}
    ]
    assert "file" not in node["properties"]  # a live object has no file
    assert broken["rule"] == "PG001"
    assert broken["policy"] == "PG001"  # not in the run's catalog: the id alone
    assert "resources" not in broken and "category" not in broken
    assert broken["properties"]["file"] == "bad dir/broken#1.yaml:3"


def test_summary_counts_the_results_of_each_report(report: Report) -> None:
    reports = by_name(build(report))
    assert reports[("PolicyReport", "ml", "poolgate")]["summary"] == {
        "pass": 0,
        "fail": 1,
        "warn": 0,
        "error": 1,
        "skip": 1,
    }
    assert reports[("ClusterPolicyReport", "", "poolgate")]["summary"]["fail"] == 2


def test_results_are_ordered_failures_first_then_errors_then_skipped(report: Report) -> None:
    [ml] = [o for o in build(report) if o["metadata"].get("namespace") == "ml"]
    assert [r["result"] for r in ml["results"]] == ["fail", "error", "skip"]


@pytest.mark.parametrize(
    ("level", "score", "expected"),
    [
        (Level.ERROR, 9.0, "critical"),
        (Level.ERROR, 8.9, "high"),
        (Level.WARNING, 7.0, "high"),
        (Level.ERROR, 6.9, "medium"),
        (Level.ERROR, 4.0, "medium"),
        (Level.ERROR, 3.9, "low"),
        (Level.ERROR, 0.0, "info"),
        (Level.ERROR, None, "high"),
        (Level.WARNING, None, "medium"),
        (Level.NOTE, 9.5, "info"),  # turned down to a note: informational
    ],
)
def test_severity(level: Level, score: float | None, expected: str) -> None:
    doc = dataclasses.replace(RULES[2], security_severity=score)
    assert pr.severity(level, doc) == expected


def test_error_notifications_are_error_results_so_a_partial_read_never_looks_clean(
    make_report: Callable[..., Report],
) -> None:
    forbidden = Notification(
        Level.ERROR,
        "cannot list Pod: forbidden: 403 Forbidden: pods is forbidden; rules that did not run: PG603",
    )
    objects = build(
        make_report(findings=(), notifications=(forbidden, *make_report().notifications))
    )
    [cluster] = objects  # no findings: only the cluster report
    assert cluster["results"] == [
        {
            "policy": "poolgate",
            "result": "error",
            "message": forbidden.message,
            "source": "poolgate",
            "scored": False,
            "timestamp": {"seconds": int(WHEN.timestamp()), "nanos": 123456000},
        }
    ]
    assert cluster["summary"]["error"] == 1


def test_a_clean_run_still_writes_an_empty_cluster_report(
    make_report: Callable[..., Report],
) -> None:
    [cluster] = build(make_report(findings=(), notifications=()))
    assert cluster["kind"] == "ClusterPolicyReport" and cluster["results"] == []
    assert cluster["metadata"] == {
        "name": "poolgate",
        "labels": {"app.kubernetes.io/managed-by": "poolgate"},
        "annotations": {"poolgate.io/version": "0.1.0"},
    }


def _finding(ref: ObjectRef | None, source_type: str = "file", **changes: Any) -> Finding:
    finding = Finding(
        rule_id="PG301",
        level=Level.ERROR,
        message="privileged",
        location=Location("k8s/x.yaml", 3, 5, "spec"),
        ref=ref,
        source_type=source_type,
    )
    return dataclasses.replace(finding, **changes)


@pytest.mark.parametrize(
    ("ref", "source_type", "report_namespace", "resource_namespace"),
    [
        # A manifest that names no namespace lands in default, as kubectl apply puts it.
        (ObjectRef("apps/v1", "Deployment", "", "api"), "file", "default", "default"),
        # Cluster-scoped kinds, from manifests too.
        (ObjectRef("v1", "Namespace", "", "ml"), "file", "", None),
        (ObjectRef("nvidia.com/v1", "ClusterPolicy", "", "cluster-policy"), "file", "", None),
        (ObjectRef("storage.k8s.io/v1", "StorageClass", "", "fast"), "file", "", None),
        # A live object without a namespace is cluster-scoped, whatever its kind.
        (ObjectRef("example.com/v1", "Widget", "", "w"), "cluster", "", None),
        # A namespace that is not a valid name cannot hold a report.
        (ObjectRef("v1", "Pod", "Team_A", "p"), "file", "", "Team_A"),
        (ObjectRef("v1", "Pod", "x" * 64, "p"), "file", "", "x" * 64),
    ],
)
def test_where_a_result_goes(
    make_report: Callable[..., Report],
    ref: ObjectRef,
    source_type: str,
    report_namespace: str,
    resource_namespace: str | None,
) -> None:
    objects = build(make_report(findings=(_finding(ref, source_type),), notifications=()))
    [holder] = [o for o in objects if o["results"]]
    assert holder.get("metadata", {}).get("namespace", "") == report_namespace
    assert holder["kind"] == ("PolicyReport" if report_namespace else "ClusterPolicyReport")
    [resource] = holder["results"][0]["resources"]
    assert resource.get("namespace") == resource_namespace


def test_the_cluster_itself_is_the_scope_not_a_resource(make_report: Callable[..., Report]) -> None:
    cluster = ObjectRef("poolgate.io/v1alpha1", "Cluster", "", "cluster")
    finding = _finding(cluster, "cluster", rule_id="PG605", level=Level.WARNING)
    [report] = build(make_report(findings=(finding,), notifications=()))
    [result] = report["results"]
    assert "resources" not in result and result["rule"] == "PG605"


def test_strings_from_the_input_are_capped_and_always_encodable(
    make_report: Callable[..., Report],
) -> None:
    huge = ObjectRef("v1", "Pod", "ml", "p" * 100_000)
    odd = _finding(
        huge, message="name \udcff\x1b[31m not UTF-8", location=Location("k8s/\udcfe.yaml", 1, 1)
    )
    stream = io.StringIO()
    pr.write(make_report(findings=(odd,), notifications=()), stream, found=pr.Found(WHEN))
    text = stream.getvalue()
    text.encode("utf-8")  # no lone surrogate left
    objects = policyreport_crd.load_stream(text)
    [result] = [r for o in objects for r in o["results"]]
    assert len(result["resources"][0]["name"]) == pr.STRING_LIMIT
    assert result["message"] == "name \\udcff\x1b[31m not UTF-8"
    assert result["properties"]["file"] == "k8s/\\udcfe.yaml:1"


def test_the_stream_is_plain_yaml_kubectl_reads(report: Report) -> None:
    stream = io.StringIO()
    pr.write(report, stream, found=pr.Found(WHEN))
    text = stream.getvalue()
    assert "&id" not in text and "*id" not in text and "!!" not in text  # no aliases, no tags
    assert policyreport_crd.load_stream(text) == pr.build(report, pr.Found(WHEN))


def stored_size(obj: dict[str, Any]) -> int:
    """The bytes of ``obj`` as etcd stores a custom resource: compact JSON."""
    return len(json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode())


def _many(count: int, namespace: str = "ml") -> list[Finding]:
    levels = (Level.NOTE, Level.WARNING, Level.ERROR)
    return [
        Finding(
            rule_id="PG999",  # not in the catalog: severity from the level alone
            level=levels[index % 3],
            message=f"container {index} runs privileged " + "x" * 400,
            location=Location("k8s/many.yaml", index + 1, 1, f"spec.containers[{index}]"),
            ref=ObjectRef("v1", "Pod", namespace, f"pod-{index}"),
        )
        for index in range(count)
    ]


def test_a_large_namespace_is_split_into_reports_of_bounded_size(
    make_report: Callable[..., Report],
) -> None:
    findings = _many(3000)
    objects = build(make_report(findings=findings, notifications=()))
    parts = [o for o in objects if o["kind"] == "PolicyReport"]
    assert 1 < len(parts) < pr.MAX_REPORTS
    assert [o["metadata"]["name"] for o in parts] == [
        "poolgate",
        *(f"poolgate-{n}" for n in range(2, len(parts) + 1)),
    ]
    for part in parts:
        assert stored_size(part) <= pr.MAX_REPORT_BYTES
        assert pr.LEFT_OUT_ANNOTATION not in part["metadata"]["annotations"]
    assert sum(len(o["results"]) for o in parts) == 3000
    assert sum(o["summary"]["fail"] for o in parts) == 3000


def test_a_namespace_past_the_limit_keeps_the_most_severe_and_says_what_it_left_out(
    make_report: Callable[..., Report],
) -> None:
    findings = _many(12_000)  # 4,000 each of errors, warnings and notes; ~5,900 fit
    objects = build(make_report(findings=findings, notifications=()))
    parts = [o for o in objects if o["kind"] == "PolicyReport"]
    assert len(parts) == pr.MAX_REPORTS
    for part in parts:
        assert stored_size(part) <= pr.MAX_REPORT_BYTES
    listed = [r for o in parts for r in o["results"] if r["rule"] == "PG999"]
    left_out = 12_000 - len(listed)
    assert left_out > 0
    note = parts[-1]["results"][-1]
    assert note["rule"] == "results-left-out" and note["result"] == "warn"
    assert f"{left_out:,} more results for namespace ml are not listed" in note["message"]
    assert {p["metadata"]["annotations"][pr.LEFT_OUT_ANNOTATION] for p in parts} == {str(left_out)}
    # Errors first, then warnings; what was left out is the rest of the warnings and
    # every note.
    severities = [r["severity"] for r in listed]
    assert severities == sorted(severities, key=["high", "medium", "info"].index)
    assert severities.count("high") == 4000
    assert 0 < severities.count("medium") < 4000
    assert "info" not in severities


def _scan(*args: str, cwd: Path = cli_run.ROOT) -> Any:
    return cli_run.poolgate("scan", *args, cwd=cwd)


def test_scan_of_the_demo_writes_valid_reports(tmp_path: Path) -> None:
    out = tmp_path / "reports.yaml"
    result = _scan("fixtures/demo", "--format", "policyreport", "--output", str(out))
    assert result.returncode == 1, result.stderr
    objects = policyreport_crd.load_stream(out.read_text(encoding="utf-8"))
    summary = json.loads(_scan("fixtures/demo", "--format", "json").stdout)["summary"]
    assert sum(o["summary"]["fail"] for o in objects) == summary["findings"] == 22
    assert objects[0]["kind"] == "ClusterPolicyReport"
    namespaces = [o["metadata"]["namespace"] for o in objects[1:]]
    assert namespaces == sorted(namespaces) and len(set(namespaces)) == len(namespaces)
    for obj in objects:
        assert DNS_SUBDOMAIN.fullmatch(obj["metadata"]["name"])
        assert obj["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "poolgate"}
        for item in obj["results"]:
            assert item["source"] == "poolgate" and item["policy"].startswith(item["rule"] + "-")
            assert re.fullmatch(r".+\.ya?ml:\d+", item["properties"]["file"]), item


def test_names_and_results_are_stable_across_runs(tmp_path: Path) -> None:
    first, second = (
        yaml.safe_load_all(_scan("fixtures/demo", "--format", "policyreport").stdout)
        for _ in range(2)
    )

    def without_time(docs: Any) -> list[Any]:
        kept = []
        for doc in docs:
            for item in doc["results"]:
                item.pop("timestamp")
            kept.append(doc)
        return kept

    assert without_time(first) == without_time(second)


def test_a_manifest_without_a_namespace_is_reported_in_default(tmp_path: Path) -> None:
    (tmp_path / "pod.yaml").write_text(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: trainer\nspec:\n  containers:\n"
        "    - name: cuda\n      image: nvcr.io/nvidia/cuda:12.4.1\n"
        "      securityContext: {privileged: true}\n"
        "      resources: {limits: {nvidia.com/gpu: 1}}\n",
        encoding="utf-8",
    )
    result = _scan("pod.yaml", "--format", "policyreport", cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    objects = policyreport_crd.load_stream(result.stdout)
    [default] = [o for o in objects if o["kind"] == "PolicyReport"]
    assert default["metadata"]["namespace"] == "default"
    assert {r["rule"] for r in default["results"]} >= {"PG301"}
    assert all(r["resources"][0]["namespace"] == "default" for r in default["results"])
