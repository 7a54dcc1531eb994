"""Hand-built reports covering the cases every reporter must lay out.

The findings are chosen for their edges: a violation with a field path, a
suppressed one, a rule that errored, a live-cluster object, a document without
identity whose rule is not in the catalog, and a file name that needs
percent-encoding.
"""

from __future__ import annotations

import dataclasses
import io
from collections.abc import Callable

import pytest

from scanner.config.provenance import Comparison, PolicyChange, PolicyFile, PolicyRecord
from scanner.findings.fleet import Fleet, PoolSummary, Tenant
from scanner.findings.records import (
    Finding,
    Level,
    Location,
    Notification,
    Outcome,
    Suppression,
    sort_findings,
)
from scanner.findings.report import Report, RunStats
from scanner.inventory import ObjectRef
from scanner.reporters import PLAIN, Display, writer_for
from scanner.ruleset.docs import RuleDoc

TRAIN = ObjectRef("apps/v1", "Deployment", "ml", "train")
NODE = ObjectRef("v1", "Node", "", "gpu-node-1")

RULES = (
    RuleDoc(
        id="PG103",
        name="gpu-runtime-class",
        level=Level.WARNING,
        summary="GPU workloads use the nvidia RuntimeClass.",
        description="Without the NVIDIA runtime the container cannot see the devices.",
        remediation="Set spec.runtimeClassName: nvidia.",
        subject="workload",
        source="rules/PG103-gpu-runtime-class.yaml",
        tags=("gpu", "runtime"),
    ),
    RuleDoc(
        id="PG204",
        name="pool-toleration",
        level=Level.WARNING,
        summary="GPU workloads tolerate their pool's taint.",
        description="A pod without the pool toleration never schedules on the pool.",
        remediation="Add the pool toleration.",
        subject="workload",
        source="rules/PG204-pool-toleration.yaml",
    ),
    RuleDoc(
        id="PG301",
        name="privileged-outside-operator",
        level=Level.ERROR,
        summary="Only the GPU Operator namespace may run privileged containers.",
        description="A privileged container owns the node and every GPU on it.",
        remediation="Drop privileged: true.",
        subject="workload",
        source="rules/PG301-privileged-outside-operator.yaml",
        security_severity=8.0,
        tags=("security", "gpu"),
    ),
    RuleDoc(
        id="PG401",
        name="node-pool-label",
        level=Level.NOTE,
        summary="GPU nodes carry a pool label.",
        description="Unlabelled GPU nodes fall outside every pool contract.",
        remediation="Label the node with its pool.",
        subject="node",
        source="rules/PG401-node-pool-label.yaml",
    ),
)

FINDINGS = sort_findings(
    [
        Finding(
            rule_id="PG301",
            level=Level.ERROR,
            message='container "cuda" runs privileged',
            location=Location(
                "k8s/train.yaml", 12, 9, "spec.template.spec.containers[0].securityContext"
            ),
            ref=TRAIN,
        ),
        Finding(
            rule_id="PG204",
            level=Level.WARNING,
            message="no toleration for taint nvidia.com/gpu",
            location=Location("k8s/train.yaml", 20, 7, "spec.template.spec.tolerations"),
            ref=TRAIN,
            suppression=Suppression("in-source", "pool is untainted during migration"),
        ),
        Finding(
            rule_id="PG103",
            level=Level.WARNING,
            message="no such key: runtimeClassName",
            location=Location("k8s/train.yaml", 5, 3, "spec.template.spec"),
            ref=TRAIN,
            outcome=Outcome.ERROR,
        ),
        Finding(
            rule_id="PG401",
            level=Level.NOTE,
            message="node has no pool label",
            location=Location("cluster://prod@eks/v1/Node/gpu-node-1", 0, 0, "metadata.labels"),
            ref=NODE,
            source_type="cluster",
        ),
        Finding(
            rule_id="PG001",
            level=Level.ERROR,
            message="mapping values are not allowed here",
            location=Location("bad dir/broken#1.yaml", 3, 14),
            ref=None,
        ),
    ]
)

NOTIFICATIONS = (
    Notification(Level.WARNING, "cannot read: permission denied", uri="k8s/secret.yaml"),
    Notification(Level.NOTE, "rule disabled by config", rule_id="PG204"),
)


