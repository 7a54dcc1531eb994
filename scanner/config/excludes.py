"""Exclude patterns (``--exclude``, ``spec.exclude``): gitignore-style globs over paths
relative to the repository root, matched in one pass without backtracking.

A pattern reads as a line of a ``.gitignore`` at the repository root:

* ``*`` any run of characters but ``/``; ``?`` one character but ``/``; ``[a-z]``,
  ``[!a-z]`` (or ``[^a-z]``) one character of a set; ``\\`` makes the next character
  literal;
* ``**`` as a whole path component: ``**/x`` is ``x`` in any directory, ``a/**/b``
  is ``b`` zero or more directories below ``a``, ``a/**`` everything inside ``a``
  (elsewhere ``**`` is a ``*``);
* a pattern with no ``/`` but a trailing one (``*.tmpl.yaml``, ``fixtures/``) matches
  a name in any directory; any other is anchored at the repository root (a leading
  ``/`` only says so);
* a trailing ``/`` matches directories only;
* a pattern that matches a directory matches everything below it.

Negation (``!pattern``) is refused rather than ignored: a pattern that seems to
re-include files must not silently leave them out.

A pattern may come from the pull request under scan (a ``.poolgate.yaml`` read from
the work tree), so it is never made into a regular expression: it is compiled into a
Shift-And automaton (the technique of ``scanner.model.wildcards``, which this layer
cannot import) that reads a path once, with the set of pattern positions reached as
the bits of an integer. A run costs ``len(path)`` steps of a few integer operations
on ``len(pattern)`` bits; patterns are at most ``MAX_PATTERN_LENGTH`` characters and
a run uses at most ``MAX_PATTERNS`` of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Final

MAX_PATTERN_LENGTH: Final = 1024
"""The longest pattern: real ones are a few path components."""
MAX_PATTERNS: Final = 256
"""The most patterns a run uses (config and command line together): each file is
matched against each of them."""

_SLASH: Final = "/"


class PatternError(ValueError):
    """A pattern that cannot be used, with the reason as its message."""


@dataclass(frozen=True, slots=True)
class _Set:
    """``[...]``: the ranges it holds, and whether it is negated."""

    ranges: tuple[tuple[str, str], ...]
    negated: bool

    def accepts(self, char: str) -> bool:
        if char == _SLASH:
            return False
        inside = any(low <= char <= high for low, high in self.ranges)
        return inside != self.negated


@dataclass(frozen=True, slots=True)
class PathGlob:
    """One compiled pattern.

    Bit ``i`` of a state: the path read so far matches the first ``i`` tokens. Tokens
    are a literal character (``chars``), one character but ``/`` (``one``), a set
    (``sets``), a run of characters but ``/`` (``stars``, may be empty), a run of any
    characters (``anything``, may be empty), and ``**/`` (``directories``: zero or more
    whole directories, so it is passed over at the start or right after a ``/``).
    """

    pattern: str
    size: int
    chars: dict[str, int]
    one: int
    sets: tuple[tuple[int, _Set], ...]
    stars: int
    anything: int
    directories: int
    directory_only: bool

    def matches(self, path: str, is_dir: bool = False) -> bool:
        """Whether ``path`` (``a/b/c.yaml``, relative to the repository root, no leading
        or trailing ``/``) or a directory above it matches. ``is_dir``: ``path`` is a
        directory (a pattern ending in ``/`` matches only directories)."""
        final = 1 << self.size
        state = self._pass(1, at_boundary=True)
        for char in path:
            if char == _SLASH and state & final:
                return True  # a directory above the path matches: everything below does
            state = self._step(state, char)
            if not state:
                return False
        return bool(state & final) and (is_dir or not self.directory_only)

    def _step(self, state: int, char: str) -> int:
        take = self.chars.get(char, 0)
        if char != _SLASH:
            take |= self.one
            for bit, chars in self.sets:
                if chars.accepts(char):
                    take |= bit
        staying = self.anything | self.directories
        if char != _SLASH:
            staying |= self.stars
        moved = ((state & take) << 1) | (state & staying)
        return self._pass(moved, at_boundary=char == _SLASH)

    def _pass(self, state: int, *, at_boundary: bool) -> int:
        """``state`` plus the positions reached by letting tokens take nothing: stars
        anywhere, ``**/`` only where a directory starts."""
        skippable = self.stars | self.anything
        if at_boundary:
            skippable |= self.directories
        while True:
            grown = state | ((state & skippable) << 1)
            if grown == state:
                return state
            state = grown


def check(pattern: str) -> str:
    """Why ``pattern`` cannot be used (one line), or ``""``."""
    try:
        compile_glob(pattern)
    except PatternError as error:
        return str(error)
    return ""


@lru_cache(maxsize=MAX_PATTERNS)
def compile_glob(pattern: str) -> PathGlob:
    """``pattern`` compiled; ``PatternError`` says why it cannot be."""
    if len(pattern) > MAX_PATTERN_LENGTH:
        raise PatternError(f"longer than {MAX_PATTERN_LENGTH} characters")
    text = pattern.strip()
    if not text:
        raise PatternError("empty pattern")
    if text.startswith("!"):
        raise PatternError("negation (!) is not supported; narrow the other patterns instead")
    directory_only = text.endswith(_SLASH)
    text = text.removesuffix(_SLASH)
    anchored = _SLASH in text
    text = text.removeprefix(_SLASH)
    if not text:
        raise PatternError("matches the whole repository")
    components = text.split(_SLASH)
    if any(part in ("", ".", "..") for part in components):
        raise PatternError("empty, '.' or '..' path component; write paths as a/b/c")
    if not anchored and components != ["**"]:
        components = ["**", *components]
    return _automaton(pattern, components, directory_only)


def _automaton(pattern: str, components: Sequence[str], directory_only: bool) -> PathGlob:
    chars: dict[str, int] = {}
    one = stars = anything = directories = 0
    sets: list[tuple[int, _Set]] = []
    position = 0

    def char_token(char: str) -> None:
        nonlocal position
        chars[char] = chars.get(char, 0) | 1 << position
        position += 1

    last = len(components) - 1
    for index, component in enumerate(components):
        if component == "**":
            if index == last:  # a/** : everything inside a, so one character or more
                one |= 1 << position  # '/' never starts a component: "one" takes any
                anything |= 1 << (position + 1)
                position += 2
            elif not index or components[index - 1] != "**":
                directories |= 1 << position
                position += 1
            continue
        for kind, value in _component_tokens(component):
            if kind == "char":
                char_token(value if isinstance(value, str) else "")
            elif kind == "one":
                one |= 1 << position
                position += 1
            elif kind == "star":
                stars |= 1 << position
                position += 1
            else:
                assert isinstance(value, _Set)
                sets.append((1 << position, value))
                position += 1
        if index != last:
            char_token(_SLASH)
    return PathGlob(
        pattern, position, chars, one, tuple(sets), stars, anything, directories, directory_only
    )


def _component_tokens(component: str) -> list[tuple[str, str | _Set]]:
    """The tokens of one path component (no ``/`` in it)."""
    tokens: list[tuple[str, str | _Set]] = []
    index = 0
    while index < len(component):
        char = component[index]
        index += 1
        if char == "\\":
            if index == len(component):
                raise PatternError("ends with an unescaped backslash")
            tokens.append(("char", component[index]))
            index += 1
        elif char == "*":
            if not tokens or tokens[-1] != ("star", ""):
                tokens.append(("star", ""))
        elif char == "?":
            tokens.append(("one", ""))
        elif char == "[":
            found, index = _set(component, index)
            tokens.append(("set", found))
        else:
            tokens.append(("char", char))
    return tokens


def _set(component: str, index: int) -> tuple[_Set, int]:
    """The set that starts after the ``[`` before ``index``, and where it ends."""
    negated = index < len(component) and component[index] in "!^"
    index += negated
    ranges: list[tuple[str, str]] = []
    first = True
    while index < len(component) and (first or component[index] != "]"):
        first = False
        low = component[index]
        if low == "\\" and index + 1 < len(component):
            index += 1
            low = component[index]
        index += 1
        if index + 1 < len(component) and component[index] == "-" and component[index + 1] != "]":
            high = component[index + 1]
            index += 2
            if high < low:
                raise PatternError(f"range {low}-{high} is reversed")
            ranges.append((low, high))
        else:
            ranges.append((low, low))
    if index >= len(component):
        raise PatternError("a '[' without its ']'")
    return _Set(tuple(ranges), negated), index + 1


def compile_all(patterns: Sequence[str]) -> tuple[PathGlob, ...]:
    """Every pattern compiled; ``PatternError`` for the first that cannot be, or for
    more than ``MAX_PATTERNS``."""
    if len(patterns) > MAX_PATTERNS:
        raise PatternError(f"more than {MAX_PATTERNS} patterns (config and command line together)")
    compiled = []
    for pattern in patterns:
        try:
            compiled.append(compile_glob(pattern))
        except PatternError as error:
            raise PatternError(f"{pattern!r}: {error}") from None
    return tuple(compiled)
