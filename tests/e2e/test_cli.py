"""End-to-end: the ``poolgate`` command as a user runs it (subprocesses, real files)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from cli_run import poolgate

from scanner.cli.scan import file_size as _file_size

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "fixtures" / "demo"

PRIVILEGED = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: sidecar
  namespace: ml
spec:
  template:
    spec:
      containers:
        - name: agent
          image: busybox@sha256:{digest}
          securityContext:
            privileged: true
""".replace("{digest}", "a" * 64)

CLEAN = PRIVILEGED.replace("privileged: true", "privileged: false")


def assert_no_traceback(result: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in result.stderr and "Traceback" not in result.stdout


def test_demo_findings_are_exactly_the_expected_lines() -> None:
    """fixtures/demo/EXPECTED.md lists every finding of the first seven rules."""
    result = poolgate("scan", "fixtures/demo", "--format", "json")
    assert result.returncode == 1, result.stderr
    report = json.loads(result.stdout)
    expected_text = (DEMO / "EXPECTED.md").read_text()
    expected = sorted(
        (f"fixtures/demo/{path}", int(line), rule)
        for path, line, rule in re.findall(r"^(\S+\.yaml):(\d+) (PG\d{3}) ", expected_text, re.M)
    )
    covered = {"PG103", "PG104", "PG107", "PG301", "PG302", "PG401", "PG501"}
    got = sorted(
        (f["location"]["uri"], f["location"]["line"], f["ruleId"])
        for f in report["findings"]
        if f["ruleId"] in covered
    )
    assert got == expected
    assert not [f for f in report["findings"] if f["ruleId"] in ("PG001", "PG002", "PG003")]


def test_text_report_has_exact_lines_and_a_summary() -> None:
    result = poolgate("scan", "fixtures/demo")
    assert result.returncode == 1
    assert "fixtures/demo/training/pytorch-train.yaml:19:7 error PG302" in result.stdout
    assert "\x1b[" not in result.stdout  # no colour when not a terminal
    assert_no_traceback(result)


def test_stdin(tmp_path: Path) -> None:
    result = poolgate("scan", "-", "--format", "json", stdin=PRIVILEGED, cwd=tmp_path)
    assert result.returncode == 1
    [finding] = [f for f in json.loads(result.stdout)["findings"] if f["ruleId"] == "PG301"]
    assert finding["location"] == {
        "uri": "<stdin>",
        "line": 13,
        "column": 13,
        "path": "spec.template.spec.containers[0].securityContext.privileged",
    }


def test_clean_input_exits_zero(tmp_path: Path) -> None:
    (tmp_path / "ok.yaml").write_text(CLEAN)
    result = poolgate("scan", "ok.yaml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_fail_on_and_disable(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text(PRIVILEGED)
    assert poolgate("scan", "p.yaml", "--disable", "pg301", cwd=tmp_path).returncode == 0
    assert poolgate("scan", "p.yaml", "--fail-on", "never", cwd=tmp_path).returncode == 0


def test_missing_path_is_a_usage_error_without_traceback(tmp_path: Path) -> None:
    result = poolgate("scan", "nope.yaml", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.startswith("poolgate: error: nope.yaml")
    assert len(result.stderr.strip().splitlines()) == 1
    assert_no_traceback(result)


def test_malformed_yaml_is_pg001_incomplete_and_other_files_still_scanned(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x\n")
    (tmp_path / "ok.yaml").write_text(CLEAN)
    result = poolgate("scan", ".", "--format", "json", cwd=tmp_path)
    assert result.returncode == 3, result.stderr
    findings = json.loads(result.stdout)["findings"]
    assert [f["ruleId"] for f in findings] == ["PG001"]
    assert findings[0]["location"]["uri"] == "bad.yaml"
    (tmp_path / "p.yaml").write_text(PRIVILEGED)
    assert poolgate("scan", ".", cwd=tmp_path).returncode == 1  # real findings win over incomplete


@pytest.mark.parametrize("hide", ["disable", "exemption"])
def test_an_unparsable_file_is_never_clean_even_with_pg001_hidden(
    tmp_path: Path, hide: str
) -> None:
    """Disabling PG001 or exempting it hides the finding, not the fact that a file
    was not read: the run is incomplete (exit 3) with an error notification."""
    (tmp_path / "bad.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x\n")
    (tmp_path / "ok.yaml").write_text(CLEAN)
    args = ["scan", ".", "--format", "json"]
    if hide == "disable":
        args += ["--disable", "PG001"]
    else:
        (tmp_path / ".poolgate.yaml").write_text(
            "apiVersion: poolgate.io/v1alpha1\nkind: GpuPoolGate\nspec:\n  exemptions:\n"
            "    - {rule: PG001, reason: generated files}\n"
        )
    result = poolgate(*args, cwd=tmp_path)
    assert result.returncode == 3, result.stderr
    report = json.loads(result.stdout)
    assert [f for f in report["findings"] if f["suppression"] is None] == []
    [note] = [n for n in report["notifications"] if n["level"] == "error"]
    assert note["uri"] == "bad.yaml" and note["line"] == 4
    assert "not read; its PG001 finding is disabled or suppressed" in note["message"]
    assert_no_traceback(result)


def test_unknown_rule_id_and_bad_options_are_usage_errors(tmp_path: Path) -> None:
    (tmp_path / "ok.yaml").write_text(CLEAN)
    for args in (
        ("scan", "ok.yaml", "--disable", "PG999"),
        ("scan", "ok.yaml", "--format", "xml"),
        ("scan", "ok.yaml", "--format", "json", "--format", "sarif"),
        ("scan", "ok.yaml", "--format", "json", "--output", "a", "--output", "b"),
        (
            "scan",
            "ok.yaml",
            "--format",
            "json",
            "--format",
            "sarif",
            "-o",
            "x.json",
            "-o",
            "x.json",
        ),
        ("scan", "ok.yaml", "--output", "missing-dir/out.json"),
        ("scan",),
    ):
        result = poolgate(*args, cwd=tmp_path)
        assert result.returncode == 2, (args, result.stdout, result.stderr)
        assert result.stderr.startswith(("poolgate: error:", "Usage:")), result.stderr
        assert_no_traceback(result)


def test_unwritable_output_fails_before_scanning(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text(PRIVILEGED)
    (tmp_path / "report.json").mkdir()
    result = poolgate("scan", "p.yaml", "--format", "json", "--output", "report.json", cwd=tmp_path)
    assert result.returncode == 2 and "is a directory" in result.stderr


def test_paired_outputs_are_written(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text(PRIVILEGED)
    result = poolgate(
        "scan",
        "p.yaml",
        "--format",
        "json",
        "-o",
        "r.json",
        "--format",
        "sarif",
        "-o",
        "r.sarif",
        "--format",
        "text",
        "-o",
        "-",
        cwd=tmp_path,
    )
    assert result.returncode == 1
    assert json.loads((tmp_path / "r.json").read_text())["findings"]
    assert json.loads((tmp_path / "r.sarif").read_text())["version"] == "2.1.0"
    assert "PG301" in result.stdout
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".r.")]  # no temp files left


def test_broken_user_rule_lists_every_problem(tmp_path: Path) -> None:
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "a.yaml").write_text("id: X\n")
    (rules / "b.yaml").write_text("key: [unclosed\n")
    (tmp_path / "ok.yaml").write_text(CLEAN)
    result = poolgate("scan", "ok.yaml", "--rules", "rules", cwd=tmp_path)
    assert result.returncode == 2
    assert "a.yaml" in result.stderr and "b.yaml" in result.stderr
    assert_no_traceback(result)


def test_github_format_is_the_default_under_actions(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text(PRIVILEGED)
    env = {**os.environ, "GITHUB_ACTIONS": "true"}
    result = subprocess.run(
        [sys.executable, "-m", "scanner", "scan", "p.yaml"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "::error file=p.yaml,line=13,col=13" in result.stdout


def test_rules_list_show_test_and_version() -> None:
    listing = poolgate("rules", "list")
    assert listing.returncode == 0
    assert re.search(r"^PG301\s+error\s+privileged-outside-operator\s+Only", listing.stdout, re.M)
    shown = poolgate("rules", "show", "pg301")
    assert (
        shown.returncode == 0 and "Remediation:" in shown.stdout and "violations:" in shown.stdout
    )
    assert poolgate("rules", "show", "PG999").returncode == 2
    tested = poolgate("rules", "test")
    assert tested.returncode == 0, tested.stdout
    version = poolgate("--version")
    assert version.stdout.strip().startswith("poolgate 0.")


def test_rules_test_fails_on_a_wrong_marker(tmp_path: Path) -> None:
    fixture = tmp_path / "PG301"
    fixture.mkdir()
    (fixture / "fire-wrong.yaml").write_text(
        PRIVILEGED.replace("  name: sidecar", "  name: sidecar  # expect: PG301")
    )
    (fixture / "pass-ok.yaml").write_text(CLEAN)
    result = poolgate("rules", "test", str(tmp_path))
    assert result.returncode == 1
    assert "FAIL PG301" in result.stdout and "expected on line(s) 4" in result.stdout


def test_rules_test_outside_a_checkout_with_fixtures_is_one_line(tmp_path: Path) -> None:
    """Found in review: the default fixtures/rules missing (any user repository) was
    an internal error with a traceback, exit 4."""
    result = poolgate("rules", "test", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "poolgate: error: no fixtures/rules here and no fixtures/ in a rule directory "
        "(give the fixtures directory: poolgate rules test DIR)"
    ]


@pytest.mark.parametrize("engine", ["cpp", "python"])
def test_cel_engine_option(engine: str, tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text(PRIVILEGED)
    result = poolgate("scan", "p.yaml", "--cel-engine", engine, "--format", "json", cwd=tmp_path)
    assert result.returncode == 1
    assert {f["ruleId"] for f in json.loads(result.stdout)["findings"]} == {"PG301"}


def test_sarif_regions_are_the_lines_of_the_offending_fields(tmp_path: Path) -> None:
    out = tmp_path / "demo.sarif"
    result = poolgate("scan", "fixtures/demo", "--format", "sarif", "--output", str(out))
    assert result.returncode == 1, result.stderr
    run = json.loads(out.read_text())["runs"][0]
    regions = {
        (
            r["ruleId"],
            r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
            r["locations"][0]["physicalLocation"]["region"]["startLine"],
        )
        for r in run["results"]
    }
    assert ("PG301", "fixtures/demo/inference/llm-server.yaml", 72) in regions
    assert ("PG107", "fixtures/demo/training/pytorch-train.yaml", 92) in regions
    lines = (DEMO / "inference" / "llm-server.yaml").read_text().splitlines()
    assert lines[72 - 1].strip() == "privileged: true"
    for r in run["results"]:
        assert r["partialFingerprints"]
        assert r["locations"][0]["physicalLocation"]["artifactLocation"]["uriBaseId"] == "%SRCROOT%"
        assert "/" in r["locations"][0]["logicalLocations"][0]["fullyQualifiedName"]


def test_the_console_entry_point_runs_without_the_cyclic_collector() -> None:
    """``main`` (the ``poolgate`` script) turns the collector off for its one command
    and ends the process with the command's code once its output is flushed
    (scanner/runtime/teardown.py); ``run``, which library callers and these tests use, leaves
    the collector as it was and holds nothing past the call."""
    probe = (
        "import gc, json, sys\n"
        "from scanner import cli\nfrom scanner.runtime import teardown\n"
        "real = cli.run\n"
        "def probe(argv):\n"
        "    real(argv)\n"
        "    print(json.dumps(['main', gc.isenabled()]))\n"
        "    return 3\n"
        "cli.run = probe\n"
        "gc.enable()\n"
        "real(['--version'])\n"
        "teardown.keep(object())\n"
        "print(json.dumps(['run', gc.isenabled(), teardown.kept()]))\n"
        "cli.main(['--version'])\n"
        "print('not reached')\n"
    )
    buffered = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=buffered
    )
    lines = result.stdout.splitlines()
    # Block-buffered (a pipe), and still all there: the end flushes before exiting.
    assert [json.loads(line) for line in lines if line.startswith("[")] == [
        ["run", True, 0],
        ["main", False],
    ]
    assert len([line for line in lines if line.startswith("poolgate")]) == 2
    assert "not reached" not in result.stdout
    assert result.returncode == 3
    assert result.stderr == ""


def test_a_max_file_size_over_the_largest_limit_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "ok.yaml").write_text(CLEAN)
    result = poolgate("scan", "ok.yaml", "--max-file-size", "99999999999GiB", cwd=tmp_path)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == (
        "poolgate: error: Invalid value for '--max-file-size': "
        "'99999999999GiB' is more than the largest limit, 1GiB\n"
    )
    assert poolgate("scan", "ok.yaml", "--max-file-size", "1GiB", cwd=tmp_path).returncode == 0


@pytest.mark.parametrize("size", ["²", "1²K", "٣MiB", "1" * 5000])
def test_a_max_file_size_with_other_digits_is_a_usage_error(tmp_path: Path, size: str) -> None:
    """``str.isdigit`` accepts superscripts, which ``int`` refuses: no traceback."""
    (tmp_path / "ok.yaml").write_text(CLEAN)
    result = poolgate("scan", "ok.yaml", "--max-file-size", size, cwd=tmp_path)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == (
        f"poolgate: error: Invalid value for '--max-file-size': "
        f"'{size}' is not a size such as 10MiB, 512KiB or 1048576\n"
    )


@pytest.mark.parametrize(
    ("size", "bytes_"), [("512KiB", 524288), ("10m", 10485760), ("10Mi", 10485760), ("7", 7)]
)
def test_max_file_size_units(size: str, bytes_: int) -> None:
    assert _file_size(size) == bytes_


def test_a_max_file_size_in_decimal_looking_units_is_refused(tmp_path: Path) -> None:
    """Found in review: 10MB was read as 10 MiB. Refused: a reader cannot tell."""
    (tmp_path / "ok.yaml").write_text(CLEAN)
    result = poolgate("scan", "ok.yaml", "--max-file-size", "10MB", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr == (
        "poolgate: error: Invalid value for '--max-file-size': "
        "'10MB' is ambiguous (decimal or binary): write 10MiB or a number of bytes\n"
    )


@pytest.mark.parametrize("option", ["--baseline", "--write-baseline"])
def test_a_baseline_that_is_also_an_output_is_a_usage_error(tmp_path: Path, option: str) -> None:
    """The report would silently replace the baseline (and the next run would fail)."""
    (tmp_path / "ok.yaml").write_text(CLEAN)
    assert poolgate("scan", "ok.yaml", "--write-baseline", "b.json", cwd=tmp_path).returncode == 0
    before = (tmp_path / "b.json").read_text()
    result = poolgate(
        "scan", "ok.yaml", option, "b.json", "--format", "json", "-o", "./b.json", cwd=tmp_path
    )
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == (
        f"poolgate: error: {option} b.json is also an --output (write the report to another file)\n"
    )
    assert (tmp_path / "b.json").read_text() == before


def test_an_unwritable_write_baseline_is_named_by_its_own_option(tmp_path: Path) -> None:
    (tmp_path / "ok.yaml").write_text(CLEAN)
    result = poolgate("scan", "ok.yaml", "--write-baseline", "nodir/b.json", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr == (
        "poolgate: error: --write-baseline nodir/b.json: directory nodir does not exist\n"
    )


def test_a_closed_standard_input_is_a_read_error_not_a_crash(tmp_path: Path) -> None:
    """``poolgate scan - <&-``: Python's sys.stdin is None then."""
    result = poolgate("scan", "-", cwd=tmp_path, preexec=lambda: os.close(0))
    assert result.returncode == 3, result.stderr
    assert "<stdin>: standard input is closed" in result.stdout + result.stderr
    assert_no_traceback(result)


def test_a_closed_standard_output_is_one_error_line(tmp_path: Path) -> None:
    """``poolgate scan ok.yaml >&-``: Python's sys.stdout is None then."""
    (tmp_path / "ok.yaml").write_text(CLEAN)
    result = poolgate("scan", "ok.yaml", cwd=tmp_path, preexec=lambda: os.close(1))
    assert result.returncode == 2, result.stderr
    assert result.stderr == "poolgate: error: cannot write standard output: it is closed\n"


@pytest.mark.parametrize("fmt", ["sarif", "json", "text", "github", "html", "junit"])
def test_a_file_name_that_is_not_utf8_is_scanned_and_reported(tmp_path: Path, fmt: str) -> None:
    """A pull request may add one; every report but JUnit crashed encoding its URI
    (exit 4, no SARIF uploaded). The name's bytes are shown as \\xNN."""
    (tmp_path / ".git").mkdir()
    name = os.fsdecode(b"bad\xff.yaml")
    (tmp_path / "k8s").mkdir()
    (tmp_path / "k8s" / name).write_text(PRIVILEGED)
    result = poolgate("scan", "k8s", "--format", fmt, "-o", f"report.{fmt}", cwd=tmp_path)
    assert (result.returncode, result.stderr) == (1, "")
    report = (tmp_path / f"report.{fmt}").read_text(encoding="utf-8")
    shown = {"sarif": "bad%5Cxff.yaml", "json": "bad\\\\xff.yaml"}.get(fmt, "bad\\xff.yaml")
    assert shown in report


def test_an_option_value_that_starts_with_a_dash_is_not_refused(tmp_path: Path) -> None:
    """The refusal of file names read as options looks at options, not at their values
    (found in review: the second `-o -report.json` run was refused)."""
    (tmp_path / "ok.yaml").write_text(CLEAN)
    for _ in range(2):
        result = poolgate("scan", "ok.yaml", "--format", "json", "-o", "-report.json", cwd=tmp_path)
        assert result.returncode == 0, result.stderr
    assert json.loads((tmp_path / "-report.json").read_text())["findings"] == []
    (tmp_path / "--fail-on=never.yaml").write_text(PRIVILEGED)
    refused = poolgate("scan", "ok.yaml", "--fail-on=never.yaml", cwd=tmp_path)
    assert refused.returncode == 2 and "would be read as an option" in refused.stderr
    assert poolgate("scan", "ok.yaml", "--", "--fail-on=never.yaml", cwd=tmp_path).returncode == 1
