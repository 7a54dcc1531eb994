"""The two README commands work on a fresh machine: CI runs them word for word, and
``[dev]`` installs every package a test imports (a new venv has nothing else)."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
CI_RUN = (ROOT / ".ci" / "run").read_text(encoding="utf-8")


def _readme_commands() -> list[str]:
    quick_start = README.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```sh\n(.+?)\n```", quick_start)


def test_readme_quick_start_has_the_two_commands() -> None:
    assert _readme_commands() == [
        "pip install . && poolgate scan fixtures/demo",
        "pip install -e '.[dev]' && ruff check . && mypy && python -m pytest",
    ]


def test_ci_runs_the_readme_commands_in_a_fresh_venv() -> None:
    install, test = _readme_commands()
    lines = [line.strip() for line in CI_RUN.splitlines() if not line.lstrip().startswith("#")]
    assert test in lines
    # The quick start runs as its two halves, so that its exit code 1 can be told
    # from a failed install.
    assert install.split(" && ")[0] in lines
    assert any(line.startswith(install.split(" && ")[1]) for line in lines)
    assert any(line.startswith("python3 -m venv ") for line in lines)
    assert "--system-site-packages" not in CI_RUN
    assert "export CI=true" in lines


def _declared() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    requirements = project["dependencies"] + project["optional-dependencies"]["dev"]
    return {_normalise(re.split(r"[<>=!~;\[ ]", r, maxsplit=1)[0]) for r in requirements}


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _imported_top_levels() -> set[str]:
    names: set[str] = set()
    for path in (ROOT / "tests").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
    return names


def test_dev_extra_installs_every_package_the_tests_import() -> None:
    local = {p.stem for p in (ROOT / "tests").rglob("*.py")} | {
        p.name for p in (ROOT / "tests").rglob("*") if p.is_dir()
    }
    local |= {"scanner", "benchmarks", "tests"}
    third_party = _imported_top_levels() - set(sys.stdlib_module_names) - local
    distributions = packages_distributions()
    declared = _declared()
    missing = {
        name: distributions.get(name, ["(not installed)"])
        for name in third_party
        if not declared & {_normalise(d) for d in distributions.get(name, [])}
    }
    assert not missing, f"imported by tests but not in [dev] or the dependencies: {missing}"
