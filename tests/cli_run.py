"""``poolgate`` run as a user runs it: ``python -m scanner`` in a subprocess.

One helper for every end-to-end test. This checkout's package runs whatever the
working directory (``PYTHONPATH``), and variables that change what poolgate prints
on a CI runner (``GITHUB_ACTIONS``, ``NO_COLOR``, ``FORCE_COLOR``) or how (``PYTHONUNBUFFERED``: a
user's standard output to a pipe is buffered, and poolgate must flush it before it
ends) are removed; a caller drops or sets more (the audit tests keep the machine's
kubeconfig out).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DROPPED = ("GITHUB_ACTIONS", "NO_COLOR", "FORCE_COLOR", "PYTHONUNBUFFERED")


def poolgate(
    *args: str,
    cwd: Path = ROOT,
    stdin: str | None = None,
    timeout: float = 120,
    drop: Iterable[str] = (),
    env: Mapping[str, str] | None = None,
    preexec: Callable[[], object] | None = None,
) -> subprocess.CompletedProcess[str]:
    removed = {*DROPPED, *drop}
    environment = {k: v for k, v in os.environ.items() if k not in removed}
    environment["PYTHONPATH"] = str(ROOT)
    environment.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "scanner", *args],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        env=environment,
        timeout=timeout,
        check=False,
        preexec_fn=preexec,
    )
