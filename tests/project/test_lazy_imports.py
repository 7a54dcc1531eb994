"""A plain scan imports only what it uses: the pre-commit path pays for every import.

kubernetes (audit), sarif_om (SARIF reports), celpy (the pure-Python CEL engine) and,
once the rule files are known to pass their schema (scanner/ruleset/cache.py), jsonschema
stay unimported on a cpp text or json scan; so does poolgate's CEL parser once the
rule cache holds what each rule reads.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from scanner.cel import cpp_available

REPO = Path(__file__).resolve().parents[2]
NEVER = ("kubernetes", "sarif_om", "celpy", "jsonschema")
PARSER = {"scanner.cel.parser", "scanner.cel.syntax", "scanner.cel.walk"}

_PROBE = """
import json, sys
from scanner.cli import run
code = run(sys.argv[1:])
print(json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""


def _scan(tmp_path: Path, *args: str) -> tuple[int, set[str], set[str]]:
    env = dict(os.environ, POOLGATE_CACHE_DIR=str(tmp_path / "cache"))
    result = subprocess.run(
        [sys.executable, "-c", _PROBE, *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    last = result.stdout.strip().splitlines()[-1]
    data = json.loads(last)
    modules = set(data["modules"])
    return data["code"], {name.split(".")[0] for name in modules}, modules


@pytest.mark.skipif(not cpp_available(), reason="cel-expr-python not installed")
@pytest.mark.parametrize("fmt", ["text", "json"])
def test_scan_imports_no_heavy_optional_modules(tmp_path: Path, fmt: str) -> None:
    manifest = tmp_path / "deployment.yaml"
    manifest.write_text(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: shop}\n"
        "spec:\n  template:\n    spec:\n      containers:\n      - {name: web, image: nginx}\n"
    )
    out = tmp_path / "report"
    argv = ["scan", str(manifest), "--format", fmt, "--output", str(out), "--fail-on", "never"]
    argv += ["--cel-engine", "cpp"]
    code, first, parsed = _scan(tmp_path, *argv)  # validates and reads the rules once
    assert code == 0 and out.exists()
    assert "jsonschema" in first and parsed >= PARSER
    code, second, modules = _scan(tmp_path, *argv)
    assert code == 0
    assert not set(NEVER) & second
    assert "subprocess" not in second  # no git process without --policy-ref (scanner.config.gitref)
    assert not PARSER & modules
