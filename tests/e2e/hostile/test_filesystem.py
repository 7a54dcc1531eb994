"""Broken and hostile file trees through ``poolgate scan``.

A named pipe serves as a canary for "before reading anything": opening one named on
the command line blocks until something writes to it, so a scan that read the pipe
before noticing a problem would hang into the subprocess timeout.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import cli_run
import mounts
import pytest

TIMEOUT = 120
CONFIGMAP = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n"
posix_only = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")


def poolgate(
    *args: str, cwd: Path, preexec: Callable[[], object] | None = None
) -> subprocess.CompletedProcess[str]:
    return cli_run.poolgate(*args, cwd=cwd, timeout=TIMEOUT, preexec=preexec)


@posix_only
def test_a_missing_path_is_a_usage_error_before_anything_is_read(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.yaml")
    result = poolgate(
        "scan", "pipe.yaml", "missing/", "--format", "sarif", "-o", "r.sarif", cwd=tmp_path
    )
    assert result.returncode == 2
    assert result.stderr == (
        "poolgate: error: missing/: no such file or directory (check the path)\n"
    )
    assert not (tmp_path / "r.sarif").exists()


@posix_only
def test_an_unwritable_output_fails_before_anything_is_read(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.yaml")
    result = poolgate(
        "scan", "pipe.yaml", "--format", "sarif", "-o", "no-such-dir/r.sarif", cwd=tmp_path
    )
    assert result.returncode == 2
    assert "no-such-dir/r.sarif: directory no-such-dir does not exist" in result.stderr


@pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() == 0,
    reason="root reads files whatever their mode; run the suite as a normal user to cover this",
)
def test_permission_denied_is_reported_and_the_rest_is_scanned(tmp_path: Path) -> None:
    (tmp_path / "ok.yaml").write_text(CONFIGMAP.format(name="ok"))
    secret = tmp_path / "secret.yaml"
    secret.write_text(CONFIGMAP.format(name="secret"))
    locked = tmp_path / "locked"
    locked.mkdir()
    (locked / "inside.yaml").write_text(CONFIGMAP.format(name="inside"))
    secret.chmod(0)
    locked.chmod(0)
    try:
        result = poolgate("scan", ".", "--format", "json", cwd=tmp_path)
    finally:
        locked.chmod(0o755)
        secret.chmod(0o644)
    assert result.returncode == 3, result.stderr
    report = json.loads(result.stdout)
    assert sorted((n["uri"], n["message"]) for n in report["notifications"]) == [
        ("locked", "cannot list directory: permission denied"),
        ("secret.yaml", "permission denied"),
    ]
    assert report["summary"]["objects"] == 1


@posix_only
def test_symbolic_links_out_of_the_repository_are_not_followed(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)  # the repository root: links may not leave it
    (repo / "ok.yaml").write_text(CONFIGMAP.format(name="ok"))
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "private.yaml").write_text(CONFIGMAP.format(name="private"))
    (repo / "elsewhere").symlink_to(outside, target_is_directory=True)  # a directory: skipped
    (repo / "up").symlink_to(tmp_path, target_is_directory=True)  # a loop through the parent
    (repo / "private.yaml").symlink_to(outside / "private.yaml")
    (repo / "dangling.yaml").symlink_to(repo / "nothing-here.yaml")
    (repo / "self.yaml").symlink_to(repo / "self.yaml")
    result = poolgate("scan", ".", "--format", "json", cwd=repo)
    assert result.returncode == 3, result.stderr
    report = json.loads(result.stdout)
    assert report["summary"]["objects"] == 1  # only ok.yaml: nothing behind the links
    assert sorted((n["uri"], n["message"]) for n in report["notifications"]) == [
        ("dangling.yaml", "symbolic link to a missing or special file; skipped"),
        ("private.yaml", "symbolic link points outside the scanned directory; skipped"),
        ("self.yaml", "symbolic link to a missing or special file; skipped"),
    ]


@posix_only
def test_a_named_pipe_in_a_scanned_directory_does_not_hang_the_scan(tmp_path: Path) -> None:
    (tmp_path / "ok.yaml").write_text(CONFIGMAP.format(name="ok"))
    os.mkfifo(tmp_path / "pipe.yaml")
    result = poolgate("scan", ".", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "poolgate: warning: pipe.yaml: not a regular file" in result.stdout


def _few_file_descriptors() -> None:
    """Child side: 64 open files at most, so a scan that leaked one per file would fail."""
    import resource

    resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))


@pytest.mark.skipif(sys.platform == "win32", reason="resource limits are POSIX")
def test_two_thousand_small_files(tmp_path: Path) -> None:
    for index in range(2000):
        directory = tmp_path / f"team-{index % 20:02d}"
        directory.mkdir(exist_ok=True)
        (directory / f"cm-{index:04d}.yaml").write_text(CONFIGMAP.format(name=f"cm-{index}"))
    result = poolgate("scan", ".", "--format", "json", cwd=tmp_path, preexec=_few_file_descriptors)
    assert result.returncode == 0, result.stderr[-2000:]
    summary = json.loads(result.stdout)["summary"]
    assert (summary["files"], summary["objects"], summary["findings"]) == (2000, 2000, 0)


@posix_only
def test_a_symbolic_link_named_on_the_command_line_may_not_leave_the_repository(
    tmp_path: Path,
) -> None:
    """The Action's ``paths`` may name files a pull request added: a link among them
    must not put a file of the runner into the report."""
    repo = tmp_path / "repo"
    (repo / "k8s").mkdir(parents=True)
    (repo / ".git").mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "private.yaml").write_text(CONFIGMAP.format(name="private"))
    (repo / "k8s" / "pw.yaml").symlink_to(outside / "private.yaml")
    (repo / "k8s" / "elsewhere").symlink_to(outside, target_is_directory=True)
    named = ["k8s/elsewhere", "k8s/elsewhere/private.yaml", "k8s/pw.yaml"]
    result = poolgate("scan", *named, "--format", "json", cwd=repo)
    assert result.returncode == 3, result.stderr
    report = json.loads(result.stdout)
    assert report["summary"]["objects"] == 0
    assert [(n["uri"], n["message"]) for n in report["notifications"]] == [
        (name, "symbolic link points outside the repository; skipped") for name in named
    ]


def test_a_full_disk_is_one_error_line(tmp_path: Path) -> None:
    if reason := mounts.unavailable():
        pytest.skip(reason)
    (tmp_path / "ok.yaml").write_text(CONFIGMAP.format(name="ok"))
    tiny = tmp_path / "tiny"
    tiny.mkdir()
    result = poolgate(
        "scan",
        "ok.yaml",
        "--format",
        "sarif",
        "-o",
        "tiny/r.sarif",
        cwd=tmp_path,
        preexec=mounts.tiny_file_system(tiny, "4k"),  # a SARIF report carries every rule
    )
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == "poolgate: error: cannot write tiny/r.sarif: no space left on device\n"


@pytest.mark.skipif(not os.path.islink("/dev/stdout"), reason="needs /dev/stdout")
def test_dev_stdout_is_written_into_and_a_lookalike_link_elsewhere_is_replaced(
    tmp_path: Path,
) -> None:
    """``-o /dev/stdout`` as root once replaced /dev/stdout with a file: a descriptor
    path in /dev is written into. The same link placed in a checkout is replaced like
    any link there, never followed."""
    (tmp_path / "ok.yaml").write_text(CONFIGMAP.format(name="ok"))
    result = poolgate("scan", "ok.yaml", "--format", "json", "-o", "/dev/stdout", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["summary"]["objects"] == 1
    assert os.path.islink("/dev/stdout")
    (tmp_path / "stdout").symlink_to("/proc/self/fd/1")
    result = poolgate("scan", "ok.yaml", "--format", "json", "-o", "stdout", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
    assert not (tmp_path / "stdout").is_symlink()
    assert json.loads((tmp_path / "stdout").read_text())["summary"]["objects"] == 1
