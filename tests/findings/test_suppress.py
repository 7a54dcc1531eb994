"""Suppressions (annotations and config exemptions), PG004, and ``--context`` scope."""

from __future__ import annotations

import datetime
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from cli_run import poolgate

from scanner.config.values import Config, Exemption
from scanner.findings.records import Finding, Level, Location, Outcome, Suppression
from scanner.findings.suppress import apply, exemption_matches, exemption_problem, parse_ignore
from scanner.inventory import ObjectRef, Origin
from scanner.sources.yaml.document import parse_stream

ROOT = Path(__file__).resolve().parents[2]
KNOWN = frozenset({"PG004", "PG301", "PG302", "PG401", "PG501"})
TODAY = datetime.date(2026, 6, 1)
DIGEST = "a" * 64

MANIFEST = f"""\
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: dcgm-exporter
  namespace: monitoring
  annotations:
    poolgate.io/ignore: "PG501=vendor image, pinned by the operator, PG401"
spec:
  template:
    spec:
      containers:
        - name: exporter
          image: nvcr.io/nvidia/k8s/dcgm-exporter:3.3
          securityContext:
            privileged: true
---
apiVersion: v1
kind: Pod
metadata:
  name: notebook
spec:
  hostIPC: true
  containers:
    - name: jupyter
      image: jupyter@sha256:{DIGEST}
"""


def finding(rule: str, kind: str, name: str, namespace: str, line: int = 1) -> Finding:
    """A finding on the object of MANIFEST with this identity (its document), if any."""
    ref = ObjectRef("apps/v1" if kind == "DaemonSet" else "v1", kind, namespace, name)
    origins = {obj.ref: obj.origin for obj in parse_stream(MANIFEST, "k8s/x.yaml").objects}
    return Finding(
        rule_id=rule,
        level=Level.ERROR,
        message=f"{rule} on {name}",
        location=Location("k8s/x.yaml", line, 1, ""),
        ref=ref,
        origin=origins.get(ref),
    )


# --- annotation parsing ----------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "reasons", "problem"),
    [
        ("PG501=vendor image", {"PG501": "vendor image"}, ""),
        (
            "PG501=pinned upstream, see PLAT-12, PG401=legacy",
            {"PG501": "pinned upstream, see PLAT-12", "PG401": "legacy"},
            "",
        ),
        ("PG501=a\npg401 = b\n", {"PG501": "a", "PG401": "b"}, ""),
        ("PG501", {}, "entry PG501 has no reason"),
        ("PG501=  , PG401=ok", {"PG401": "ok"}, "entry PG501 has no reason"),
        ("PG999=typo", {}, "names unknown rule PG999"),
        ("PG004=quiet", {}, "cannot suppress PG004"),
        ("because I said so", {}, 'entry "because I said so" is not RULE=reason'),
        ("  ", {}, "is empty"),
        (["PG501=x"], {}, "must be a string"),
    ],
)
def test_parse_ignore(value: object, reasons: dict[str, str], problem: str) -> None:
    parsed = parse_ignore(value, KNOWN)
    assert dict(parsed.reasons) == reasons
    if problem:
        assert len(parsed.problems) == 1 and problem in parsed.problems[0]
    else:
        assert parsed.problems == ()


# --- exemptions ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("exemption", "target", "matches"),
    [
        (Exemption("PG301"), finding("PG301", "Pod", "p", "ml"), True),
        (Exemption("PG301"), finding("PG302", "Pod", "p", "ml"), False),
        (Exemption("PG301", namespace="mon*"), finding("PG301", "Pod", "p", "monitoring"), True),
        (Exemption("PG301", namespace="mon*"), finding("PG301", "Pod", "p", "ml"), False),
        (Exemption("PG301", name="dcgm-*"), finding("PG301", "Pod", "dcgm-exporter", "x"), True),
        (Exemption("PG301", name="*-exporter"), finding("PG301", "Pod", "dcgm", "x"), False),
        (Exemption("PG301", name="d.gm"), finding("PG301", "Pod", "dcgm", "x"), False),
        (Exemption("PG301", kind="DaemonSet"), finding("PG301", "Pod", "p", "x"), False),
        (Exemption("PG301", kind="DaemonSet"), finding("PG301", "DaemonSet", "p", "x"), True),
        # no metadata.namespace: judged as "default", where kubectl would put it
        (Exemption("PG301", namespace="default"), finding("PG301", "Pod", "p", ""), True),
        (Exemption("PG301", namespace="ml"), finding("PG301", "Pod", "p", ""), False),
    ],
)
def test_exemption_matching(exemption: Exemption, target: Finding, matches: bool) -> None:
    assert exemption_matches(exemption, target) is matches


