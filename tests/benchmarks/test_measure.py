"""The runner's all-process memory (benchmarks/measure.py, ``peak_tree_pss``): what a
command that starts a second process holds in all."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from benchmarks.measure import peak_tree_pss

_PARENT_AND_CHILD = """
import os, time
held = bytearray(60 * 2**20)           # 60 MiB written here
pid = os.fork()
if pid == 0:
    mine = bytearray(100 * 2**20)      # 100 MiB written in the child only
    time.sleep(1.5)
    os._exit(0)
os.waitpid(pid, 0)
"""


@pytest.mark.skipif(not Path("/proc/self/smaps_rollup").exists(), reason="Linux /proc")
def test_the_child_a_command_starts_counts_too(tmp_path: Path) -> None:
    peak = peak_tree_pss([sys.executable, "-c", _PARENT_AND_CHILD], cwd=tmp_path, timeout=60)
    assert peak is not None
    # The parent's 60 MiB are shared with the child (counted once between them), the
    # child's 100 MiB are its own: about 160 MiB plus two interpreters.
    assert 150 * 2**20 < peak < 260 * 2**20


@pytest.mark.skipif(not Path("/proc/self/smaps_rollup").exists(), reason="Linux /proc")
def test_a_command_past_its_timeout_is_killed(tmp_path: Path) -> None:
    code = "import time; time.sleep(60)"
    assert peak_tree_pss([sys.executable, "-c", code], cwd=tmp_path, timeout=0.5) is not None


def test_no_proc_no_figure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Path, "exists", lambda self: False)
    assert peak_tree_pss([sys.executable, "-c", "pass"], cwd=tmp_path, timeout=5) is None