POLICY = PolicyRecord(
    source="git-ref",
    path=".poolgate.yaml",
    sha256="a" * 64,
    ref="origin/main",
    commit="c" * 40,
    rule_files=(PolicyFile("policy/rules/ACME001.yaml", "b" * 64, "git-ref"),),
    baseline=PolicyFile("poolgate-baseline.json", "d" * 64, "git-ref"),
    compared=Comparison("origin/main", "c" * 40, (PolicyChange("k8s/.poolgate.yaml", "added"),)),
)
"""A run whose policy came from a pull request's base, which the pull request changes."""

POLICY_JSON = {
    "path": ".poolgate.yaml",
    "source": "git-ref",
    "ref": "origin/main",
    "commit": "c" * 40,
    "sha256": "a" * 64,
    "ruleFiles": [{"path": "policy/rules/ACME001.yaml", "source": "git-ref", "sha256": "b" * 64}],
    "baseline": {"path": "poolgate-baseline.json", "source": "git-ref", "sha256": "d" * 64},
    "workTreeChanges": {
        "ref": "origin/main",
        "commit": "c" * 40,
        "files": [{"path": "k8s/.poolgate.yaml", "change": "added"}],
    },
}
"""``POLICY`` as the JSON report's ``config`` and SARIF's ``poolgateConfig`` spell it."""


FLEET = Fleet(
    pools=(
        PoolSummary(
            name="h100-shared",
            skus=("h100",),
            products=("NVIDIA-H100-80GB-HBM3",),
            sharing="time-slicing",
            mig_strategies=(),
            trust_domains=("research", "serving"),
            tenants=(Tenant("ml", "research", 2), Tenant("serve", "serving", 1)),
            nodes=2,
            declarations=0,
            gpus=16,
            members=("Node/gpu-node-1", "Node/gpu-node-2"),
        ),
        PoolSummary(
            name="a100-mig",
            skus=("a100",),
            products=(),
            sharing="mig",
            mig_strategies=("single",),
            trust_domains=(),
            tenants=(),
            nodes=0,
            declarations=1,
            gpus=0,
            members=("NodePool/a100-mig",),
        ),
    ),
    trust_domains={"ml": "research", "serve": "serving"},
)
"""Two pools: one time-sliced across two trust domains whose first node has a finding
(PG401 on ``gpu-node-1``), one MIG pool declared by a Karpenter NodePool."""

FLEET_JSON = {
    "pools": [
        {
            "name": "h100-shared",
            "skus": ["h100"],
            "products": ["NVIDIA-H100-80GB-HBM3"],
            "sharing": "time-slicing",
            "migStrategies": [],
            "trustDomains": ["research", "serving"],
            "tenants": [
                {"namespace": "ml", "trustDomain": "research", "workloads": 2},
                {"namespace": "serve", "trustDomain": "serving", "workloads": 1},
            ],
            "nodes": 2,
            "declarations": 0,
            "gpus": 16,
            "members": ["Node/gpu-node-1", "Node/gpu-node-2"],
        },
        {
            "name": "a100-mig",
            "skus": ["a100"],
            "products": [],
            "sharing": "mig",
            "migStrategies": ["single"],
            "trustDomains": [],
            "tenants": [],
            "nodes": 0,
            "declarations": 1,
            "gpus": 0,
            "members": ["NodePool/a100-mig"],
        },
    ],
    "trustDomains": {"ml": "research", "serve": "serving"},
}


def _make_report(**changes: object) -> Report:
    report = Report(
        findings=FINDINGS,
        notifications=NOTIFICATIONS,
        rules=RULES,
        tool_version="0.1.0",
        repo_root="/work/repo with space",
        stats=RunStats(files=4, objects=12, skipped_documents=2, subjects=10),
    )
    return dataclasses.replace(report, **changes)  # type: ignore[arg-type]


@pytest.fixture
def make_report() -> Callable[..., Report]:
    """The standard report, with any ``Report`` field replaced by keyword."""
    return _make_report


@pytest.fixture
def report() -> Report:
    return _make_report()


@pytest.fixture
def render() -> Callable[..., str]:
    """Run a format's registered writer into a string, the way the CLI would: the
    report, the format and (for the reports for people) a ``Display``."""

    def run(report: Report, fmt: str, display: Display = PLAIN) -> str:
        stream = io.StringIO()
        writer_for(fmt, display)(report, stream)
        return stream.getvalue()

    return run
