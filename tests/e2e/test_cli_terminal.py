"""What poolgate prints for people on a terminal: ``--color`` with ``NO_COLOR`` and
``FORCE_COLOR``, and ``scan --progress`` (issue 25). Run as a user runs it, in a
subprocess; a terminal is a pseudo-terminal."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest
from cli_run import DROPPED, ROOT, poolgate

ESC = "\x1b["
RED = "\x1b[31m"
POD = """\
apiVersion: v1
kind: Pod
metadata: {name: p, namespace: ml}
spec:
  containers:
    - {name: c, image: busybox, securityContext: {privileged: true}}
"""
COLOR_VARIABLES = ("NO_COLOR", "FORCE_COLOR")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    (tmp_path / ".git").mkdir()
    (tmp_path / "pod.yaml").write_text(POD)
    return tmp_path


def scan(repo: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return poolgate("scan", "pod.yaml", *args, cwd=repo, drop=COLOR_VARIABLES, env=env)


# --- --color ---------------------------------------------------------------------


def test_no_colour_off_a_terminal_by_default(repo: Path) -> None:
    result = scan(repo)
    assert result.returncode == 1
    assert ESC not in result.stdout + result.stderr


@pytest.mark.parametrize(
    ("args", "env", "coloured"),
    [
        ((), {"FORCE_COLOR": "1"}, True),  # off a terminal, asked for by the environment
        ((), {"FORCE_COLOR": "1", "NO_COLOR": "1"}, False),  # the opt-out wins
        ((), {"FORCE_COLOR": "1", "NO_COLOR": ""}, True),  # empty: not set (no-color.org)
        ((), {"FORCE_COLOR": ""}, False),
        (("--color", "always"), {"NO_COLOR": "1"}, True),  # --color beats both
        (("--color", "never"), {"FORCE_COLOR": "1"}, False),
        (("--color", "auto"), {}, False),
    ],
)
def test_color_option_and_environment(
    repo: Path, args: tuple[str, ...], env: dict[str, str], coloured: bool
) -> None:
    result = scan(repo, *args, **env)
    assert result.returncode == 1, result.stderr
    assert (RED in result.stdout) is coloured
    assert "PG301" in result.stdout


def test_machine_formats_and_report_files_never_carry_colour(repo: Path) -> None:
    result = scan(repo, "--color", "always", "--format", "json")
    assert ESC not in result.stdout
    assert json.loads(result.stdout)["summary"]["errors"] >= 1
    written = scan(repo, "--color", "always", "--format", "text", "-o", "report.txt")
    assert written.stdout == "" and "PG301" in (repo / "report.txt").read_text()
    assert ESC not in (repo / "report.txt").read_text()


def test_errors_and_warnings_on_stderr_are_coloured_too(repo: Path) -> None:
    (repo / ".poolgate.yaml").write_text("apiVersion: poolgate.io/v1alpha1\nkind: Nope\n")
    for command in (["config", "validate"], ["scan", "pod.yaml"], ["rules", "list"]):
        result = poolgate(*command, "--color", "always", cwd=repo, drop=COLOR_VARIABLES)
        assert result.returncode == 2
        assert result.stderr.startswith(RED + "poolgate: error: ")
        plain = poolgate(*command, "--color", "never", cwd=repo, env={"FORCE_COLOR": "1"})
        assert plain.stderr.startswith("poolgate: error: ") and ESC not in plain.stderr


def test_colour_keeps_the_escaping_of_what_the_input_says(repo: Path) -> None:
    """A file name holding an escape sequence is shown escaped: the only control
    sequences printed are poolgate's own styles."""
    (repo / "pod.yaml").rename(repo / "x\x1b[2J.yaml")
    result = poolgate("scan", ".", "--color", "always", cwd=repo, drop=COLOR_VARIABLES)
    assert result.returncode == 1
    assert "x\\x1b[2J.yaml" in result.stdout
    assert "\x1b[2J" not in result.stdout
    assert RED in result.stdout


