"""What the ``poolgate`` process holds until it ends, instead of freeing it bit by bit.

A large audit holds millions of small objects: a cluster's objects, the model's
facts, the findings. Freeing them as each stage's function returns, and then the
interpreter's own teardown, took a noticeable share of a large audit, all to hand memory
back to a process about to end. Under the console script (``scanner.cli.main``)
the stages give what they are done with to ``keep``, and the process ends with
``end``: output flushed, then ``os._exit``, which frees nothing. Library callers
(``scanner.cli.run``, the tests) never turn keeping on, so their objects are freed
as usual and nothing outlives a call.

Nothing here may hold a resource that must be released at exit: reports are
written and closed by ``scanner.reporters.output`` before the command returns, and a helper
process is closed by the command that started it.
"""

from __future__ import annotations

import os
import sys
from contextlib import suppress
from typing import NoReturn

_kept: list[object] = []
_keeping = False


def keep_until_exit() -> None:
    """From now on ``keep`` holds what it is given until the process ends."""
    global _keeping
    _keeping = True


def keep(*objects: object) -> None:
    """Hold ``objects`` to the end of the process when ``keep_until_exit`` was called
    (the console script); otherwise do nothing, and they are freed as usual."""
    if _keeping:
        _kept.extend(objects)


def kept() -> int:
    """How many objects are held (tests)."""
    return len(_kept)


def end(code: int) -> NoReturn:
    """Flush standard output and error, then end the process with ``code`` without
    freeing anything. A stream that cannot be flushed (its reader went away) loses
    only what was still buffered, as it would at a normal exit, and the code stands."""
    flush_output()
    os._exit(code)


def flush_output() -> None:
    """Write what standard output and error hold (before ``end``, and before a fork,
    whose child must not write a copy of it: scanner/runtime/executors.py). A closed pipe, a
    closed stream or none at all (``>&-``): nothing more can be said there."""
    for stream in (sys.stdout, sys.stderr):
        with suppress(OSError, ValueError, AttributeError):
            stream.flush()