def test_exemption_expiry_is_inclusive_and_reason_is_required() -> None:
    last_day = Exemption("PG301", reason="r", expires=TODAY)
    assert exemption_problem(last_day, TODAY) == ""
    expired = Exemption("PG301", reason="r", expires=TODAY - datetime.timedelta(days=1))
    assert exemption_problem(expired, TODAY) == (
        "exemption for PG301 expired on 2026-05-31; it no longer suppresses"
    )
    assert "has no reason" in exemption_problem(Exemption("PG301"), TODAY)
    assert exemption_problem(Exemption("PG301", reason="forever"), TODAY) == ""


# --- the stage -------------------------------------------------------------------


def run(config: Config, findings: list[Finding], pg004: Level | None = Level.WARNING) -> Any:
    inventory = parse_stream(MANIFEST, "k8s/x.yaml")
    return apply(
        findings,
        inventory.objects,
        config,
        known_rules=KNOWN,
        invalid_level=pg004,
        repo_root=ROOT,
        today=TODAY,
    )


def test_annotations_suppress_their_own_object_and_bad_entries_become_pg004() -> None:
    pinned = finding("PG501", "DaemonSet", "dcgm-exporter", "monitoring", 13)
    identity = finding("PG401", "DaemonSet", "dcgm-exporter", "monitoring", 11)
    elsewhere = finding("PG501", "Pod", "notebook", "", 25)
    applied = run(Config(), [pinned, identity, elsewhere])
    by_key = {(f.rule_id, f.location.line): f for f in applied.findings}
    assert by_key[("PG501", 13)].suppression == Suppression(
        "in-source", "vendor image, pinned by the operator"
    )
    assert by_key[("PG401", 11)].suppression is None  # entry without a reason
    assert by_key[("PG501", 25)].suppression is None  # another object
    [invalid] = [f for f in applied.findings if f.rule_id == "PG004"]
    assert (invalid.location.line, invalid.level) == (7, Level.WARNING)
    assert invalid.location.path == "metadata.annotations['poolgate.io/ignore']"
    assert invalid.ref == ObjectRef("apps/v1", "DaemonSet", "monitoring", "dcgm-exporter")
    assert "entry PG401 has no reason" in invalid.message
    assert applied.notifications == []


def test_an_annotation_needs_the_finding_on_its_own_document() -> None:
    """Same file, same identity, but not the annotated document (or no document at
    all, as a finding from a library caller may have): not suppressed."""
    pinned = finding("PG501", "DaemonSet", "dcgm-exporter", "monitoring", 13)
    other = replace(pinned, origin=Origin("k8s/x.yaml", 1, 18, 1))
    applied = run(Config(), [pinned, other, replace(pinned, origin=None)])
    got = [f.suppression is not None for f in applied.findings if f.rule_id == "PG501"]
    assert got == [True, False, False]


def test_without_pg004_bad_entries_are_silent_but_still_do_not_suppress() -> None:
    identity = finding("PG401", "DaemonSet", "dcgm-exporter", "monitoring", 11)
    applied = run(Config(), [identity], pg004=None)
    assert [(f.rule_id, f.suppression) for f in applied.findings] == [("PG401", None)]


