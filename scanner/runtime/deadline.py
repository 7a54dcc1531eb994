"""The audit's ``--deadline``: one moment that bounds the whole run.

The nightly audit runs as a Job with ``activeDeadlineSeconds``: a Job killed at its
deadline writes no report at all. So ``poolgate audit --deadline S`` bounds the whole
run, not only reading the cluster: reading stops at ``READING_SHARE`` of it (the
rules then run on what was read, ``scanner.sources.cluster``), and the evaluation
starts no subject once the deadline has passed (``scanner.evaluate.loop``), so the
report is written with what was evaluated by then, naming the rules that did not
finish. The clock is the monotonic one, which a forked helper process shares.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

READING_SHARE = 0.9
"""The part of an audit's deadline reading the cluster may take: the rest is left
for the rules, so that an API server that stops answering still gives findings on
what was read."""


@dataclass(frozen=True, slots=True)
class Deadline:
    """A moment on ``clock`` (seconds) past which a run starts no more work."""

    seconds: float
    """The deadline as given (``--deadline``), for messages."""
    ends: float
    clock: Callable[[], float] = time.monotonic

    @classmethod
    def after(cls, seconds: float, clock: Callable[[], float] = time.monotonic) -> Deadline:
        """The deadline ``seconds`` from now."""
        return cls(seconds, clock() + seconds, clock)

    def passed(self) -> bool:
        return self.clock() >= self.ends

    def left(self) -> float:
        """Seconds until the deadline (0 once it has passed)."""
        return max(0.0, self.ends - self.clock())
