"""Fingerprints never collide within a run (issue 24, item 10), stay stable across line
moves, and what older versions recorded is still read.

Version 1 (rule, object identity, field path) gave the same fingerprint to an object of
a kustomize base and the same object rendered by an overlay: GitHub code scanning
merged them into one alert. Version 2 joins the file and the rendered unit, and
numbers what still repeats.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from pathlib import Path
from typing import Any

from pg_integration import run_poolgate
from tool_check import require_kustomize

from scanner.findings import drift
from scanner.findings.records import Finding, Level, Location, run_fingerprints
from scanner.inventory import ObjectRef, Origin

DIGEST = "a" * 64
DEPLOYMENT = f"""\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: agent
  namespace: ml
spec:
  template:
    spec:
      containers:
        - name: main
          image: busybox@sha256:{DIGEST}
          securityContext:
            privileged: true
"""
KUSTOMIZATION = "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"


def _repository(root: Path, padding: str = "") -> None:
    """A base and two overlays that render the base's Deployment unchanged: one object
    identity, one file, three rendered units."""
    (root / ".git").mkdir(parents=True, exist_ok=True)
    base = root / "base"
    base.mkdir(exist_ok=True)
    (base / "deployment.yaml").write_text(padding + DEPLOYMENT)
    (base / "kustomization.yaml").write_text(KUSTOMIZATION + "resources: [deployment.yaml]\n")
    for name in ("staging", "prod"):
        overlay = root / "overlays" / name
        overlay.mkdir(parents=True, exist_ok=True)
        (overlay / "kustomization.yaml").write_text(
            KUSTOMIZATION + "resources: [../../base]\ncommonLabels: {stage: " + name + "}\n"
        )


def _results(root: Path) -> list[dict[str, Any]]:
    result = run_poolgate("scan", ".", "--format", "sarif", cwd=root)
    assert result.returncode == 1, result.stderr
    results: list[dict[str, Any]] = json.loads(result.stdout)["runs"][0]["results"]
    return results


def _v1(result: dict[str, Any]) -> tuple[str, str, str]:
    """What version 1 made a result's fingerprint of, less the API version (the same here)."""
    [logical] = result["locations"][0]["logicalLocations"]
    return (result["ruleId"], logical["fullyQualifiedName"], result["message"]["text"])


def test_a_base_and_its_overlays_give_every_result_its_own_fingerprint(tmp_path: Path) -> None:
    require_kustomize()
    _repository(tmp_path)
    results = _results(tmp_path)
    identities = Counter(_v1(result) for result in results if result["ruleId"] == "PG301")
    assert max(identities.values()) == 3  # one object identity, rendered three times
    prints = [result["partialFingerprints"]["poolgate/v2"] for result in results]
    assert len(prints) == len(set(prints)), prints
    assert all(set(result["partialFingerprints"]) == {"poolgate/v2"} for result in results)

    moved = tmp_path / "moved"
    _repository(moved, padding="# comments push every line down\n\n\n")
    assert sorted(r["partialFingerprints"]["poolgate/v2"] for r in _results(moved)) == sorted(
        prints
    )


def test_a_file_that_repeats_an_object_numbers_the_repeat(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "twice.yaml").write_text(DEPLOYMENT + "---\n" + DEPLOYMENT)
    first = [r for r in _results(tmp_path) if r["ruleId"] == "PG301"]
    assert len(first) == 2
    prints = [r["partialFingerprints"]["poolgate/v2"] for r in first]
    assert len(set(prints)) == 2
    (tmp_path / "twice.yaml").write_text("# moved\n" + DEPLOYMENT + "---\n\n" + DEPLOYMENT)
    again = [r for r in _results(tmp_path) if r["ruleId"] == "PG301"]
    assert [r["partialFingerprints"]["poolgate/v2"] for r in again] == prints


def test_run_fingerprints_number_repeats_by_position_not_by_list_order() -> None:
    ref = ObjectRef("v1", "Pod", "ml", "p")

    def at(line: int) -> Finding:
        location = Location("k8s/p.yaml", line, 1, "spec")
        return Finding("PG301", Level.ERROR, "m", location, ref, origin=Origin("k8s/p.yaml"))

    early, late = at(3), at(30)
    assert early.fingerprint == late.fingerprint
    assert run_fingerprints([early, late]) == list(reversed(run_fingerprints([late, early])))
    assert run_fingerprints([early, late])[0] == early.fingerprint