def test_exemptions_suppress_and_stale_ones_are_notifications() -> None:
    config = Config(
        source=str(ROOT / "deploy" / ".poolgate.yaml"),
        exemptions=(
            Exemption("PG302", name="note*", reason="NCCL shared memory", line=12),
            Exemption("PG301", kind="DaemonSet", reason="device access", expires=TODAY, line=16),
            Exemption("PG301", reason="too late", expires=datetime.date(2026, 1, 1), line=20),
            Exemption("PG501", line=24),
        ),
    )
    ipc = finding("PG302", "Pod", "notebook", "", 22)
    privileged = finding("PG301", "DaemonSet", "dcgm-exporter", "monitoring", 15)
    privileged_pod = finding("PG301", "Pod", "notebook", "", 22)
    unpinned = finding("PG501", "Pod", "notebook", "", 25)
    errored = Finding(
        "PG302",
        Level.ERROR,
        "rule could not be evaluated",
        Location("k8s/x.yaml", 20, 1),
        ObjectRef("v1", "Pod", "", "notebook"),
        outcome=Outcome.ERROR,
    )
    applied = run(config, [ipc, privileged, privileged_pod, unpinned, errored])
    got = {(f.rule_id, f.location.line, f.outcome): f.suppression for f in applied.findings}
    assert got == {
        ("PG302", 22, Outcome.FAIL): Suppression("external", "NCCL shared memory"),
        ("PG301", 15, Outcome.FAIL): Suppression("external", "device access"),
        ("PG301", 22, Outcome.FAIL): None,  # the only exemption that would match expired
        ("PG501", 25, Outcome.FAIL): None,  # no reason
        ("PG302", 20, Outcome.ERROR): None,  # a rule that could not run is never hidden
        ("PG004", 7, Outcome.FAIL): None,  # the annotation's entry without a reason
    }
    notes = [(n.uri, n.line, n.level, n.rule_id, n.message) for n in applied.notifications]
    assert notes == [
        (
            "deploy/.poolgate.yaml",
            20,
            Level.WARNING,
            "PG004",
            "exemption for PG301 expired on 2026-01-01; it no longer suppresses",
        ),
        (
            "deploy/.poolgate.yaml",
            24,
            Level.WARNING,
            "PG004",
            "exemption for PG501 has no reason, so it does not suppress",
        ),
    ]


def test_an_annotation_cannot_suppress_pg004_but_an_exemption_can() -> None:
    text = MANIFEST.replace('"PG501=vendor image, pinned by the operator, PG401"', '"PG004=no"')
    inventory = parse_stream(text, "k8s/x.yaml")
    quiet = Config(exemptions=(Exemption("PG004", namespace="monitoring", reason="migrating"),))
    for config, expected in [
        (Config(), None),
        (quiet, Suppression("external", "migrating")),
    ]:
        applied = apply(
            [],
            inventory.objects,
            config,
            known_rules=KNOWN,
            invalid_level=Level.WARNING,
            repo_root=ROOT,
            today=TODAY,
        )
        [invalid] = applied.findings
        assert invalid.rule_id == "PG004" and invalid.suppression == expected


# --- end to end: SARIF, exit codes, --context ------------------------------------


PRIVILEGED = f"""\
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: node-agent
  namespace: ml
  annotations:
    poolgate.io/ignore: "PG301=needs /dev access; reviewed in PLAT-9"
spec:
  template:
    spec:
      hostPID: true
      containers:
        - name: agent
          image: agent@sha256:{DIGEST}
          securityContext:
            privileged: true
"""


def repo(tmp_path: Path, config: str = "") -> Path:
    (tmp_path / ".git").mkdir()
    (tmp_path / "k8s").mkdir()
    (tmp_path / "k8s" / "agent.yaml").write_text(PRIVILEGED)
    if config:
        (tmp_path / ".poolgate.yaml").write_text(config)
    return tmp_path


