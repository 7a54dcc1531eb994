"""Loading a large tree of manifests on two cores.

Composing YAML with positions is most of a big scan (libyaml's compose alone is the
budget's baseline, docs/performance.md), and it is per file. With more than one CPU and enough
to read, a forked child parses the second part of the file list while this process
parses the first; the child sends its objects back pickled (plain dicts, line maps,
read errors, notes) and they join the inventory after this process's own, so the
order, and every finding, is exactly what a one-process load gives.

The split is by bytes, the child taking a little less (it also pickles what it
parsed). The fork and its fallbacks are ``scanner.runtime.executors``'s: anything that goes
wrong in the child only costs the time, and ``POOLGATE_JOBS=1`` turns it off.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import suppress
from pathlib import Path
from typing import Final

from scanner.inventory import Inventory
from scanner.runtime import executors as forking

MIN_FILES: Final = 32
MIN_BYTES: Final = 1 * 1024 * 1024
"""Below these a second process costs more (fork, pickling) than it saves."""

CHILD_SHARE: Final = 0.45
"""The child's share of the bytes: it also pickles its objects (~0.2 of parsing)."""


def split(files: Sequence[tuple[Path, str]]) -> int | None:
    """Where the child's part of ``files`` starts, or None when they are not enough
    work for two processes on this machine."""
    if len(files) < MIN_FILES or not forking.available():
        return None
    sizes = _sizes(files)
    if sizes[-1] < MIN_BYTES:
        return None
    share = sizes[-1] * (1 - CHILD_SHARE)
    return next((index for index, total in enumerate(sizes) if total >= share), len(files))


def load(files: Sequence[tuple[Path, str]], at: int, max_file_size: int) -> Inventory:
    """``files`` loaded on two processes, the child's part from ``at``, in order."""
    from scanner.sources.files import load_files

    mine, theirs = list(files[:at]), list(files[at:])
    inventory, other = forking.in_two(
        lambda: load_files(mine, max_file_size), lambda: load_files(theirs, max_file_size)
    )
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
