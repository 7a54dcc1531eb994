"""What poolgate prints on its own account, apart from reports: command output (the
rule catalog, fixture results), notes, warnings and errors; progress (``ProgressPrinter``);
and whether anything printed for people is in colour (``--color``, ``NO_COLOR``,
``FORCE_COLOR``).

Everything goes through ``echo``, which escapes it as findings are escaped
(``errors.printable``): rule text from a pull request's rule directory, messages of
an API server, names of files. Line breaks of poolgate's own are kept; ``note``,
``warn`` and ``error`` take one line and escape line breaks too, so nothing quoted
in them can start a line of its own (``::error ...`` is a command to a CI runner).
Reporters escape what they write themselves (``scanner.reporters.text.safe``).
Colour is added after escaping, so the only control sequences printed are these
styles' own.

Progress goes to stderr, for people watching a long run: ``audit`` lists a cluster
kind by kind, ``scan`` reads, renders and evaluates; never to standard output, never
into a report. On a terminal a live line is redrawn in place (``page``, ``step``) and
each finished part leaves a line (``done``); elsewhere (``--progress`` into a log)
only the finished parts are written. With a ``delay`` nothing is written until the
run has taken that long: a scan that ends within it prints nothing, and one that
goes on shows where it is (a timer reveals the current line, with the parts finished
before it). Its only control sequence is its own (erase the line).
"""

from __future__ import annotations

import os
import sys
import threading
from typing import Final, TextIO

import click

from scanner.errors import printable, printable_lines

COLOR_CHOICES: Final = ("auto", "always", "never")

STYLES: Final = {
    "error": "\x1b[31m",  # red
    "warning": "\x1b[33m",  # yellow
    "note": "\x1b[36m",  # cyan
    "rule-error": "\x1b[35m",  # magenta
    "ok": "\x1b[32m",  # green
    "header": "\x1b[1m",  # bold
    "suppressed": "\x1b[2m",  # dim
    "help": "\x1b[2m",  # dim: where to read more about a finding's rule
}
RESET: Final = "\x1b[0m"

_choice = "auto"
"""The command's ``--color``; each command line sets it (``set_color``)."""


def set_color(choice: str) -> None:
    """``--color``: ``always`` and ``never`` win over the environment; ``auto`` asks it."""
    global _choice
    _choice = choice if choice in COLOR_CHOICES else "auto"


def color_on(stream: TextIO | None) -> bool:
    """Whether what goes to ``stream`` is in colour: ``--color always|never`` if given;
    else not when ``NO_COLOR`` is set to anything but the empty string (no-color.org,
    and it wins over ``FORCE_COLOR``); else when ``FORCE_COLOR`` is (force-color.org),
    terminal or not; else on a terminal."""
    if _choice != "auto":
        return _choice == "always"
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    try:
        return stream is not None and stream.isatty()
    except ValueError:  # closed
        return False


def paint(style: str, text: str, enabled: bool) -> str:
    """``text`` (already escaped) in ``style`` when ``enabled``."""
    return f"{STYLES[style]}{text}{RESET}" if enabled else text


def echo(text: str, *, err: bool = False, nl: bool = True, style: str | None = None) -> None:
    """``text`` on standard output (or error), every line escaped, in ``style`` when
    colour is on for that stream."""
    shown = printable_lines(text)
    colored = style is not None and color_on(sys.stderr if err else sys.stdout)
    if colored and style is not None:
        shown = "\n".join(paint(style, line, bool(line)) for line in shown.split("\n"))
    click.echo(shown, err=err, nl=nl, color=colored)  # click strips colour off a terminal


def note(message: str) -> None:
    echo(f"poolgate: {printable(message)}", err=True)


def warn(message: str) -> None:
    echo(f"poolgate: warning: {printable(message)}", err=True, style="warning")


def error(message: str) -> None:
    """An error line; ``message`` may hold lines already escaped (``PoolgateError.display``)."""
    echo(f"poolgate: error: {message}", err=True, style="error")


# -- progress -------------------------------------------------------------------------

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
            # Never keeps a finished run alive. It only writes (under the lock) once, when
            # the delay passes; a helper process forked meanwhile never prints progress.
            self._timer.daemon = True
            self._timer.start()

    def page(self, label: str, count: int) -> None:
        """A live counter: ``listing pods ... 1,500``."""
        self._live_line(f"  listing {printable(label)} ... {count:,}")

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
