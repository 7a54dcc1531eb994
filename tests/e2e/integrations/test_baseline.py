"""Baselines: adopt poolgate on a repository with findings, then see only new ones."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from pg_integration import DIGEST, run_poolgate

from scanner.errors import UsageError
from scanner.findings import baseline
from scanner.findings.records import Finding, Level, Location, Outcome, Suppression
from scanner.inventory import ObjectRef

INCOMPLETE = frozenset({"PG001"})


def _deployment(name: str, containers: tuple[str, ...] = ("main", "helper")) -> str:
    lines = [
        "apiVersion: apps/v1",
        "kind: Deployment",
        "metadata:",
        f"  name: {name}",
        "  namespace: ml",
        "spec:",
        "  template:",
        "    spec:",
        "      containers:",
    ]
    for container in containers:
        lines += [
            f"        - name: {container}",
            f"          image: busybox@sha256:{DIGEST}",
            "          securityContext:",
            "            privileged: true",
        ]
    return "\n".join(lines) + "\n"


def _write_repository(repo: Path) -> None:
    """Five files of five Deployments with two privileged containers each: 50 findings."""
    (repo / ".git").mkdir(parents=True)
    for file in range(5):
        documents = [_deployment(f"app-{file * 5 + index}") for index in range(5)]
        (repo / f"k8s-{file}.yaml").write_text("---\n".join(documents))


def _findings(result_stdout: str) -> list[dict[str, object]]:
    report = json.loads(result_stdout)
    findings: list[dict[str, object]] = report["findings"]
    return findings


def test_a_baseline_hides_old_findings_through_line_moves(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    _write_repository(repo)
    before = run_poolgate("scan", ".", "--format", "json", cwd=repo)
    assert before.returncode == 1, before.stderr
    assert len(_findings(before.stdout)) == 50

    written = run_poolgate(
        "scan", ".", "--write-baseline", "poolgate-baseline.json", "--format", "json", cwd=repo
    )
    assert written.returncode == 0, written.stderr  # the findings just recorded are accepted
    assert "wrote 50 fingerprints to poolgate-baseline.json" in written.stderr
    recorded = json.loads((repo / "poolgate-baseline.json").read_text())
    assert recorded["version"] == 2 and recorded["tool"]["name"] == "poolgate"
    assert len(recorded["fingerprints"]) == 50
    assert set(recorded["fingerprints"][0]) == {
        "fingerprint",
        "objectFingerprint",
        "ruleId",
        "uri",
        "message",
    }

    # The change: comments and blank lines push every object down, documents swap
    # places, one object moves to another file, and one new violation appears.
    for file in range(5):
        path = repo / f"k8s-{file}.yaml"
        documents = path.read_text().split("---\n")
        documents.reverse()
        path.write_text("# reviewed\n\n\n" + "---\n".join(documents))
    first = repo / "k8s-0.yaml"
    documents = first.read_text().split("---\n")
    moved = documents.pop()
    first.write_text("---\n".join(documents))
    (repo / "moved.yaml").write_text("# moved here\n" + moved)
    (repo / "k8s-4.yaml").write_text(
        (repo / "k8s-4.yaml").read_text() + "---\n" + _deployment("new-app", ("fresh",))
    )

    after = run_poolgate(
        "scan", ".", "--baseline", "poolgate-baseline.json", "--format", "json", cwd=repo
    )
    assert after.returncode == 1, after.stderr
    findings = _findings(after.stdout)
    assert len(findings) == 1
    (only,) = findings
    assert only["ruleId"] == "PG301"
    assert only["object"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "namespace": "ml",
        "name": "new-app",
    }
    assert json.loads(after.stdout)["summary"]["baselined"] == 50

    text = run_poolgate("scan", ".", "--baseline", "poolgate-baseline.json", cwd=repo)
    # Six files: the five manifests and the new one; the baseline's own JSON names no
    # apiVersion, so the walk does not read it as a manifest.
    assert text.stdout.rstrip().endswith(
        "1 finding (1 error) in 6 files, 26 objects; 50 findings in the baseline hidden"
    )


def test_fingerprints_follow_the_field_path_including_list_indexes(tmp_path: Path) -> None:
    """The documented limit: a container inserted before another shifts its index.

    The baselined finding was at containers[0]; after the insertion the new
    container holds [0] (hidden as old) and the old one shows up at [1].
    """
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    manifest = repo / "app.yaml"
    manifest.write_text(_deployment("app", ("main",)))
    assert run_poolgate("scan", ".", "--write-baseline", "b.json", cwd=repo).returncode == 0
    manifest.write_text(_deployment("app", ("sidecar", "main")))
    after = run_poolgate("scan", ".", "--baseline", "b.json", "--format", "json", cwd=repo)
    paths = [f["location"]["path"] for f in _findings(after.stdout)]  # type: ignore[index]
    assert paths == ["spec.template.spec.containers[1].securityContext.privileged"]


def _finding(
    rule: str = "PG301",
    name: str = "train",
    outcome: Outcome = Outcome.FAIL,
    suppression: Suppression | None = None,
    ref: bool = True,
    uri: str = "k8s/a.yaml",
) -> Finding:
    return Finding(
        rule_id=rule,
        level=Level.ERROR,
        message=f"{rule} on {name}",
        location=Location(uri, 3, 5, "spec.x"),
        ref=ObjectRef("apps/v1", "Deployment", "ml", name) if ref else None,
        outcome=outcome,
        suppression=suppression,
    )


def test_rule_errors_unreadable_files_and_suppressed_findings_are_never_baselined() -> None:
    violation = _finding()
    rule_error = _finding(name="broken", outcome=Outcome.ERROR)
    unreadable = _finding(rule="PG001", ref=False)
    suppressed = _finding(name="exempt", suppression=Suppression("external", "owned by ops"))
    everything = [violation, rule_error, unreadable, suppressed]
    known = baseline.recorded(everything, INCOMPLETE)
    assert known == Counter({(violation.fingerprint_v1, "k8s/a.yaml"): 1})
    kept, dropped = baseline.split(
        everything,
        known + Counter((f.fingerprint_v1, f.location.uri) for f in everything),
        INCOMPLETE,
    )
    assert kept == [rule_error, unreadable, suppressed] and dropped == 1
    entries = baseline.document(everything, "9.9", INCOMPLETE)["fingerprints"]
    assert entries == [
        {
            "fingerprint": violation.fingerprint,  # a plain file: the finding's own
            "objectFingerprint": violation.fingerprint_v1,
            "ruleId": "PG301",
            "uri": "k8s/a.yaml",
            "message": "PG301 on train",
        }
    ]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{\n  nope", "b.json:2:3: not valid JSON"),
        ('{"version": 3, "fingerprints": []}', "unsupported baseline version 3"),
        ('{"version": true, "fingerprints": []}', "unsupported baseline version True"),
        (
            '{"version": 2, "fingerprints": [{"fingerprint": "' + "a" * 32 + '"}]}',
            "fingerprints[0] has no valid 'objectFingerprint'",
        ),
        (
            '{"version": 2, "fingerprints": [{"fingerprint": "'
            + "a" * 32
            + '", "objectFingerprint": "'
            + "b" * 32
            + '", "uri": "k8s/a.yaml"}]}',
            "fingerprints[0].fingerprint is not the one of its objectFingerprint and uri",
        ),
        ('{"version": 1, "fingerprints": {}}', "'fingerprints' must be a list"),
        ('{"version": 1, "fingerprints": [{"fingerprint": "xyz"}]}', "fingerprints[0] has no"),
        ("[]", "not a poolgate baseline"),
        ('{"version": ' + "7" * 5000 + "}", "not a baseline file: Exceeds the limit"),
        ("[" * 5000 + "]" * 5000, "not a baseline file: maximum recursion depth"),
    ],
)
def test_a_broken_baseline_file_is_a_usage_error(
    tmp_path: Path, content: str, message: str
) -> None:
    path = tmp_path / "b.json"
    path.write_text(content)
    with pytest.raises(UsageError, match=message.replace("[", r"\[").replace("]", r"\]")):
        baseline.load(path)


def test_a_missing_baseline_fails_before_scanning(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    result = run_poolgate("scan", ".", "--baseline", "absent.json", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "poolgate: error: --baseline absent.json: no such file "
        "(create one with --write-baseline FILE)"
    )


def test_a_second_copy_of_a_recorded_finding_is_new_and_a_moved_one_is_not() -> None:
    """A baseline hides as many findings of a fingerprint as it recorded (found in
    review: the same Deployment added for a second cluster's overlay was hidden with
    the first). Those in the recorded file go first; a finding whose file changed
    (the object moved) still takes a recorded one."""
    us = _finding(uri="clusters/us/trainer.yaml")
    eu = _finding(uri="clusters/eu/trainer.yaml")
    assert us.fingerprint_v1 == eu.fingerprint_v1 and us.fingerprint != eu.fingerprint
    known = baseline.recorded([us], INCOMPLETE)
    # eu sorts first, yet the copy in the recorded file is the one hidden.
    assert baseline.split([eu, us], known, INCOMPLETE) == ([eu], 1)
    assert baseline.split([eu], known, INCOMPLETE) == ([], 1)  # moved
    twice = baseline.document([us, us, eu], "9.9", INCOMPLETE)["fingerprints"]
    assert [(entry["uri"], entry.get("count", 1)) for entry in twice] == [
        ("clusters/eu/trainer.yaml", 1),
        ("clusters/us/trainer.yaml", 2),
    ]
