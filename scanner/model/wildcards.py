"""Wildcard patterns written by whoever writes the input, matched without backtracking.

Patterns come from the scanned objects (Kyverno ``imageReferences``, ``names`` and
``namespaces``; Sigstore ``ClusterImagePolicy`` globs) and from the configuration
(exemption matches, ``workloadIdentityAccounts``), and a pull request can change
both. A regular expression built from such a pattern backtracks: Python's ``re``
takes minutes to find that ``*a*a*a*a*a*a*a*a*a*a*!`` does not match sixty ``a``.
So a pattern is compiled once (``compile_pattern``) and a text is matched without
ever trying anything twice: literal pieces are looked for once each, leftmost, with
``str.find``; what pieces cannot express goes through a Shift-And automaton, one
pass over the text with the set of pattern positions reached as the bits of an
integer (O(len(text) * len(pattern) / 64) word operations at worst).

Each format keeps its own meaning (``Dialect``); the tests check every one against
the regular expression or ``fnmatch`` it replaces, on random patterns and texts.
"""

from __future__ import annotations

import enum
import fnmatch
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Final


class Dialect(enum.Enum):
    """What the special characters of a pattern mean."""

    GLOB = "glob"
    """``*`` any run of characters; everything else literal (config exemptions)."""
    KYVERNO = "kyverno"
    """Kyverno's ``ext/wildcard``: ``*`` any run of characters (``/`` included), ``?``
    exactly one character."""
    SIGSTORE = "sigstore"
    """policy-controller's ``glob.Compile``: ``**`` any run of characters but a line
    break (RE2's ``.``), ``*`` any run without ``/``; stars pair from the left (``***``
    is ``**`` then ``*``)."""
    FNMATCH = "fnmatch"
    """``fnmatch.fnmatchcase``: ``*``, ``?``, and ``[seq]`` / ``[!seq]`` sets."""


_ANY: Final = ""
"""What a star that takes every character refuses."""

AUTOMATON_LIMIT: Final = 4096
"""The longest text, and the longest pattern, the automaton matches: past it the text
does not match. Its work is ``len(text) * len(pattern) / 64`` word operations, so two
inputs of a few megabytes would take minutes. Nothing real comes near: image
references, object names and namespaces are at most a few hundred characters
(repository names 255, DNS names 253). Not matching is the safe answer for every
caller: an image no policy covers, a name no selector picks, an exemption that does
not apply."""

_Token = tuple[str, object]
"""``("char", c)`` a literal character, ``("one", None)`` any one character,
``("set", test)`` one character ``test`` accepts, ``("star", refused)`` any run of
characters other than ``refused`` (``_ANY``: none)."""


@dataclass(frozen=True, slots=True)
class Automaton:
    """Tokens as a Shift-And automaton: bit ``i`` of the state is set when the text read
    so far matches the first ``i`` tokens; each character moves all of them at once."""

    size: int
    """Tokens; the text matches when bit ``size`` is set at its end."""
    chars: Mapping[str, int]
    """Character -> the bits of the literal tokens that take it."""
    any_char: int
    """Bits of the tokens that take any one character (``?``)."""
    sets: tuple[tuple[int, Callable[[str], object]], ...]
    """(bit, test) of the ``[seq]`` tokens."""
    stars: int
    """Bits of the star tokens."""
    staying: Mapping[str, int]
    """Character -> the bits of the stars that take it, for the characters some star
    refuses (every star takes any other)."""
    runs: int
    """The longest run of consecutive star tokens: how far letting stars take nothing
    can move a position."""

    def run(self, text: str) -> tuple[bool, int]:
        """Whether all of ``text`` matches, and the characters read (one pass at most)."""
        chars, any_char, sets = self.chars, self.any_char, self.sets
        stars, staying, runs = self.stars, self.staying, self.runs
        state = _skip_stars(1, stars, runs)
        read = 0
        for char in text:
            read += 1
            take = chars.get(char, 0) | any_char
            if sets:
                for bit, test in sets:
                    if test(char):
                        take |= bit
            state = ((state & take) << 1) | (state & staying.get(char, stars))
            if not state:
                return False, read
            if state & stars:
                state = _skip_stars(state, stars, runs)
        return bool(state >> self.size & 1), read


