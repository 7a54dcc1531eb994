"""``poolgate scan --compare PREVIOUS.json``: what changed since the previous scan.

A pull request's scan compared with the base branch's report, or a nightly scan of
the manifests with last night's. A previous finding is resolved only when this scan
read its file again with its rule enabled; a file left out of the paths, one that no
longer parses, or a rule turned off leaves it unverified (scanner/findings/drift.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cli_run import poolgate

PRIVILEGED = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {name}
  namespace: ml
spec:
  template:
    spec:
      containers:
        - name: app
          image: busybox@sha256:{digest}
          securityContext:
            privileged: true
"""
DIGEST = "a" * 64


def _repo(tmp_path: Path, **files: str) -> Path:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        path = repo / "k8s" / f"{name}.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return repo


def _deployment(name: str) -> str:
    return PRIVILEGED.format(name=name, digest=DIGEST)


def _scan(repo: Path, *args: str) -> dict[str, Any]:
    result = poolgate("scan", *args, "--enable", "PG301", "--format", "json", cwd=repo)
    assert result.returncode in (0, 1, 3), result.stderr
    document: dict[str, Any] = json.loads(result.stdout)
    return document


def _pg301(entries: list[dict[str, Any]]) -> set[str]:
    return {entry["object"]["name"] for entry in entries if entry["ruleId"] == "PG301"}


def test_new_unchanged_and_resolved_since_the_previous_scan(tmp_path: Path) -> None:
    repo = _repo(tmp_path, kept=_deployment("kept"), fixed=_deployment("fixed"))
    previous = tmp_path / "previous.json"
    previous.write_text(json.dumps(_scan(repo, "k8s")))
    (repo / "k8s" / "fixed.yaml").write_text(_deployment("fixed").replace("true", "false"))
    (repo / "k8s" / "added.yaml").write_text(_deployment("added"))

    document = _scan(repo, "k8s", "--compare", str(previous))
    drift = document["drift"]
    assert drift["counts"]["resolved"] == len(drift["resolved"]) >= 1
    assert _pg301(drift["resolved"]) == {"fixed"}
    assert drift["unverified"] == []
    states = {
        f["object"]["name"]: f["drift"] for f in document["findings"] if f["ruleId"] == "PG301"
    }
    assert states == {"added": "new", "kept": "unchanged"}

    text = poolgate("scan", "k8s", "--compare", str(previous), cwd=repo).stdout
    assert text.startswith(f"Since the previous scan ({previous}): ")
    page = tmp_path / "report.html"
    poolgate(
        "scan", "k8s", "--compare", str(previous), "--format", "html", "-o", str(page), cwd=repo
    )
    html = page.read_text(encoding="utf-8")
    assert '<section id="drift">\n<h2>Since the previous scan</h2>' in html
    drift_section = html.split('<section id="drift">')[1].split("</section>")[0]
    assert "ml/Deployment/fixed</code></td><td><code>k8s/fixed.yaml</code>" in drift_section


def test_files_this_scan_did_not_read_are_unverified_not_resolved(tmp_path: Path) -> None:
    repo = _repo(tmp_path, a=_deployment("a"), b=_deployment("b"))
    (repo / "other").mkdir()
    (repo / "other" / "c.yaml").write_text(_deployment("c"))
    previous = tmp_path / "previous.json"
    previous.write_text(json.dumps(_scan(repo, "k8s", "other")))
    # Tonight: other/ is not scanned, and b.yaml no longer parses.
    (repo / "k8s" / "b.yaml").write_text("apiVersion: v1\nkind: [unclosed\n")
    drift = _scan(repo, "k8s", "--compare", str(previous))["drift"]
    assert _pg301(drift["resolved"]) == set()
    assert _pg301(drift["unverified"]) == {"b", "c"}
    text = poolgate("scan", "k8s", "--enable", "PG301", "--compare", str(previous), cwd=repo)
    assert text.stdout.splitlines()[0].endswith(
        "2 unverified (this scan did not read their files again, or their rules were off)"
    )


def test_a_rule_turned_off_leaves_its_findings_unverified(tmp_path: Path) -> None:
    repo = _repo(tmp_path, a=_deployment("a"))
    previous = tmp_path / "previous.json"
    previous.write_text(json.dumps(_scan(repo, "k8s")))
    result = poolgate(
        "scan", "k8s", "--disable", "PG301", "--compare", str(previous), "--format", "json",
        cwd=repo,
    )  # fmt: skip
    drift = json.loads(result.stdout)["drift"]
    assert _pg301(drift["unverified"]) == {"a"} and _pg301(drift["resolved"]) == set()


def test_a_missing_or_foreign_previous_report_is_a_usage_error(tmp_path: Path) -> None:
    repo = _repo(tmp_path, a=_deployment("a"))
    missing = poolgate("scan", "k8s", "--compare", str(tmp_path / "nope.json"), cwd=repo)
    assert missing.returncode == 2 and missing.stdout == ""
    assert "--compare" in missing.stderr and "no such file" in missing.stderr
    sarif = tmp_path / "previous.sarif"
    sarif.write_text(json.dumps({"version": "2.1.0", "runs": []}))
    foreign = poolgate("scan", "k8s", "--compare", str(sarif), cwd=repo)
    assert foreign.returncode == 2 and "not a poolgate JSON report" in foreign.stderr