def test_rules_test_colours_its_verdicts(tmp_path: Path) -> None:
    result = poolgate(
        "rules", "test", str(ROOT / "fixtures" / "rules"), "--color", "always", drop=COLOR_VARIABLES
    )
    assert result.returncode == 0, result.stdout[-2000:]
    assert result.stdout.rstrip("\n").splitlines()[-1].startswith("\x1b[32mrule fixtures:")


# --- on a terminal, and --progress -------------------------------------------------


def on_a_terminal(
    args: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: float = 120
) -> tuple[int, str, str]:
    """poolgate with stdout a pipe and stderr a pseudo-terminal: (exit code, stdout,
    what the terminal showed)."""
    leader, follower = pty.openpty()
    environment = {k: v for k, v in os.environ.items() if k not in (*DROPPED, *COLOR_VARIABLES)}
    environment["PYTHONPATH"] = str(ROOT)
    environment.update(env or {})
    with subprocess.Popen(
        [sys.executable, "-m", "scanner", *args],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=follower,
        env=environment,
        text=True,
    ) as process:
        os.close(follower)
        shown = b""
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: the process closed its end
                break
            if not chunk:
                break
            shown += chunk
        out = process.stdout.read() if process.stdout is not None else ""
        code = process.wait(timeout=timeout)
    os.close(leader)
    return code, out, shown.decode("utf-8", "replace")


def test_progress_on_request_goes_to_stderr_never_into_the_report(repo: Path) -> None:
    result = scan(repo, "--progress", "--format", "json")
    assert result.returncode == 1
    assert json.loads(result.stdout)["summary"]["objects"] == 1  # the report alone
    assert "  read: 1 files, 1 objects\n" in result.stderr
    assert "  evaluated: " in result.stderr and " findings\n" in result.stderr
    assert ESC not in result.stderr  # not a terminal: finished stages only, no live line


def test_a_quick_scan_on_a_terminal_shows_no_progress(repo: Path) -> None:
    code, out, shown = on_a_terminal(["scan", "pod.yaml", "--format", "json"], repo)
    assert code == 1
    assert json.loads(out)["summary"]["objects"] == 1
    assert shown == ""


def test_a_slow_scan_on_a_terminal_shows_its_progress_by_itself(repo: Path) -> None:
    """A Helm chart whose render takes 2 seconds (a stand-in helm): after a second the
    terminal shows where the scan is, and what finished before."""
    chart = repo / "chart"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: slow\nversion: 0.1.0\n")
    (chart / "templates" / "cm.yaml").write_text("kind: ConfigMap\n")
    rendered = "---\\n# Source: slow/templates/cm.yaml\\n" + (
        "apiVersion: v1\\nkind: ConfigMap\\nmetadata: {name: c, namespace: ml}\\n"
    )
    helm = repo / "bin" / "helm"
    helm.parent.mkdir()
    helm.write_text(
        f"#!{sys.executable}\nimport sys, time\ntime.sleep(2)\nsys.stdout.write('{rendered}')\n"
    )
    helm.chmod(0o755)
    path = f"{repo / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"
    args = ["scan", "pod.yaml", "chart", "--format", "json"]
    code, out, shown = on_a_terminal(args, repo, {"PATH": path})
    assert code == 1, shown
    assert json.loads(out)["summary"]["objects"] >= 1  # the report has no progress in it
    assert "  read: 1 files, 1 objects" in shown  # finished before the second: kept
    assert "  rendering 1 charts and kustomizations ..." in shown  # the live line
    assert "\r\x1b[K  rendered: 1 objects" in shown  # the live line gives way to the result
    assert shown.endswith(" findings\r\n")  # the terminal turns LF into CRLF


def test_colour_is_automatic_on_a_terminal(repo: Path) -> None:
    code, _, shown = on_a_terminal(["scan", "nope.yaml"], repo)
    assert code == 2
    assert shown.startswith(RED + "poolgate: error: nope.yaml: no such file")
    code, _, shown = on_a_terminal(["scan", "nope.yaml"], repo, {"NO_COLOR": "1"})
    assert shown.startswith("poolgate: error: nope.yaml")