@dataclass(frozen=True, slots=True)
class Wildcard:
    """A compiled pattern: the literal ``prefix`` and ``suffix`` it starts and ends with,
    compared first, and what lies between, matched by the first of these it has:

    * nothing (``literal``): the pattern has no wildcard, the text must be ``prefix``;
    * ``pieces``: literal pieces around stars that all refuse the same character
      (``refused``, "" for none) that no piece holds: each piece is placed leftmost
      after the one before (a later place only leaves less room for the rest), and no
      refused character may be left for the stars;
    * ``components``: stars that refuse ``/`` where pieces hold ``/`` (Sigstore's
      ``index.docker.io/*/*``): no star crosses a ``/``, so text and pattern split at
      ``/`` into as many components, each matched as ``pieces``;
    * ``automaton``: everything else.
    """

    pattern: str
    prefix: str
    suffix: str = ""
    literal: bool = False
    pieces: tuple[str, ...] = ()
    refused: str = _ANY
    components: tuple[tuple[str, ...], ...] = ()
    automaton: Automaton | None = None

    def matches(self, text: str) -> bool:
        """Whether the whole of ``text`` matches the pattern."""
        return self.match_steps(text)[0]

    def match_steps(self, text: str) -> tuple[bool, int]:
        """Whether ``text`` matches, and the work it took: the pieces looked for, or the
        characters the automaton read. Nothing is tried twice, so the work is bounded
        by the pattern's pieces or by ``len(text)`` (1 when the ends decide)."""
        prefix, suffix = self.prefix, self.suffix
        if self.literal:
            return text == prefix, 1
        end = len(text) - len(suffix)
        if end < len(prefix) or not text.startswith(prefix) or not text.endswith(suffix):
            return False, 1
        middle = text[len(prefix) : end]
        if self.pieces:
            return _pieces_match(self.pieces, middle, self.refused)
        if self.components:
            return _components_match(self.components, middle)
        automaton = self.automaton
        assert automaton is not None
        if len(middle) > AUTOMATON_LIMIT or automaton.size > AUTOMATON_LIMIT:
            return False, 1
        return automaton.run(middle)


def _skip_stars(state: int, stars: int, runs: int) -> int:
    """``state`` plus every position reached by letting stars take nothing."""
    for _ in range(runs):
        state |= (state & stars) << 1
    return state


def _pieces_match(pieces: Sequence[str], text: str, refused: str) -> tuple[bool, int]:
    """``first*middle*...*last`` (a single piece: no star), each star taking any run of
    characters but ``refused``, which no piece holds."""
    first, last = pieces[0], pieces[-1]
    if len(pieces) == 1:
        return text == first, 1
    end = len(text) - len(last)
    if end < len(first) or not text.startswith(first) or not text.endswith(last):
        return False, 1
    if refused and refused in text[len(first) : end]:
        return False, 1
    position = len(first)
    steps = 1
    for piece in pieces[1:-1]:
        steps += 1
        found = text.find(piece, position, end)
        if found < 0:
            return False, steps
        position = found + len(piece)
    return True, steps


def _components_match(components: Sequence[Sequence[str]], text: str) -> tuple[bool, int]:
    parts = text.split("/")
    if len(parts) != len(components):
        return False, 1
    steps = 0
    for pieces, part in zip(components, parts, strict=True):
        matched, work = _pieces_match(pieces, part, _ANY)
        steps += work
        if not matched:
            return False, steps
    return True, steps


@lru_cache(maxsize=4096)
def compile_pattern(pattern: str, dialect: Dialect) -> Wildcard:
    """``pattern`` read as ``dialect``, ready to match many texts."""
    tokens = _collapsed(_tokens(pattern, dialect))
    start, end = 0, len(tokens)
    while start < end and tokens[start][0] == "char":
        start += 1
    if start == end:
        return Wildcard(pattern, _text(tokens), literal=True)
    while tokens[end - 1][0] == "char":
        end -= 1
    prefix, middle, suffix = _text(tokens[:start]), tokens[start:end], _text(tokens[end:])
    refusals = {value for kind, value in middle if kind == "star"}
    if len(refusals) == 1 and all(kind in ("char", "star") for kind, _ in middle):
        refused = str(refusals.pop())
        if all(value != refused for kind, value in middle if kind == "char"):
            return Wildcard(pattern, prefix, suffix, pieces=_pieces(middle), refused=refused)
        if refused == "/":
            components: list[list[_Token]] = [[]]
            for token in middle:
                if token == ("char", "/"):
                    components.append([])
                else:
                    components[-1].append(token)
            parts = tuple(_pieces(part) for part in components)
            return Wildcard(pattern, prefix, suffix, components=parts)
    return Wildcard(pattern, prefix, suffix, automaton=_automaton(middle))


