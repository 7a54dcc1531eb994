"""Progress on stderr, for people watching a long run: ``audit`` lists a cluster kind by
kind, ``scan`` reads, renders and evaluates. Never on standard output, never in a
report: a machine reading the output sees none of it.

On a terminal a live line is redrawn in place (``page``, ``step``) and each finished
part leaves a line (``done``); elsewhere (``--progress`` into a log) only the finished
parts are written. With a ``delay`` nothing is written until the run has taken that
long: a scan that ends within it prints nothing, and one that goes on shows where it
is (a timer reveals the current line, with the parts finished before it).

The only control sequences written are its own (erase the line); labels and
outcomes, which quote file names and API servers, are escaped (``errors.printable``).
"""

from __future__ import annotations

import sys
import threading
from typing import TextIO

from scanner.errors import printable

_ERASE = "\r\x1b[K"


class ProgressPrinter:
    """Progress lines on ``stream``: a live line on a terminal (``live``), one line per
    finished part either way, shown once ``delay`` seconds have passed."""

    def __init__(self, stream: TextIO, live: bool, *, delay: float = 0.0) -> None:
        self._stream = stream
        self._live = live
        self._lock = threading.Lock()
        self._held: list[str] = []
        """Lines of parts finished before the delay passed."""
        self._current = ""
        """The live line, to show when the delay passes."""
        self._shown = delay <= 0
        self._closed = False
        self._timer: threading.Timer | None = None
        if not self._shown:
            self._timer = threading.Timer(delay, self._reveal)
            self._timer.daemon = True  # never keeps a finished run alive
            self._timer.start()

    def page(self, label: str, count: int, verb: str = "listing") -> None:
        """A live counter: ``listing pods ... 1,500``."""
        self._live_line(f"  {verb} {printable(label)} ... {count:,}")

    def step(self, label: str) -> None:
        """A part begins: ``evaluating 38 rules ...`` on the live line."""
        self._live_line(f"  {printable(label)} ...")

    def done(self, label: str, outcome: str) -> None:
        """A part has finished: ``label: outcome`` stays."""
        line = f"  {printable(label)}: {printable(outcome)}\n"
        with self._lock:
            self._current = ""
            if self._closed:
                return
            if self._shown:
                self._write((_ERASE if self._live else "") + line)
            else:
                self._held.append(line)

    def close(self) -> None:
        """The run is over: no line appears later, and the live line is erased."""
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
            if self._shown and self._live and self._current:
                self._write(_ERASE)
            self._closed, self._current, self._held = True, "", []

    def _live_line(self, text: str) -> None:
        if not self._live:
            return
        with self._lock:
            self._current = text
            if self._shown and not self._closed:
                self._write(_ERASE + text)

    def _reveal(self) -> None:
        """The delay has passed: what finished so far, then the live line."""
        with self._lock:
            if self._shown or self._closed:
                return
            self._shown = True
            self._write("".join(self._held) + (self._current if self._live else ""))
            self._held = []

    def _write(self, text: str) -> None:
        try:
            self._stream.write(text)
            self._stream.flush()
        except (OSError, ValueError):  # the terminal went away: progress is not worth failing
            pass


def stderr_progress(requested: bool, delay: float = 0.0) -> ProgressPrinter | None:
    """Progress on stderr when ``--progress`` asks for it (shown at once, terminal or
    not), or on a terminal without it (after ``delay`` seconds); else none."""
    stream = sys.stderr
    try:
        live = stream is not None and stream.isatty()
    except ValueError:
        live = False
    if requested:
        return ProgressPrinter(stream, live)
    return ProgressPrinter(stream, live, delay=delay) if live else None
