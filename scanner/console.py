"""What poolgate prints on its own account, apart from reports: command output (the
rule catalog, fixture results), notes, warnings and errors.

Everything goes through ``echo``, which escapes it as findings are escaped
(``errors.printable``): rule text from a pull request's rule directory, messages of
an API server, names of files. Line breaks of poolgate's own are kept; ``note``,
``warn`` and ``error`` take one line and escape line breaks too, so nothing quoted
in them can start a line of its own (``::error ...`` is a command to a CI runner).
Reporters escape what they write themselves (``scanner.reporters.text.safe``).
"""

from __future__ import annotations

import click

from scanner.errors import printable, printable_lines


def echo(text: str, *, err: bool = False, nl: bool = True) -> None:
    """``text`` on standard output (or error), every line escaped."""
    click.echo(printable_lines(text), err=err, nl=nl)


def note(message: str) -> None:
    echo(f"poolgate: {printable(message)}", err=True)


def warn(message: str) -> None:
    echo(f"poolgate: warning: {printable(message)}", err=True)


def error(message: str) -> None:
    """An error line; ``message`` may hold lines already escaped (``PoolgateError.display``)."""
    echo(f"poolgate: error: {message}", err=True)
