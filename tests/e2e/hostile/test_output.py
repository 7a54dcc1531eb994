"""Reports under failure: a crash mid-write never leaves a truncated file behind.

In-process, so a reporter can be made to fail halfway through its output.
"""

from __future__ import annotations

import json
import os
import stat
import threading
from pathlib import Path
from typing import Any, TextIO

import pytest

from scanner import cli
from scanner.errors import OutputError
from scanner.reporters import output, sarif

PRIVILEGED = """\
apiVersion: v1
kind: Pod
metadata:
  name: debug
  namespace: tenant-a
spec:
  containers:
    - name: shell
      image: busybox@sha256:{digest}
      securityContext:
        privileged: true
""".replace("{digest}", "c" * 64)

PREVIOUS = '{"previous": "report, kept whole"}\n'


class _Breaks:
    """A stream that fails after ``limit`` characters, like a full disk or a bug mid-way."""

    def __init__(self, stream: TextIO, limit: int, error: BaseException) -> None:
        self.stream, self.left, self.error = stream, limit, error

    def write(self, text: str) -> int:
        if len(text) >= self.left:
            self.stream.write(text[: self.left])
            raise self.error
        self.left -= len(text)
        return self.stream.write(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


def _crash_sarif(monkeypatch: pytest.MonkeyPatch, error: BaseException) -> None:
    real = sarif.write

    def crashing(report: Any, stream: TextIO) -> None:
        real(report, _Breaks(stream, 300, error))  # type: ignore[arg-type]

    monkeypatch.setattr(sarif, "write", crashing)


@pytest.mark.parametrize(
    ("error", "code"),
    [(RuntimeError("reporter bug"), 4), (KeyboardInterrupt(), 130), (OSError(28, "No space"), 2)],
    ids=["crash", "interrupt", "disk-full"],
)
def test_a_failure_mid_write_leaves_the_previous_report_and_no_temporary_file(
    error: BaseException,
    code: int,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    (tmp_path / "pod.yaml").write_text(PRIVILEGED)
    (tmp_path / "results.sarif").write_text(PREVIOUS)
    _crash_sarif(monkeypatch, error)
    args = ["scan", "pod.yaml", "--format", "json", "-o", "results.json"]
    args += ["--format", "sarif", "-o", "results.sarif"]
    assert cli.run(args) == code
    assert (tmp_path / "results.sarif").read_text() == PREVIOUS
    assert json.loads((tmp_path / "results.json").read_text())["findings"]  # written before
    assert sorted(path.name for path in tmp_path.iterdir()) == [
        "pod.yaml",
        "results.json",
        "results.sarif",
    ]
    assert "Traceback" not in capsys.readouterr().err


def test_the_same_file_named_twice_in_different_spellings_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "out").mkdir()
    (tmp_path / "pod.yaml").write_text(PRIVILEGED)
    (tmp_path / "link").symlink_to(tmp_path / "out", target_is_directory=True)
    args = ["scan", "pod.yaml", "--format", "json", "-o", "out/r.json"]
    args += ["--format", "sarif", "-o", "link/../out/./r.json"]
    assert cli.run(args) == 2
    assert "given twice" in capsys.readouterr().err
    assert not (tmp_path / "out" / "r.json").exists()


def test_a_full_disk_mid_write_is_one_error_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pod.yaml").write_text(PRIVILEGED)
    _crash_sarif(monkeypatch, OSError(28, "No space left on device"))
    assert cli.run(["scan", "pod.yaml", "--format", "sarif", "-o", "results.sarif"]) == 2
    assert capsys.readouterr().err == (
        "poolgate: error: cannot write results.sarif: no space left on device\n"
    )
    assert [path.name for path in tmp_path.iterdir()] == ["pod.yaml"]


def test_an_output_symlink_is_replaced_never_written_through(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pull request can add ``results.json -> the scanned manifest`` (or any file the
    CI user may write) where the report goes: the link is replaced by the report and
    its target stays untouched."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    (tmp_path / "pod.yaml").write_text(PRIVILEGED)
    (tmp_path / "results.json").symlink_to(tmp_path / "pod.yaml")
    assert cli.run(["scan", "pod.yaml", "--format", "json", "-o", "results.json"]) == 1
    assert not (tmp_path / "results.json").is_symlink()
    assert json.loads((tmp_path / "results.json").read_text())["findings"]
    assert (tmp_path / "pod.yaml").read_text() == PRIVILEGED
    assert sorted(path.name for path in tmp_path.iterdir()) == ["pod.yaml", "results.json"]


def test_a_symlink_to_a_device_outside_dev_is_replaced_not_opened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pod.yaml").write_text(PRIVILEGED)
    (tmp_path / "results.json").symlink_to("/dev/null")
    assert cli.run(["scan", "pod.yaml", "--format", "json", "-o", "results.json"]) == 1
    assert (tmp_path / "results.json").is_file() and not (tmp_path / "results.json").is_symlink()


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
def test_a_named_pipe_output_is_written_into_not_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pod.yaml").write_text(PRIVILEGED)
    pipe = tmp_path / "results.json"
    os.mkfifo(pipe)
    received: list[str] = []
    reader = threading.Thread(target=lambda: received.append(pipe.read_text()), daemon=True)
    reader.start()
    assert cli.run(["scan", "pod.yaml", "--format", "json", "-o", "results.json"]) == 1
    reader.join(timeout=10)
    assert stat.S_ISFIFO(os.lstat(pipe).st_mode), "the pipe was replaced by a file"
    assert json.loads(received[0])["findings"]


def test_a_dangling_descriptor_link_is_an_error_not_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``-o /dev/stdout`` with standard output closed: the link in /dev dangles, and
    replacing it would put a file where /dev/stdout was (as root). Here a directory
    of the test stands in for /dev."""
    monkeypatch.setattr(output, "_SYSTEM_DIRECTORIES", (f"{tmp_path}/",))
    link = tmp_path / "stdout"
    link.symlink_to(tmp_path / "closed-descriptor")
    with pytest.raises(OutputError, match="leads to no open file"):
        output.check_writable(link)
    with pytest.raises(OutputError, match="cannot write"):
        output.write(output.Destination("json", str(link)), lambda stream: stream.write("{}"))
    assert link.is_symlink()
