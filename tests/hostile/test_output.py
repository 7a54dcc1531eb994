"""Reports under failure: a crash mid-write never leaves a truncated file behind.

In-process, so a reporter can be made to fail halfway through its output.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TextIO

import pytest

from scanner import cli
from scanner.reporters import sarif

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
    [(RuntimeError("reporter bug"), 4), (KeyboardInterrupt(), 130), (OSError(28, "No space"), 4)],
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
