"""``--exclude`` and ``spec.exclude`` through the CLI: walked and named files left out
and counted, the config's and the command line's patterns together, bad patterns
refused before any work (the matcher itself: tests/config/test_excludes.py)."""

from __future__ import annotations

import json
from pathlib import Path

from cli_run import poolgate

HEADER = "apiVersion: poolgate.io/v1alpha1\nkind: GpuPoolGate\n"
PRIVILEGED = """\
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: ml
spec:
  containers:
    - name: c
      image: busybox
      securityContext:
        privileged: true
"""


def _repository(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    for path in ("k8s/app.yaml", "fixtures/rules/PG301/fire.yaml", "fixtures/demo/x.yml"):
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(PRIVILEGED.format(name=Path(path).stem))
    (repo / ".git").mkdir()
    return repo


def _summary_and_uris(stdout: str) -> tuple[dict[str, object], list[str]]:
    document = json.loads(stdout)
    return document["summary"], sorted({f["location"]["uri"] for f in document["findings"]})


def test_exclude_leaves_out_walked_and_named_files_and_counts_them(tmp_path: Path) -> None:
    repo = _repository(tmp_path)
    walked = poolgate("scan", ".", "--exclude", "fixtures/", "--format", "json", cwd=repo)
    assert walked.returncode == 1, walked.stderr
    summary, uris = _summary_and_uris(walked.stdout)
    assert uris == ["k8s/app.yaml"]
    assert (summary["files"], summary["excluded"]) == (1, 2)
    # pre-commit names the staged files one by one: a named file is excluded too.
    named = poolgate(
        "scan",
        "fixtures/rules/PG301/fire.yaml",
        "fixtures/demo/x.yml",
        "--exclude",
        "fixtures/rules/**",
        "--exclude",
        "*.yml",
        cwd=repo,
    )
    assert named.returncode == 0, named.stdout + named.stderr
    assert named.stdout.splitlines()[-1] == "no findings in 0 files; 2 files excluded"


def test_config_exclude_adds_to_the_command_lines(tmp_path: Path) -> None:
    repo = _repository(tmp_path)
    (repo / ".poolgate.yaml").write_text(HEADER + "spec:\n  exclude: ['fixtures/rules/']\n")
    result = poolgate("scan", ".", "--exclude", "/k8s", "--format", "json", cwd=repo)
    summary, uris = _summary_and_uris(result.stdout)
    assert uris == ["fixtures/demo/x.yml"]
    assert summary["excluded"] == 2


def test_bad_patterns_are_usage_and_config_errors_before_any_work(tmp_path: Path) -> None:
    repo = _repository(tmp_path)
    flag = poolgate("scan", ".", "--exclude", "!fixtures/", cwd=repo)
    assert flag.returncode == 2
    assert "'--exclude': '!fixtures/': negation (!) is not supported" in flag.stderr
    (repo / ".poolgate.yaml").write_text(HEADER + "spec:\n  exclude:\n    - k8s/\n    - a//b\n")
    config = poolgate("scan", ".", cwd=repo)
    assert config.returncode == 2
    assert ".poolgate.yaml:6: spec.exclude[1]: 'a//b': empty, '.' or '..' path component" in (
        config.stderr
    )
