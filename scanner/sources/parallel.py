"""Loading a large tree of manifests on two cores.

Composing YAML with positions is most of a big scan (libyaml's compose alone is the
budget's baseline, DESIGN.md), and it is per file. With more than one CPU and enough
to read, a forked child parses the second part of the file list while this process
parses the first; the child sends its objects back pickled (plain dicts, line maps,
read errors, notes) and they join the inventory after this process's own, so the
order, and every finding, is exactly what a one-process load gives.

The split is by bytes, the child taking a little less (it also pickles what it
parsed). The fork and its fallbacks are ``scanner.forking``'s: anything that goes
wrong in the child only costs the time, and ``POOLGATE_JOBS=1`` turns it off.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import suppress
from pathlib import Path
from typing import Final

from scanner import forking
from scanner.inventory import Inventory

MIN_FILES: Final = 32
MIN_BYTES: Final = 1 * 1024 * 1024
"""Below these a second process costs more (fork, pickling) than it saves."""

CHILD_SHARE: Final = 0.45
"""The child's share of the bytes: it also pickles its objects (~0.2 of parsing)."""


def worth_it(files: Sequence[tuple[Path, str]]) -> bool:
    """Whether ``files`` are enough work for two processes on this machine."""
    if len(files) < MIN_FILES or not forking.available():
        return False
    return _sizes(files)[-1] >= MIN_BYTES


def load(files: Sequence[tuple[Path, str]], max_file_size: int) -> Inventory:
    """``files`` loaded on two processes, in order (see the module docstring)."""
    from scanner.sources.files import load_files

    sizes = _sizes(files)
    split = next(
        (index for index, total in enumerate(sizes) if total >= sizes[-1] * (1 - CHILD_SHARE)),
        len(files),
    )
    mine, theirs = list(files[:split]), list(files[split:])
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
