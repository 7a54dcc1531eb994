"""What poolgate prints on its own account, apart from reports: command output (the
rule catalog, fixture results), notes, warnings and errors; and whether anything
printed for people is in colour (``--color``, ``NO_COLOR``, ``FORCE_COLOR``).

Everything goes through ``echo``, which escapes it as findings are escaped
(``errors.printable``): rule text from a pull request's rule directory, messages of
an API server, names of files. Line breaks of poolgate's own are kept; ``note``,
``warn`` and ``error`` take one line and escape line breaks too, so nothing quoted
in them can start a line of its own (``::error ...`` is a command to a CI runner).
Reporters escape what they write themselves (``scanner.reporters.text.safe``).
Colour is added after escaping, so the only control sequences printed are these
styles' own.
"""

from __future__ import annotations

import os
import sys
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
