"""What the command line imports: no process or garbage-collector workaround but
through its one fenced entry point (``scanner.runtime.entry``), and, on a scan, no
other command's module.

The imports are read from the modules' source (``ast``), inside functions too: a
command imports most of what it uses where it uses it.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CLI = ROOT / "scanner" / "cli"

WORKAROUNDS = ("gc", "multiprocessing", "scanner.evaluate", "scanner.runtime")
"""The collector, process starts (the helper process, forking the evaluation) and
interpreter exit: never imported by the command line, ..."""
FENCED = {"scanner.runtime.entry", "scanner.runtime.deadline"}
"""... except its entry point, and the run's deadline (a value, not a workaround)."""


def imported(source: str) -> set[str]:
    """Every module ``source`` imports, anywhere in it; ``from A import b`` gives
    ``A`` and ``A.b`` (``b`` may be a module)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def workarounds(names: set[str]) -> set[str]:
    """The names among ``names`` that reach a workaround other than through the fence
    (``from scanner.runtime import entry`` names the package too: that is no import
    of a workaround)."""
    return {
        name
        for name in names
        if _under(name, WORKAROUNDS) and not _under(name, FENCED) and name != "scanner.runtime"
    }


def _under(name: str, roots: Iterable[str]) -> bool:
    return any(name == root or name.startswith(root + ".") for root in roots)


def test_the_reading_finds_every_kind_of_import() -> None:
    source = (
        "import gc\n"
        "from scanner.runtime import teardown\n"
        "def f():\n"
        "    from scanner.evaluate.engine import start_helper\n"
        "    import scanner.runtime.executors as forking\n"
        "from scanner.runtime import entry\n"
    )
    assert workarounds(imported(source)) == {
        "gc",
        "scanner.runtime.teardown",
        "scanner.evaluate.engine",
        "scanner.evaluate.engine.start_helper",
        "scanner.runtime.executors",
    }


@pytest.mark.parametrize("module", sorted(CLI.glob("*.py")), ids=lambda path: path.name)
def test_the_command_line_imports_no_workaround(module: Path) -> None:
    assert workarounds(imported(module.read_text(encoding="utf-8"))) == set()


def test_main_goes_through_the_fenced_entry_point() -> None:
    assert "scanner.runtime.entry" in imported((CLI / "__init__.py").read_text(encoding="utf-8"))


_PROBE = """
import json, sys
from scanner.cli import run
code = run(sys.argv[1:])
print(json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""


def test_a_scan_imports_no_other_command(tmp_path: Path) -> None:
    manifest = tmp_path / "pod.yaml"
    manifest.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: shop}\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT), POOLGATE_CACHE_DIR=str(tmp_path / "cache"))
    result = subprocess.run(
        [sys.executable, "-c", _PROBE, "scan", str(manifest), "--fail-on", "never"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    data = json.loads(result.stdout.strip().splitlines()[-1])
    assert data["code"] == 0
    commands = {name for name in data["modules"] if name.startswith("scanner.cli.")}
    assert "scanner.cli.scan" in commands
    assert not commands & {
        "scanner.cli.audit",
        "scanner.cli.snapshot",
        "scanner.cli.rules",
        "scanner.cli.config",
        "scanner.cli.cluster",
    }