def test_the_rendered_unit_and_the_file_join_the_fingerprint_but_a_live_context_does_not() -> None:
    ref = ObjectRef("v1", "Pod", "ml", "p")

    def finding(uri: str, unit: str = "", source: str = "file") -> Finding:
        origin = Origin(uri, unit=unit, source_type=source)
        return Finding(
            "PG301", Level.ERROR, "m", Location(uri, 1, 1, "spec"), ref, source, origin=origin
        )

    plain = finding("base/p.yaml")
    assert plain.fingerprint_v1 == finding("other/p.yaml").fingerprint_v1
    assert plain.fingerprint != finding("other/p.yaml").fingerprint
    assert (
        finding("base/p.yaml", "overlays/a (rendered)").fingerprint
        != finding("base/p.yaml", "overlays/b (rendered)").fingerprint
    )
    live = finding("cluster://prod/ml/Pod/p", source="cluster")
    assert live.fingerprint == finding("cluster://renamed/ml/Pod/p", source="cluster").fingerprint


def _v1_fingerprint(entry: dict[str, Any]) -> str:
    """Version 1's algorithm, as a baseline written before version 2 recorded it."""
    obj = entry["object"]
    identity = "|".join((obj["apiVersion"], obj["kind"], obj["namespace"], obj["name"]))
    text = f"{entry['ruleId']}|{identity}|{entry['location']['path']}"
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def test_a_version_1_baseline_is_still_read_and_a_new_one_is_written_in_version_2(
    tmp_path: Path,
) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "app.yaml").write_text(DEPLOYMENT)
    report = json.loads(run_poolgate("scan", ".", "--format", "json", cwd=tmp_path).stdout)
    assert report["fingerprintVersion"] == 2
    old = {
        "version": 1,
        "tool": {"name": "poolgate", "version": "0.1.0"},
        "fingerprints": [
            {"fingerprint": _v1_fingerprint(entry), "uri": entry["location"]["uri"]}
            for entry in report["findings"]
        ],
    }
    (tmp_path / "old.json").write_text(json.dumps(old))
    hidden = run_poolgate("scan", ".", "--baseline", "old.json", "--format", "json", cwd=tmp_path)
    assert hidden.returncode == 0, hidden.stdout + hidden.stderr
    assert json.loads(hidden.stdout)["summary"]["baselined"] == len(report["findings"])

    written = run_poolgate("scan", ".", "--write-baseline", "new.json", cwd=tmp_path)
    assert written.returncode == 0, written.stderr
    new = json.loads((tmp_path / "new.json").read_text())
    assert new["version"] == 2
    assert {entry["fingerprint"] for entry in new["fingerprints"]} == {
        entry["fingerprint"] for entry in report["findings"]
    }


def test_a_compare_report_of_version_1_matches_by_the_old_algorithm(tmp_path: Path) -> None:
    """A report written before version 2 has version 1 fingerprints and no
    ``fingerprintVersion``; its findings, those without an object too, are the same."""
    from scanner.findings.report import Report
    from scanner.reporters.json import to_document

    pod = Finding(
        "PG301",
        Level.ERROR,
        "m",
        Location("cluster://prod/ml/Pod/p", 1, 1, "spec"),
        ObjectRef("v1", "Pod", "ml", "p"),
        "cluster",
    )
    unread = Finding("PG001", Level.ERROR, "bad", Location("cluster://prod/x", 1, 1, ""), None)
    report = Report(
        findings=[pod, unread], notifications=[], rules=[], tool_version="0", repo_root="."
    )
    document = to_document(report)
    del document["fingerprintVersion"]
    for entry, finding in zip(document["findings"], (pod, unread), strict=True):
        entry["fingerprint"] = finding.fingerprint_v1
    (tmp_path / "old.json").write_text(json.dumps(document))
    changes = drift.compare(
        report,
        drift.load_previous(str(tmp_path / "old.json")),
        "old.json",
        drift.checker({"PG301", "PG001"}, ()),
    )
    assert changes.new == () and changes.resolved == ()
    assert changes.unchanged == (pod, unread)