def test_sarif_carries_in_source_and_external_suppressions(tmp_path: Path) -> None:
    config = """\
apiVersion: poolgate.io/v1alpha1
kind: GpuPoolGate
spec:
  exemptions:
    - rule: PG302
      match: {namespace: ml, kind: DaemonSet, name: node-*}
      reason: host PID for the profiler until PLAT-10 lands.
      expires: 2999-01-01
"""
    root = repo(tmp_path, config)
    result = poolgate("scan", "k8s", "--format", "sarif", cwd=root)
    assert result.returncode == 0, result.stdout + result.stderr  # all suppressed
    sarif = json.loads(result.stdout)
    results = {r["ruleId"]: r for r in sarif["runs"][0]["results"]}
    assert results["PG301"]["suppressions"] == [
        {"kind": "inSource", "justification": "needs /dev access; reviewed in PLAT-9"}
    ]
    assert results["PG302"]["suppressions"] == [
        {"kind": "external", "justification": "host PID for the profiler until PLAT-10 lands."}
    ]

    text = poolgate("scan", "k8s", cwd=root)
    assert "PG301" not in text.stdout and "2 suppressed findings hidden" in text.stdout
    shown = poolgate("scan", "k8s", "--show-suppressed", cwd=root)
    assert "[suppressed in-source: needs /dev access; reviewed in PLAT-9]" in shown.stdout


def test_an_invalid_annotation_does_not_suppress_and_is_reported(tmp_path: Path) -> None:
    root = repo(tmp_path)
    agent = root / "k8s" / "agent.yaml"
    agent.write_text(PRIVILEGED.replace("PG301=needs /dev access; reviewed in PLAT-9", "PG301"))
    result = poolgate("scan", "k8s", "--format", "json", cwd=root)
    assert result.returncode == 1
    findings = json.loads(result.stdout)["findings"]
    got = sorted((f["ruleId"], f["location"]["line"], f["suppression"]) for f in findings)
    assert got == [("PG004", 7, None), ("PG301", 16, None), ("PG302", 11, None)]


CONTEXT_POD = f"""\
apiVersion: v1
kind: Pod
metadata:
  name: snapshot-pod
  namespace: ml
spec:
  hostNetwork: true
  containers:
    - name: c
      image: c@sha256:{DIGEST}
      securityContext:
        privileged: true
"""


def test_context_objects_are_never_reported_on(tmp_path: Path) -> None:
    root = repo(tmp_path)
    snapshot = root / "snapshot"
    snapshot.mkdir()
    (snapshot / "pods.yaml").write_text(CONTEXT_POD)
    (snapshot / "bad-name.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {}\n")
    result = poolgate(
        "scan",
        "k8s",
        "--context-path",
        "snapshot",
        "--context-path",
        "k8s",
        "--format",
        "json",
        "--disable",
        "PG302",
        cwd=root,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    uris = {f["location"]["uri"] for f in report["findings"]}
    assert uris == {"k8s/agent.yaml"}  # nothing from the snapshot; k8s not counted twice
    assert report["summary"]["objects"] == 1
    [note] = report["notifications"]
    assert note["level"] == "warning" and note["uri"] == "snapshot/bad-name.yaml"
    assert note["message"].startswith("context: ")

    without = json.loads(
        poolgate(
            "scan", "k8s", "snapshot", "--format", "json", "--disable", "PG302", cwd=root
        ).stdout
    )
    assert "snapshot/pods.yaml" in {f["location"]["uri"] for f in without["findings"]}


def test_unparsable_context_makes_the_run_incomplete_and_missing_context_is_usage(
    tmp_path: Path,
) -> None:
    root = repo(tmp_path)
    (root / "broken.yaml").write_text("kind: [\n")
    broken = poolgate(
        "scan", "k8s", "--context-path", "broken.yaml", "--disable", "PG302", cwd=root
    )
    assert broken.returncode == 3
    assert "broken.yaml:2:1: context: YAML does not parse" in broken.stdout
    assert "PG001" not in broken.stdout  # a notification, not a finding
    missing = poolgate("scan", "k8s", "--context-path", "nope", cwd=root)
    assert missing.returncode == 2 and "--context-path nope: no such file" in missing.stderr
