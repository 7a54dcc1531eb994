"""`poolgate scan fixtures/hostile`: every hostile case as a user meets it.

fixtures/hostile/EXPECTED.yaml records what each file must produce. The run is a real
subprocess, so a crash, a hang (the subprocess timeout) or a traceback fails the test
the way it would fail a CI job; peak memory is read from the child's resource usage.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import cli_run
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
CORPUS = ROOT / "fixtures" / "hostile"
EXPECTED = yaml.safe_load((CORPUS / "EXPECTED.yaml").read_text())
DOCUMENT_RULES = {"PG001", "PG002", "PG003"}
TIMEOUT = 300  # seconds; the corpus takes a few. Only a hang gets near this.
MIB = 1024 * 1024


def poolgate(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return cli_run.poolgate(*args, cwd=cwd, timeout=TIMEOUT)


def generate(directory: Path, outside: Path) -> Path:
    """The cases too large or too special to commit (EXPECTED.yaml, ``generated:``)."""
    directory.mkdir()
    configmap = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n"
    (directory / "big-scalar.yaml").write_text(
        configmap.format(name="big-scalar") + "data:\n  model.bin: " + "A" * (3 * MIB) + "\n"
    )
    (directory / "over-size.yaml").write_text(
        configmap.format(name="over-size") + "data:\n  blob: " + "B" * (5 * MIB) + "\n"
    )
    (directory / "big-image.yaml").write_text(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: big-image\n"
        "  namespace: tenant-a\nspec:\n  template:\n    spec:\n"
        "      serviceAccountName: agent\n      containers:\n        - name: agent\n"
        f"          image: registry.example.com/{'x' * (2 * MIB)}:latest\n"
    )
    os.mkfifo(directory / "pipe.yaml")  # opening it would wait for a writer forever
    outside.write_text(configmap.format(name="secret"))
    (directory / "outside.yaml").symlink_to(outside)
    (directory / "loop.yaml").symlink_to(directory / "loop.yaml")
    (directory / "again").symlink_to(directory, target_is_directory=True)
    return directory


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not hasattr(os, "mkfifo"):
        pytest.skip("named pipes and symbolic links need a POSIX system")
    base = tmp_path_factory.mktemp("hostile")
    return generate(base / "generated", base / "secret.yaml")


@pytest.fixture(scope="module")
def scan(generated: Path) -> subprocess.CompletedProcess[str]:
    return poolgate(
        "scan", "fixtures/hostile", str(generated), "--max-file-size", "4MiB", "--format", "json"
    )


def expectations(generated: Path) -> dict[str, dict[str, Any]]:
    """URI as the report names it -> what EXPECTED.yaml says about that file."""
    found = {f"fixtures/hostile/{name}": spec or {} for name, spec in EXPECTED["files"].items()}
    found.update(
        {(generated / name).as_posix(): spec or {} for name, spec in EXPECTED["generated"].items()}
    )
    return found


def test_exit_code_no_traceback_and_nothing_on_stderr(
    scan: subprocess.CompletedProcess[str],
) -> None:
    assert "Traceback" not in scan.stdout + scan.stderr
    assert scan.stderr == ""
    assert scan.returncode == EXPECTED["exit_code"]


def test_every_committed_file_is_described() -> None:
    committed = {
        path.relative_to(CORPUS).as_posix()
        for path in CORPUS.rglob("*")
        if path.is_file() and path.name != "EXPECTED.yaml"
    }
    assert committed == set(EXPECTED["files"])


def test_the_committed_corpus_stays_small() -> None:
    assert sum(path.stat().st_size for path in CORPUS.rglob("*") if path.is_file()) < 200_000


def test_each_file_reports_what_expected_yaml_says(
    scan: subprocess.CompletedProcess[str], generated: Path
) -> None:
    report = json.loads(scan.stdout)
    expected = expectations(generated)
    reported_uris = {f["location"]["uri"] for f in report["findings"]}
    reported_uris |= {n["uri"] for n in report["notifications"]}
    assert reported_uris <= set(expected), "reports for files EXPECTED.yaml does not describe"
    for uri, spec in expected.items():
        findings = [f for f in report["findings"] if f["location"]["uri"] == uri]
        _check_findings(uri, spec.get("findings", []), findings)
        notifications = sorted(
            (n["level"], n["line"] or 0, n["message"])
            for n in report["notifications"]
            if n["uri"] == uri
        )
        wanted = sorted(
            (n["level"], n["line"], n["message"]) for n in spec.get("notifications", [])
        )
        assert notifications == wanted, uri


def _check_findings(uri: str, wanted: list[dict[str, Any]], found: list[dict[str, Any]]) -> None:
    def key(item: dict[str, Any], rule: str, line: int) -> tuple[Any, ...]:
        return (rule, line, item.get("level"), item.get("outcome"), item.get("message"))

    available = Counter(
        (f["ruleId"], f["location"]["line"], f["level"], f["outcome"], f["message"]) for f in found
    )
    for item in wanted:
        # Match on what the expectation names; fields it leaves out match anything.
        match = next(
            (
                candidate
                for candidate, count in available.items()
                if count
                and all(
                    want is None or want == got
                    for want, got in zip(
                        key(item, item["rule"], item["line"]), candidate, strict=True
                    )
                )
            ),
            None,
        )
        assert match is not None, f"{uri}: expected {item}, found {sorted(available)}"
        available[match] -= 1
    documents = sorted(
        (f["ruleId"], f["location"]["line"], f["message"])
        for f in found
        if f["ruleId"] in DOCUMENT_RULES
    )
    assert documents == sorted(
        (w["rule"], w["line"], w["message"]) for w in wanted if w["rule"] in DOCUMENT_RULES
    ), uri
    if not any(w.get("outcome") == "error" for w in wanted):
        errors = [f for f in found if f["outcome"] == "error"]
        assert errors == [], f"{uri}: unexpected rule errors {errors}"


def test_incomplete_when_findings_do_not_fail(generated: Path) -> None:
    result = poolgate(
        "scan", "fixtures/hostile", str(generated), "--max-file-size", "4MiB", "--fail-on", "never"
    )
    assert result.returncode == EXPECTED["exit_code_fail_on_never"], result.stderr
    assert "Traceback" not in result.stdout + result.stderr


def test_text_report_escapes_terminal_control_sequences() -> None:
    result = poolgate("scan", "fixtures/hostile/terminal-escape.yaml")
    assert result.returncode == 1, result.stderr
    assert (
        "\x1b" not in result.stdout and "\u202e" not in result.stdout and "\a" not in result.stdout
    )
    assert "agent\\x1b[2J\\x1b]0;pwned\\x07\\u202e" in result.stdout


def test_custom_tags_construct_and_run_nothing(tmp_path: Path) -> None:
    """The fixture's tags would run ``touch /tmp/poolgate-pwned`` under yaml.load."""
    shutil.copy(CORPUS / "custom-tags.yaml", tmp_path / "custom-tags.yaml")
    marker = Path("/tmp/poolgate-pwned")
    existed = marker.exists()
    result = poolgate("scan", "custom-tags.yaml", cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    assert marker.exists() == existed


_MEASURE = """
import os, subprocess, sys, threading
child = subprocess.Popen(sys.argv[2:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
watchdog = threading.Timer(float(sys.argv[1]), child.kill)
watchdog.start()
_, status, usage = os.wait4(child.pid, 0)
watchdog.cancel()
print(usage.ru_maxrss, os.waitstatus_to_exitcode(status))
"""


def _peak_rss_mib(args: list[str]) -> tuple[float, int]:
    """Peak resident set size of a poolgate run, from ``wait4`` on the child.

    A small helper process starts poolgate: Linux carries the memory high-water mark of
    the process that forks across ``exec``, and a fork straight from this test process
    would report the test runner's own size (hundreds of MiB after the fuzz tests).
    """
    command = [sys.executable, "-m", "scanner", *args]
    result = subprocess.run(
        [sys.executable, "-c", _MEASURE, str(TIMEOUT), *command],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=TIMEOUT + 30,
        check=True,
    )
    maxrss, code = (int(field) for field in result.stdout.split())
    scale = 1 if sys.platform == "darwin" else 1024  # ru_maxrss: bytes on macOS, KiB on Linux
    return maxrss * scale / MIB, code


@pytest.mark.skipif(not hasattr(os, "wait4"), reason="os.wait4 is POSIX only")
@pytest.mark.parametrize("name", ["billion-laughs.yaml", "quadratic-aliases.yaml"])
def test_alias_bombs_stay_under_200_mib(name: str) -> None:
    peak, code = _peak_rss_mib(["scan", f"fixtures/hostile/{name}"])
    assert code == 3  # PG001: the document was refused, nothing else to report
    assert peak < 200, f"peak RSS {peak:.0f} MiB"
