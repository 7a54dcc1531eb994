"""The SARIF reporter's output passes Microsoft's SARIF Multitool with GitHub's rules.

The JSON schema only checks shape; the Multitool also checks what GitHub code
scanning needs (GH rules) and SARIF's consistency rules (indexes, URIs, base
ids). Install it with ``.ci/install-sarif-multitool`` and point
``POOLGATE_SARIF_MULTITOOL`` at the binary it prints; without it these tests
skip on a user's clone and fail under ``CI=true`` (``tests/tool_check.py``), and a
variable set to a path that does not exist always fails.

The Multitool is a .NET program: one that cannot parse a URI in the log drops
the whole log silently and reports nothing. So each run also validates a copy
of the same log without ``$schema`` and requires the warning that deserves
(SARIF2008): proof that the tool read our content to the end.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tool_check import tool_missing

from scanner.findings.report import Report

Render = Callable[[Report, str], str]

ENV_VAR = "POOLGATE_SARIF_MULTITOOL"
CONFIG = Path(__file__).with_name("multitool-offline.xml")
_PLATFORM_BINARY = "node_modules/@microsoft/sarif-multitool-linux/Sarif.Multitool"
# Where .ci/install-sarif-multitool puts it by default, then a checkout-local install.
_CANDIDATES = (
    Path.home() / ".cache/poolgate-ci/sarif-multitool-5.7.0" / _PLATFORM_BINARY,
    Path(__file__).parents[2] / _PLATFORM_BINARY,
)


def _multitool() -> Path:
    configured = os.environ.get(ENV_VAR)
    if configured:
        path = Path(configured)
        # Configured but missing is a broken CI setup, not a reason to skip.
        assert path.is_file(), f"{ENV_VAR}={configured} does not exist"
        return path
    for candidate in _CANDIDATES:
        if candidate.is_file():
            return candidate
    on_path = shutil.which("Sarif.Multitool")
    if on_path:
        return Path(on_path)
    tool_missing(
        f"SARIF Multitool not installed: run .ci/install-sarif-multitool and set {ENV_VAR}"
    )


def _validate(tmp_path: Path, logs: dict[str, dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Validate each log in one Multitool run; its results, grouped by input file name."""
    for name, log in logs.items():
        (tmp_path / name).write_text(json.dumps(log, indent=2), encoding="utf-8")
    output = tmp_path / "multitool.sarif"
    command = [
        str(_multitool()),
        "validate",
        "--config", str(CONFIG),
        "--rule-kind", "Gh;Sarif",
        "--level", "Error;Warning;Note",
        "--log", "ForceOverwrite",
        "--output", str(output),
        *(str(tmp_path / name) for name in logs),
    ]  # fmt: skip
    # No ICU needed: validation uses no culture data.
    env = {**os.environ, "DOTNET_SYSTEM_GLOBALIZATION_INVARIANT": "1"}
    completed = subprocess.run(
        command, capture_output=True, text=True, env=env, timeout=300, check=False
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    run = json.loads(output.read_text(encoding="utf-8-sig"))["runs"][0]
    grouped: dict[str, list[dict[str, Any]]] = {name: [] for name in logs}
    for result in run.get("results", []):
        uri = result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
        grouped[uri.rsplit("/", 1)[-1]].append(result)
    return grouped


def _describe(results: list[dict[str, Any]]) -> str:
    return "\n".join(
        f"{r.get('level', 'warning')} {r['ruleId']} {r['message'].get('arguments')}"
        for r in results
    )


def test_sarif_output_passes_github_and_sarif_rules(
    tmp_path: Path, make_report: Callable[..., Report], render: Render
) -> None:
    full = json.loads(render(make_report(), "sarif"))
    clean = json.loads(render(make_report(findings=(), notifications=()), "sarif"))
    canary = {key: value for key, value in full.items() if key != "$schema"}

    results = _validate(
        tmp_path, {"full.sarif": full, "clean.sarif": clean, "canary.sarif": canary}
    )

    canary_rules = {r["ruleId"] for r in results["canary.sarif"]}
    assert "SARIF2008" in canary_rules, "Multitool did not analyse the log:\n" + _describe(
        results["canary.sarif"]
    )
    for name in ("full.sarif", "clean.sarif"):
        # Notes remain (snippets, message arguments, Pascal-case rule names): advice
        # that does not fit a manifest scanner. Errors and warnings must not.
        serious = [r for r in results[name] if r.get("level", "warning") in {"error", "warning"}]
        assert not serious, f"{name}:\n{_describe(serious)}"


def test_demo_scan_sarif_passes_multitool(tmp_path: Path) -> None:
    """The acceptance check: ``poolgate scan fixtures/demo --format sarif`` as a user runs it."""
    root = Path(__file__).parents[2]
    output = tmp_path / "demo.sarif"
    completed = subprocess.run(
        [sys.executable, "-m", "scanner", "scan", "fixtures/demo", "--format", "sarif",
         "--output", str(output)],
        cwd=root, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert completed.returncode == 1, completed.stderr
    log = json.loads(output.read_text(encoding="utf-8"))
    assert log["runs"][0]["results"], "the demo has findings"
    canary = {key: value for key, value in log.items() if key != "$schema"}
    results = _validate(tmp_path, {"demo.sarif": log, "canary.sarif": canary})
    assert "SARIF2008" in {r["ruleId"] for r in results["canary.sarif"]}
    serious = [
        r for r in results["demo.sarif"] if r.get("level", "warning") in {"error", "warning"}
    ]
    assert not serious, _describe(serious)
