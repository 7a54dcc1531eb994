"""The wheel ships the bundled rules and finds them at run time, away from any checkout."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "--no-build-isolation",
         "--quiet", "--wheel-dir", str(out)],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    [built] = out.glob("poolgate-*.whl")
    return built


def test_wheel_contains_rules_schemas_assets_and_console_script(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    rules = {Path(rule).name for rule in (ROOT / "rules").glob("*.yaml")}
    shipped = {Path(n).name for n in names if n.startswith("scanner/bundled_rules/")}
    assert rules and rules == shipped
    assert "scanner/schemas/rule.schema.json" in names
    assert "scanner/reporters/report.js" in names  # the HTML report's script
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    assert "poolgate = scanner.cli:main" in zipfile.ZipFile(wheel).read(entry_points).decode()


def test_installed_wheel_finds_its_rules_outside_a_checkout(wheel: Path, tmp_path: Path) -> None:
    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target),
         str(wheel)],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(target)}
    workdir = tmp_path / "elsewhere"
    workdir.mkdir()
    located = subprocess.run(
        [sys.executable, "-c", "import scanner.ruleset.load as r; print(r.bundled_rules_dir())"],
        cwd=workdir, env=env, capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    assert Path(located.stdout.strip()).is_relative_to(target)
    listing = subprocess.run(
        [sys.executable, "-m", "scanner", "rules", "list"],
        cwd=workdir, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert listing.returncode == 0, listing.stderr
    assert "PG301" in listing.stdout
    # The HTML report reads its script from the package: a page written by the
    # installed wheel carries it.
    manifest = workdir / "pod.yaml"
    manifest.write_text("apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n")
    page = workdir / "report.html"
    written = subprocess.run(
        [sys.executable, "-m", "scanner", "scan", str(manifest), "--format", "html", "-o", str(page)],
        cwd=workdir, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert written.returncode in (0, 1), written.stderr
    assert 'getElementById("filters")' in page.read_text(encoding="utf-8")
    # The admission export reads the policy parts it adds to every rule from the package.
    exported = subprocess.run(
        [sys.executable, "-m", "scanner", "admission", "export"],
        cwd=workdir, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert exported.returncode == 0, exported.stderr
    assert "name: pod-template-changed" in exported.stdout
