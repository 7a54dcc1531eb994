"""Loading a large tree of manifests on two cores.

Composing YAML with positions is most of a big scan (libyaml's compose alone is the
budget's baseline, DESIGN.md), and it is per file. With more than one CPU and enough
to read, a forked child parses the second part of the file list while this process
parses the first; the child sends its objects back pickled (plain dicts, line maps,
read errors, notes) and they join the inventory after this process's own, so the
order, and every finding, is exactly what a one-process load gives.

The split is by bytes, the child taking a little less (it also pickles what it
parsed). Anything that goes wrong in the child (an exception, a crash, a platform
without ``fork``) only costs the time: this process then loads the child's files
itself. ``POOLGATE_JOBS=1`` turns the second process off.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from contextlib import suppress
from pathlib import Path
from typing import Final

from scanner.inventory import Inventory

MIN_FILES: Final = 64
MIN_BYTES: Final = 4 * 1024 * 1024
"""Below these a second process costs more (fork, pickling) than it saves."""

CHILD_SHARE: Final = 0.45
"""The child's share of the bytes: it also pickles its objects (~0.2 of parsing)."""


def cpus() -> int:
    configured = os.environ.get("POOLGATE_JOBS", "")
    if configured.isdigit() and int(configured) > 0:
        return int(configured)
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def worth_it(files: Sequence[tuple[Path, str]]) -> bool:
    """Whether ``files`` are enough work for two processes on this machine."""
    if len(files) < MIN_FILES or cpus() < 2 or sys.platform != "linux":
        return False  # fork is the only start method that costs nothing to set up
    return _sizes(files)[-1] >= MIN_BYTES


def load(files: Sequence[tuple[Path, str]], max_file_size: int) -> Inventory:
    """``files`` loaded on two processes, in order (see the module docstring)."""
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool
    from multiprocessing import get_context
    from pickle import PicklingError

    from scanner.sources.files import load_files

    sizes = _sizes(files)
    split = next(
        (index for index, total in enumerate(sizes) if total >= sizes[-1] * (1 - CHILD_SHARE)),
        len(files),
    )
    mine, theirs = list(files[:split]), list(files[split:])
    inventory: Inventory | None = None
    other: Inventory | None = None
    try:
        with ProcessPoolExecutor(max_workers=1, mp_context=get_context("fork")) as pool:
            pending = pool.submit(load_files, theirs, max_file_size)
            inventory = load_files(mine, max_file_size)
            try:
                other = pending.result()
            except Exception:  # whatever failed in the child: its files are loaded here
                other = None
    except (BrokenProcessPool, OSError, PicklingError, RuntimeError, ValueError):
        other = None  # the pool could not start or stop: load here what it did not
    if inventory is None:
        inventory = load_files(mine, max_file_size)
    if other is None:
        other = load_files(theirs, max_file_size)
    inventory.extend(other)
    return inventory


def _sizes(files: Sequence[tuple[Path, str]]) -> list[int]:
    """Running totals of the files' sizes (0 for a file that cannot be stat'ed)."""
    totals: list[int] = []
    running = 0
    for path, _ in files:
        with suppress(OSError):
            running += path.stat().st_size
        totals.append(running)
    return totals or [0]
