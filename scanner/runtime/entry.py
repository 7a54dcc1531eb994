"""How the ``poolgate`` console script runs its one command: the process-wide
workarounds, fenced here so that the command line itself holds none.

The cyclic garbage collector stays off: one process runs one command, whose
objects (inventory, model, findings) live to its end. The loaders and the
evaluation pause it anyway (``collector_paused``); re-enabling it between them
made the first collections after the evaluation traverse the whole model (the
young generation, then the middle one) while the reports were written. What the
stages are done with is held, not freed (``teardown.keep``), and the process ends
without the interpreter's teardown once its output is flushed
(``scanner.runtime.teardown``): freeing it all only gave memory back to a process
about to end.

Library callers (``scanner.cli.run``, the tests) never come through here: they keep
the collector as they set it, and their objects are freed as usual.
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from typing import NoReturn

from scanner.runtime import teardown


def run_once(command: Callable[[], int]) -> NoReturn:
    """Run ``command`` as the process's only work, then end the process with the exit
    code it returns."""
    gc.disable()
    teardown.keep_until_exit()
    teardown.end(command())
