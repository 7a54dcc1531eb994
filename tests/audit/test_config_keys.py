"""A misspelt key in the config of ``audit`` and ``snapshot`` (issue 25): the run
goes on without the key, but it did not use the config that was meant (exit 3), and
the error names the key it most likely misspells."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .conftest import cli

MISSPELT = (
    "apiVersion: poolgate.io/v1alpha1\nkind: GpuPoolGate\nspec:\n  operatorNamespace: [gpu]\n"
)
HINT = "unknown key spec.operatorNamespace (the run went on without it); did you mean operatorNamespaces?"


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "poolgate.yaml"
    path.write_text(MISSPELT)
    return path


def test_snapshot_with_a_misspelt_key_is_incomplete(kubeconfig: Path, config: Path) -> None:
    out = config.parent / "snap.json"
    args = ("snapshot", "--kubeconfig", str(kubeconfig), "--config", str(config), "-o", str(out))
    result = cli(*args)
    assert result.returncode == 3, result.stderr
    assert f"poolgate: error: {config}:4: {HINT}\n" in result.stderr
    assert json.loads(out.read_text())["items"]  # the snapshot is written all the same


def test_live_audit_with_a_misspelt_key_is_incomplete(kubeconfig: Path, config: Path) -> None:
    args = (
        "audit",
        "--kubeconfig",
        str(kubeconfig),
        "--config",
        str(config),
        "--format",
        "json",
        "--fail-on",
        "never",
    )
    result = cli(*args)
    assert result.returncode == 3, result.stderr
    errors = [n for n in json.loads(result.stdout)["notifications"] if n["level"] == "error"]
    assert [(n["line"], n["message"]) for n in errors] == [(4, HINT)]
