"""Two parts of a job on two cores: one in a forked child, one here.

A scan is CPU-bound Python; the second core of a CI runner or a laptop is idle. A
forked child shares everything already built (rules, compiled programs, the model)
without pickling it, computes its part (the second part of the files to load, every
other chunk of subjects to evaluate) and sends only the result back, pickled
through a pipe. Only while this process is small (``FORK_BELOW``): the child's
copied pages are memory too. Anything that goes wrong on that path (no ``fork`` on the platform,
a child that crashes or raises, a result that does not pickle) only costs time: the
child's part is then computed here, so the answer never depends on whether the
child worked. ``POOLGATE_JOBS=1`` keeps everything in one process.
"""

from __future__ import annotations

import os
import pickle
import sys
from collections.abc import Callable
from contextlib import suppress
from typing import Final, TypeVar

T = TypeVar("T")

_FAILED: Final = b""


def cpus() -> int:
    """CPUs this process may use (``POOLGATE_JOBS`` overrides)."""
    configured = os.environ.get("POOLGATE_JOBS", "")
    if configured.isdigit() and int(configured) > 0:
        return int(configured)
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


FORK_BELOW: Final = 1024 * 1024 * 1024
"""No second process once this one holds this much memory. The child shares every
page at first, but each object it reads gets its page copied (reference counts are
written), so a child evaluating half of a 100,000-pod audit added ~0.7 GiB to a
1.4 GiB process: over the 2 GB budget, for 15% of the time."""


def available() -> bool:
    """Whether a second process is worth starting: fork (Linux), a second CPU, and
    this process still under ``FORK_BELOW``."""
    return sys.platform == "linux" and cpus() >= 2 and resident_bytes() < FORK_BELOW


def resident_bytes() -> int:
    """This process's resident memory now (0 where /proc does not say)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def in_two(here: Callable[[], T], there: Callable[[], T]) -> tuple[T, T]:
    """``(here(), there())``, with ``there`` run in a forked child when possible."""
    if not available():
        return here(), there()
    import multiprocessing

    context = multiprocessing.get_context("fork")
    receive, send = context.Pipe(duplex=False)

    def child() -> None:
        try:
            payload = pickle.dumps(there(), protocol=pickle.HIGHEST_PROTOCOL)
        except BaseException:  # any failure: the parent computes it again
            payload = _FAILED
        send.send_bytes(payload)
        send.close()

    for stream in (sys.stdout, sys.stderr):  # the child must not write a copy of them
        with suppress(OSError, ValueError, AttributeError):  # closed, or None
            stream.flush()
    process = context.Process(target=child, daemon=True)
    try:
        process.start()
    except OSError:
        receive.close()
        send.close()
        return here(), there()
    send.close()
    try:
        mine = here()
    except BaseException:
        process.terminate()  # it may be blocked sending to a reader that is gone
        process.join()
        receive.close()
        raise
    try:
        payload = receive.recv_bytes()
    except (EOFError, OSError):
        payload = _FAILED  # the child died before it could answer
    finally:
        receive.close()
        process.join()
    if payload == _FAILED:
        return mine, there()
    try:
        theirs: T = pickle.loads(payload)
    except (pickle.UnpicklingError, EOFError, AttributeError, ImportError, ValueError):
        return mine, there()
    return mine, theirs
