"""Shared helpers for the integration tests: run poolgate as a user would, write fake tools."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
DIGEST = "a" * 64

PRIVILEGED = f"""\
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
          image: busybox@sha256:{DIGEST}
          securityContext:
            privileged: true
"""

CLEAN = PRIVILEGED.replace("privileged: true", "privileged: false")


def clean_env(**extra: str) -> dict[str, str]:
    """The environment a user's shell would have: no CI markers, plus ``extra``."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("GITHUB_ACTIONS", "NO_COLOR", "FORCE_COLOR")
    }
    env.update(extra)
    return env


def run_poolgate(
    *args: str, cwd: Path = ROOT, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m scanner ARGS`` in ``cwd`` (the checkout is importable from ROOT)."""
    environment = env if env is not None else clean_env()
    environment["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT), *filter(None, [environment.get("PYTHONPATH", "")])]
    )
    return subprocess.run(
        [sys.executable, "-m", "scanner", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=environment,
        timeout=300,
    )


def fake_tool(directory: Path, name: str, body: str) -> Path:
    """An executable ``directory/name`` running the Python ``body`` (sys, os, json imported)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(f"#!{sys.executable}\nimport json, os, sys\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def git(*args: str, cwd: Path) -> str:
    done = subprocess.run(
        [
            "git",
            "-c",
            "user.name=poolgate-test",
            "-c",
            "user.email=test@example.invalid",
            "-c",
            "commit.gpgsign=false",
            "-c",
            "init.defaultBranch=main",
            *args,
        ],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return done.stdout
