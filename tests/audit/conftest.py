"""Fixtures for the audit tests: a PKI per session, the test API server, the CLI."""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cli_run
import pytest
import yaml

from .apiserver import ApiServer, Pki, make_pki, write_kubeconfig

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
TOKEN = "poolgate-test-token-0123456789"
CONTEXT = "admin@gpu-lab"


def objects(directory: str) -> list[dict[str, Any]]:
    """The fixture objects of ``tests/audit/<directory>``."""
    found: list[dict[str, Any]] = []
    for path in sorted((HERE / directory).glob("*.yaml")):
        found.extend(doc for doc in yaml.safe_load_all(path.read_text()) if doc)
    return found


@pytest.fixture(scope="session")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture
def lab(pki: Pki) -> Iterator[ApiServer]:
    with ApiServer(objects("lab"), pki, TOKEN) as server:
        yield server


@pytest.fixture
def kubeconfig(lab: ApiServer, pki: Pki, tmp_path: Path) -> Path:
    return write_kubeconfig(tmp_path / "kubeconfig", lab.url, pki.ca, CONTEXT, token=TOKEN)


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str


def cli(*args: str, env: dict[str, str] | None = None) -> Result:
    """``poolgate`` in this process (the same code path, without paying for an
    interpreter and the ``kubernetes`` import on every call). ``env`` is added to a
    clean environment: no KUBECONFIG, no in-cluster service, no ~/.kube/config."""
    import contextlib
    import io

    from scanner.cli import run

    saved = dict(os.environ)
    out, err = io.StringIO(), io.StringIO()
    try:
        for key in (
            "GITHUB_ACTIONS",
            "NO_COLOR",
            "FORCE_COLOR",
            "KUBECONFIG",
            "KUBERNETES_SERVICE_HOST",
        ):
            os.environ.pop(key, None)
        # A home without ~/.kube/config, outside the repository (caches land there).
        os.environ["HOME"] = str(Path(tempfile.gettempdir()) / "poolgate-tests-no-home")
        os.environ.update(env or {})
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = run(list(args))
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return Result(code, out.getvalue(), err.getvalue())


def poolgate(
    *args: str, cwd: Path = ROOT, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """``poolgate`` as a user runs it: a subprocess, no KUBECONFIG from the environment."""
    return cli_run.poolgate(
        *args,
        cwd=cwd,
        timeout=timeout,
        drop=("KUBECONFIG", "KUBERNETES_SERVICE_HOST"),
        env={"HOME": str(cwd)},  # no ~/.kube/config of the machine running the tests
    )
