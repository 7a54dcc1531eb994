"""One exception family. Each error says what went wrong and what to do about it.

``scanner.cli`` is the only place that maps these to exit codes.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Final

# C0 and C1 controls, DEL, the line and paragraph separators, the bidi controls that
# can reorder text (overrides, isolates, marks) and the invisible characters that can
# make two names look alike (zero-width space and joiners, word joiner, BOM).
_UNSAFE: Final = re.compile(
    "[\x00-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060\u2066-\u2069\ufeff]"
)


_COMMAND_START: Final = re.compile(r"^(\s*):(?=:)")
"""A line a GitHub Actions runner reads as a workflow command: ``::`` after spaces."""


def printable(text: str, *, line_start: bool = False) -> str:
    """``text`` with control characters, line breaks and invisible or reordering
    characters escaped (``\\n``, ``\\x1b``). Problems quote keys, values and paths
    from files a pull request wrote: a line break there must not start a line of
    poolgate's own output, where a CI runner reads ``::error ...`` as a command
    (GitHub Actions does, on stdout and stderr). Reports for people escape the same
    way (``scanner.reporters.text.safe``). Where ``text`` begins a line
    (``line_start``), a leading ``::`` is written ``\\x3a:`` for the same reason."""
    escaped = _UNSAFE.sub(
        lambda match: match.group().encode("unicode_escape").decode("ascii"), text
    )
    return _COMMAND_START.sub(r"\1\\x3a", escaped) if line_start else escaped


def printable_lines(text: str) -> str:
    """``text`` escaped as ``printable`` escapes a line, except that its line breaks
    (``\\n``) stay: for text of several lines, such as a rule's description, and for
    all that poolgate prints on its own account (``scanner.console``)."""
    return "\n".join(printable(line, line_start=True) for line in text.split("\n"))


class PoolgateError(Exception):
    """Base of every error poolgate reports to the user (never with a traceback)."""

    exit_code = 2

    def __init__(self, message: str, hint: str = "", *, lines: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.lines = tuple(lines)
        """One problem each, shown indented under ``message`` (a rule pack's problems)."""

    def __str__(self) -> str:
        return self._text(str)

    def display(self) -> str:
        """What the error boundary prints: message, problems and hint each escaped
        (``printable``), so text quoted from a file or a server cannot start a line."""
        return self._text(printable)

    def _text(self, escape: Callable[[str], str]) -> str:
        text = escape(self.message) + "".join(f"\n  {printable(line)}" for line in self.lines)
        return f"{text} ({escape(self.hint)})" if self.hint else text


class UsageError(PoolgateError):
    """A bad option, a path that does not exist, an output pairing that makes no sense."""


class ConfigError(PoolgateError):
    """The configuration file is invalid."""


class RuleLoadError(PoolgateError):
    """One or more rule files are invalid; ``problems`` lists every one of them."""

    def __init__(self, problems: list[str]) -> None:
        count = len(problems)
        noun = "problem" if count == 1 else "problems"
        super().__init__(f"{count} rule {noun}:", lines=problems)
        self.problems = problems


class OutputError(PoolgateError):
    """An output file cannot be written."""


class CelError(PoolgateError):
    """A CEL expression does not compile or does not have the expected result type."""

    def __init__(self, message: str, line: int = 0, column: int = 0) -> None:
        super().__init__(message)
        self.line = line
        self.column = column


class CelEvalError(Exception):
    """A CEL expression failed on one subject. Becomes a finding with outcome ``error``."""
