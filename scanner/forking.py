"""Two halves of a job on two cores: one in a forked child, one here.

A scan is CPU-bound Python; the second core of a CI runner or a laptop is idle. A
forked child shares everything already built (rules, compiled programs, the model)
without pickling it, computes its half and sends only the result back, pickled
through a pipe. Anything that goes wrong on that path (no ``fork`` on the platform,
a child that crashes or raises, a result that does not pickle) only costs time: the
child's half is then computed here, so the answer never depends on whether the
child worked. ``POOLGATE_JOBS=1`` keeps everything in one process.
"""

from __future__ import annotations

import os
import pickle
import sys
from collections.abc import Callable
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


def available() -> bool:
    """Whether a second process is worth starting: fork (Linux), and a second CPU."""
    return sys.platform == "linux" and cpus() >= 2


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

    sys.stdout.flush()  # the child must not write a copy of unflushed output
    sys.stderr.flush()
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
