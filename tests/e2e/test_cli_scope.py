"""What a scan reads, as the command line and pre-commit name it (issue 25): one flag
never means two things (``scan --context-path``, ``audit --context``), and a poolgate
config passed as a path is configuration, not an object of the scan."""

from __future__ import annotations

import json
from pathlib import Path

from cli_run import poolgate

NAMESPACE = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: ml\n  labels: {team: a}\n"
POD = """\
apiVersion: v1
kind: Pod
metadata: {name: p, namespace: ml}
spec:
  containers:
    - {name: c, image: busybox}
"""


def repo(tmp_path: Path) -> Path:
    (tmp_path / ".git").mkdir()
    (tmp_path / "k8s").mkdir()
    (tmp_path / "k8s" / "pod.yaml").write_text(POD)
    (tmp_path / "platform").mkdir()
    (tmp_path / "platform" / "ns.yaml").write_text(NAMESPACE)
    return tmp_path


def objects_and_uris(stdout: str) -> tuple[int, set[str]]:
    report = json.loads(stdout)
    return report["summary"]["objects"], {f["location"]["uri"] for f in report["findings"]}


def test_context_path_joins_without_reporting(tmp_path: Path) -> None:
    root = repo(tmp_path)
    result = poolgate("scan", "k8s", "--context-path", "platform", "--format", "json", cwd=root)
    assert result.returncode == 1, result.stderr
    assert result.stderr == ""
    count, uris = objects_and_uris(result.stdout)
    assert count == 1 and uris == {"k8s/pod.yaml"}


def test_scan_context_is_a_deprecated_alias_that_warns_once(tmp_path: Path) -> None:
    root = repo(tmp_path)
    new = poolgate("scan", "k8s", "--context-path", "platform", "--format", "json", cwd=root)
    old = poolgate("scan", "k8s", "--context", "platform", "--format", "json", cwd=root)
    assert old.returncode == new.returncode == 1
    assert json.loads(old.stdout)["findings"] == json.loads(new.stdout)["findings"]
    assert old.stderr == (
        "poolgate: warning: scan --context is deprecated: use --context-path (the same paths)\n"
    )


def test_help_names_each_meaning_once() -> None:
    scan_help = poolgate("scan", "--help").stdout
    assert "--context-path" in scan_help
    assert "--context " not in scan_help and "--context\n" not in scan_help  # hidden alias
    audit_help = poolgate("audit", "--help").stdout
    assert "--context TEXT" in audit_help and "Kubeconfig context" in audit_help
    assert "--context-path" not in audit_help


def test_a_file_named_like_the_new_option_is_still_refused(tmp_path: Path) -> None:
    """pre-commit appends staged file names: one named like an option must not be one."""
    root = repo(tmp_path)
    (root / "--context-path=k8s").write_text(POD)
    result = poolgate("scan", "k8s", "--context-path=k8s", cwd=root)
    assert result.returncode == 2
    assert "names a file but would be read as an option" in result.stderr


def test_a_poolgate_config_passed_as_a_path_is_not_an_object(tmp_path: Path) -> None:
    """pre-commit passes a staged .poolgate.yaml like any YAML file, and a copy of one
    may have any name: neither is counted as a scanned object nor judged by a rule."""
    root = repo(tmp_path)
    init = poolgate("config", "init", ".", cwd=root)
    assert init.returncode == 0, init.stderr
    (root / "ci").mkdir()
    (root / "ci" / "strict-poolgate.yaml").write_text((root / ".poolgate.yaml").read_text())
    alone = poolgate("scan", "k8s/pod.yaml", "--format", "json", cwd=root)
    for named in (".poolgate.yaml", "./.poolgate.yaml", "ci/strict-poolgate.yaml"):
        result = poolgate("scan", named, "k8s/pod.yaml", "--format", "json", cwd=root)
        assert result.returncode == 1, result.stderr
        count, uris = objects_and_uris(result.stdout)
        assert count == 1, named
        assert uris == {"k8s/pod.yaml"}, named
        assert json.loads(result.stdout)["findings"] == json.loads(alone.stdout)["findings"]
    only = poolgate("scan", "ci/strict-poolgate.yaml", "--format", "json", "-v", cwd=root)
    assert only.returncode == 0, only.stdout
    summary = json.loads(only.stdout)["summary"]
    assert (summary["objects"], summary["skippedDocuments"]) == (0, 1)