def matches(pattern: str, text: str, dialect: Dialect) -> bool:
    """Whether all of ``text`` matches ``pattern`` read as ``dialect``."""
    return compile_pattern(pattern, dialect).matches(text)


def _text(tokens: Sequence[_Token]) -> str:
    return "".join(str(value) for _, value in tokens)


def _pieces(tokens: Sequence[_Token]) -> tuple[str, ...]:
    """The literal pieces around the stars of ``tokens`` (one more than the stars)."""
    pieces: list[list[_Token]] = [[]]
    for token in tokens:
        if token[0] == "star":
            pieces.append([])
        else:
            pieces[-1].append(token)
    return tuple(_text(piece) for piece in pieces)


def _tokens(pattern: str, dialect: Dialect) -> list[_Token]:
    if dialect is Dialect.FNMATCH:
        return _fnmatch_tokens(pattern)
    tokens: list[_Token] = []
    index = 0
    while index < len(pattern):
        char = pattern[index]
        index += 1
        if char == "*":
            refused = _ANY
            if dialect is Dialect.SIGSTORE:
                refused = "/"
                if pattern.startswith("*", index):
                    refused = "\n"
                    index += 1
            tokens.append(("star", refused))
        elif char == "?" and dialect is Dialect.KYVERNO:
            tokens.append(("one", None))
        else:
            tokens.append(("char", char))
    return tokens


def _fnmatch_tokens(pattern: str) -> list[_Token]:
    """Tokens as ``fnmatch.translate`` reads the pattern. A ``[...]`` set is tested with
    the one-character expression ``fnmatch`` makes of it (a set, no quantifier: nothing
    in it can backtrack); a ``[`` without its ``]`` is a literal."""
    tokens: list[_Token] = []
    index, size = 0, len(pattern)
    while index < size:
        char = pattern[index]
        index += 1
        if char == "*":
            tokens.append(("star", _ANY))
        elif char == "?":
            tokens.append(("one", None))
        elif char == "[":
            end = index
            if end < size and pattern[end] == "!":
                end += 1
            if end < size and pattern[end] == "]":
                end += 1
            while end < size and pattern[end] != "]":
                end += 1
            if end >= size:
                tokens.append(("char", "["))
            else:
                tokens.append(("set", _set_test(pattern[index - 1 : end + 1])))
                index = end + 1
        else:
            tokens.append(("char", char))
    return tokens


@lru_cache(maxsize=1024)
def _set_test(bracket: str) -> Callable[[str], object]:
    return re.compile(fnmatch.translate(bracket)).match


def _collapsed(tokens: list[_Token]) -> list[_Token]:
    """Consecutive equal stars as one: ``**`` of a Kyverno pattern is ``*``."""
    result: list[_Token] = []
    for token in tokens:
        if token[0] == "star" and result and result[-1] == token:
            continue
        result.append(token)
    return result


def _automaton(tokens: Sequence[_Token]) -> Automaton:
    chars: dict[str, int] = {}
    any_char = stars = 0
    sets: list[tuple[int, Callable[[str], object]]] = []
    refusing: dict[str, int] = {}
    runs = run = 0
    for position, (kind, value) in enumerate(tokens):
        bit = 1 << position
        run = run + 1 if kind == "star" else 0
        runs = max(runs, run)
        if kind == "char":
            chars[str(value)] = chars.get(str(value), 0) | bit
        elif kind == "one":
            any_char |= bit
        elif kind == "set":
            sets.append((bit, value))  # type: ignore[arg-type]
        else:
            stars |= bit
            if value:
                refusing[str(value)] = refusing.get(str(value), 0) | bit
    staying = {char: stars & ~bits for char, bits in refusing.items()}
    return Automaton(len(tokens), chars, any_char, tuple(sets), stars, staying, runs)
