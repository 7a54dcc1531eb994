"""Headless Chromium for the tests that open the HTML report in a real browser.

The driver is ``benchmarks.browser`` (the DevTools protocol on a pipe), shared with
the benchmark that times a large report. A test asks ``browser()`` for a Chromium:
on a user's plain clone without one it skips, saying how to install it; under
``CI=true`` (``.ci/run`` installs Debian's ``chromium``) a missing browser fails the
test (``tool_check``). Screenshots are kept under ``artifacts(tmp_path)``:
``$POOLGATE_TEST_ARTIFACTS`` when set, else the test's temporary directory; the test
prints where.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tool_check import tool_missing

from benchmarks.browser import Browser, find_chromium


@contextmanager
def browser(width: int = 1400) -> Iterator[Browser]:
    executable = find_chromium()
    if executable is None:
        tool_missing(
            "Chromium not found: install Debian's chromium package "
            "(apt-get install chromium) or set POOLGATE_CHROMIUM"
        )
    with Browser(executable, width=width, timeout=120) as opened:
        yield opened


def artifacts(tmp_path: Path, name: str) -> Path:
    """Where a test keeps what it made for people to look at (screenshots)."""
    chosen = os.environ.get("POOLGATE_TEST_ARTIFACTS")
    directory = Path(chosen) / name if chosen else tmp_path / "artifacts"
    directory.mkdir(parents=True, exist_ok=True)
    print(f"artifacts: {directory}")
    return directory
