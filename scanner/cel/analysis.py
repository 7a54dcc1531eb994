"""One parser-based reading of each CEL expression, and of each rule: what it reads.

Every part of poolgate that needs to know what a rule's CEL does, without running
it, asks here, and this module reads the CEL only through its parse
(``scanner.cel.parser``), so a ``//`` comment, a raw string or optional syntax
(``a.?b``) changes nothing:

* ``scanner.audit.run``'s read plan (``scanner.audit.reads``): the model facts each rule reads;
* projection and deferral (``scanner.evaluate.optimize.projection``): which fields of
  ``workload`` a rule may read, and whether it reads only a controlled workload's instance facts;
* guards (``scanner.evaluate.optimize.guards``): a condition's top-level conjuncts and
  the simple tests among them;
* the comprehension nesting limit (``scanner.cel.budget``);
* binding of rule variables (``scanner.evaluate.optimize.binding``): which expressions
  read ``variables``;
* the CEL of scanned admission policies and DeviceClasses (``scanner.model.admission``,
  ``scanner.model.dra``): the names they mention and the constants they compare.

**Reads.** Evaluating an expression reads parts of the variables it names. A ``Read``
is one such part: a variable (``root``), a ``path`` below it of field names and map
keys, with ``ANY`` for an element or a key that is not a constant, and whether the
value there is read ``WHOLE``, ``ITERATED`` (its size, keys and which elements exist;
the elements' own reads are listed with an ``ANY`` step) or only ``REACHED`` (it must
exist). A read of a path reaches its prefixes too. Reads follow values
(``scanner.cel.walk``): through field selection (``.``, ``.?``, ``has()``), indexing
with constant strings (``a["b"]``), a key test (``"b" in a``, which reads key ``b`` of
a map; a list there is read whole by every consumer), comprehension variables
(``a.exists(c, c.b)`` iterates ``a`` and reads ``b`` of its elements), ``filter``
(whose result is its range's elements), ``?:``, ``dyn()``, ``cel.bind`` and optional
values (``optional.of``, ``.value()``, ``.orValue()``, ``.optMap(x, ...)``). The
two-variable comprehensions of Kubernetes' environment (``m.all(k, v, ...)``,
``transformList``, ``transformMap``, ``transformMapEntry``, ``existsOne``) iterate as
the others do: their last variable is an element (a map's value), the first an index
or a key. Any other use of a value (an
operator, a function, a list or map built from it) reads it whole. Reads in the
``else`` branch of a conditional on ``workload.controlled`` alone are marked
``unless_controlled``: on a controlled workload that branch never runs.

A rule's reads (``analyze_rule``) resolve ``variables.<name>`` to what the variable's
expression is made of, reach each variable's value (it is evaluated whether used or
not), and read each other expression's value whole (the engine does).

The parse of every bundled rule is kept between runs (``scanner.ruleset.cache``), so a
warm start does not parse.
"""

from __future__ import annotations

import hashlib
import pathlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache, lru_cache
from typing import Any, Final, NamedTuple

ANY: Final = None
"""A path step for an element of a list, or a key of a map that is not a constant."""

WHOLE: Final = "whole"
ITERATED: Final = "iterated"
REACHED: Final = "reached"

Path = tuple[str | None, ...]

MACROS: Final = frozenset(
    {"all", "exists", "exists_one", "map", "filter"}
    # the two-variable comprehensions of Kubernetes' environment (scanner.cel.k8s)
    | {"existsOne", "transformList", "transformMap", "transformMapEntry"}
)
"""The comprehension macros, whose arguments nest (``scanner.cel.budget``)."""


class Read(NamedTuple):
    """A part of a variable that evaluating an expression reads."""

    root: str
    path: Path
    how: str
    """``WHOLE``, ``ITERATED`` or ``REACHED`` (module docstring)."""
    unless_controlled: bool = False


class Origin(NamedTuple):
    """A part of a variable that an expression's value may be (``variables.x`` is)."""

    root: str
    path: Path
    unless_controlled: bool = False


Flow = frozenset[Origin]
NOTHING: Flow = frozenset()


class PathTest(NamedTuple):
    """A simple test of a conjunct: ``[!]root.a.b`` (a flag), ``root.a.b == "text"``
    (equals) or ``root.a.b in config.c.d`` (member, with ``values`` the path under
    ``config``)."""

    kind: str
    root: str
    path: tuple[str, ...]
    negated: bool = False
    text: str = ""
    values: tuple[str, ...] = ()


class Conjunct(NamedTuple):
    """One operand of an expression's top-level ``&&`` (the whole expression when it
    has none)."""

    source: str
    """Its text (without enclosing parentheses): CEL of its own."""
    test: PathTest | None
    alternatives: tuple[PathTest | None, ...]
    """The tests of its operands when it is an ``||`` (parenthesized or not), else ()."""
    roots: frozenset[str]
    """The variables it names."""
    iterates: bool
    """It holds a comprehension."""
    builds_map: bool
    """It builds a map or a message (whose keys may turn out equal at run time)."""


@dataclass(frozen=True, slots=True)
class Analysis:
    """What one expression reads, and its shape."""

    reads: frozenset[Read]
    """What evaluating it reads, its own value aside (``value_reads`` adds that)."""
    result: frozenset[Origin]
    """What its value may be made of."""
    roots: frozenset[str]
    """Every variable it names (free names; comprehension variables are not)."""
    nesting: int
    """Deepest comprehension nesting: a comprehension's arguments are inside it, its
    range is not."""
    nesting_offset: int
    """Where the name of the first comprehension that deep starts (0 when none)."""
    refs: bool
    """It builds a map with the constant key ``"ref"`` (a violation naming its object)."""
    conjuncts: tuple[Conjunct, ...]
    names: frozenset[str]
    """Every field name it selects or tests and every string constant it holds."""
    compared: frozenset[tuple[str, tuple[str, ...], str]]
    """(root, fields, text): a path of fields compared with a string constant, by
    ``==`` (either side) or ``in`` a list literal."""

    @property
    def iterates(self) -> bool:
        return self.nesting > 0

    @property
    def reads_variables(self) -> bool:
        """It reads rule variables (``variables.x``)."""
        return "variables" in self.roots

    @property
    def rule_variables(self) -> frozenset[str] | None:
        """The names of the rule variables it reads (``variables.x``: ``x``), or None
        when it may read any (the map whole, or at a key that is not a constant)."""
        names: set[str] = set()
        parts = [(r.root, r.path) for r in self.reads] + [(o.root, o.path) for o in self.result]
        for root, path in parts:
            if root != "variables":
                continue
            if not path or path[0] is ANY:
                return None
            names.add(path[0])
        return frozenset(names)

    def value_reads(self, how: str = WHOLE) -> frozenset[Read]:
        """Its reads when its value is used whole too (a rule's condition, violations),
        or only ``REACHED`` (a rule variable's: it is evaluated whether used or not)."""
        return self.reads | {Read(o.root, o.path, how, o.unless_controlled) for o in self.result}


@dataclass(frozen=True, slots=True)
class RuleAnalysis:
    """What all of one rule's expressions read (``analyze_rule``)."""

    reads: frozenset[Read]
    iterates: bool
    """An expression of it holds a comprehension."""
    refs: bool

    def of(self, root: str, *, controlled: bool = False) -> list[Read]:
        """The reads of variable ``root``; with ``controlled``, those that happen on a
        controlled workload (not ``unless_controlled``)."""
        return [
            read
            for read in self.reads
            if read.root == root and not (controlled and read.unless_controlled)
        ]

    def covers(self, root: str, path: Path) -> bool:
        """Whether anything at or below ``root.path`` may be read (``ANY`` matches any step)."""
        for read in self.reads:
            if read.root != root:
                continue
            shorter = min(len(read.path), len(path))
            if not all(_same(read.path[i], path[i]) for i in range(shorter)):
                continue
            if len(read.path) >= len(path) or read.how == WHOLE:
                return True
        return False


def _same(step: str | None, other: str | None) -> bool:
    return step is ANY or other is ANY or step == other


# --- one expression ------------------------------------------------------------------

_memo: dict[str, Analysis] = {}
_MEMO_LIMIT: Final = 4096
_stored: dict[str, Any] = {}


def analyze(source: str, *, keep: bool = True) -> Analysis:
    """The analysis of ``source``; ``parser.ParseError`` when it does not parse.
    ``keep``: remember it for the rest of the run (a rule's expression, read again and
    again); CEL from scanned input is analysed once and not kept."""
    found = _memo.get(source)
    if found is not None:
        return found
    if not keep:
        return _analyze(source)
    stored = _stored.pop(digest(source), None) if _stored else None
    found = _from_json(stored) if stored is not None else None
    if found is None:
        found = _analyze(source)
    if len(_memo) >= _MEMO_LIMIT:
        _memo.clear()
    _memo[source] = found
    return found


def digest(source: str) -> str:
    """The key of an expression's analysis in the rule cache."""
    return hashlib.sha256(source.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def restore(entries: Mapping[str, Any]) -> None:
    """Analyses an earlier run kept (digest -> ``to_json``), used when their text is
    analysed; an entry that does not read back is parsed again."""
    _stored.update(entries)


def code() -> tuple[pathlib.Path, ...]:
    """The files of the CEL reading (this module, the parser, its tree and the walk),
    found without importing them."""
    here = pathlib.Path(__file__)
    return tuple(
        here.with_name(name) for name in ("analysis.py", "parser.py", "syntax.py", "walk.py")
    )


@cache
def identity() -> str:
    """What the kept analyses depend on: the text of the CEL reading's code."""
    hasher = hashlib.sha256(b"poolgate-cel-analysis 1\0")
    for path in code():
        try:
            hasher.update(path.read_bytes() + b"\0")
        except OSError:
            hasher.update(f"unreadable {path.name}\0".encode())
    return hasher.hexdigest()[:24]


def _analyze(source: str) -> Analysis:
    # The parser and the walk are imported only when something is parsed: a warm
    # start reads every analysis from the rule cache.
    from scanner.cel import parser, walk
    from scanner.cel.syntax import Logical

    tree = parser.parse(source)
    walker = walk.Walk()
    result = walker.value(tree, {}, False)
    depth, offset = walk.nesting(tree, 0)
    if isinstance(tree, Logical) and tree.operator == "&&":
        conjuncts = tuple(walk.conjunct(source, node) for node in tree.operands)
    else:  # one conjunct: the walk just made
        conjuncts = (walk.conjunct(source, tree, walker, depth),)
    return Analysis(
        reads=frozenset(walker.reads),
        result=frozenset(result),
        roots=frozenset(walker.roots),
        nesting=depth,
        nesting_offset=max(offset, 0),
        refs=walker.refs,
        conjuncts=conjuncts,
        names=frozenset(walker.names),
        compared=frozenset(walker.compared),
    )


# --- a rule --------------------------------------------------------------------------


@lru_cache(maxsize=1024)
def analyze_rule(
    expressions: tuple[str, ...], variables: tuple[tuple[str, str], ...] = ()
) -> RuleAnalysis:
    """What a rule reads: ``variables`` (name, expression) in order, and its other
    ``expressions`` (condition, violations, validations and their messages), whose
    values the engine uses whole. ``ParseError`` when one does not parse."""
    defined = [(name, analyze(source)) for name, source in variables]
    values = _resolve(defined)
    reads: set[Read] = set()
    for _, analysis in defined:
        reads.update(_resolved(analysis.value_reads(REACHED), values))
    others = [analyze(source) for source in expressions]
    for analysis in others:
        reads.update(_resolved(analysis.value_reads(), values))
    every = [analysis for _, analysis in defined] + others
    return RuleAnalysis(
        reads=frozenset(reads),
        iterates=any(analysis.iterates for analysis in every),
        refs=any(analysis.refs for analysis in every),
    )


def _resolve(defined: Sequence[tuple[str, Analysis]]) -> dict[str, Flow]:
    """Variable name -> what its value may be made of, ``variables.x`` followed."""
    values: dict[str, Flow] = {name: NOTHING for name, _ in defined}
    for _ in range(len(defined) + 1):
        changed = False
        for name, analysis in defined:
            flow = frozenset(
                Origin(root, path, skipped)
                for origin in analysis.result
                for root, path, skipped in _through(*origin, values)
            )
            if not flow <= values[name]:
                values[name] = values[name] | flow
                changed = True
        if not changed:
            break
    return values


def _resolved(reads: Iterable[Read], values: Mapping[str, Flow]) -> Iterable[Read]:
    for read in reads:
        for root, path, skipped in _through(read.root, read.path, read.unless_controlled, values):
            yield Read(root, path, read.how, skipped)


def _through(
    root: str, path: Path, skipped: bool, values: Mapping[str, Flow]
) -> Iterable[tuple[str, Path, bool]]:
    """A part of ``root`` as parts of the variables' values when ``root`` is
    ``variables`` (``variables.x.y``: ``.y`` of what ``x`` is made of)."""
    if root != "variables":
        yield root, path, skipped
        return
    if not path:  # the map of variables itself, iterated or read whole
        names: Iterable[str] = values
        rest: Path = ()
    elif path[0] is ANY:
        names, rest = values, path[1:]
    else:
        names, rest = [path[0]], path[1:]
    for name in names:
        for origin in values.get(name, NOTHING):
            yield origin.root, origin.path + rest, skipped or origin.unless_controlled


# --- kept between runs ---------------------------------------------------------------


def to_json(analysis: Analysis) -> dict[str, Any]:
    """``analysis`` as JSON values, for the rule cache (``restore`` reads it back)."""
    return {
        "reads": sorted(([*read] for read in analysis.reads), key=repr),
        "result": sorted(([*origin] for origin in analysis.result), key=repr),
        "roots": sorted(analysis.roots),
        "nesting": [analysis.nesting, analysis.nesting_offset],
        "refs": analysis.refs,
        "conjuncts": [
            [c.source, _test_json(c.test), [_test_json(t) for t in c.alternatives],
             sorted(c.roots), c.iterates, c.builds_map]
            for c in analysis.conjuncts
        ],
        "names": sorted(analysis.names),
        "compared": sorted([root, [*path], text] for root, path, text in analysis.compared),
    }  # fmt: skip


def _test_json(test: PathTest | None) -> Any:
    if test is None:
        return None
    return [test.kind, test.root, list(test.path), test.negated, test.text, list(test.values)]


def _from_json(data: Any) -> Analysis | None:
    try:
        return Analysis(
            reads=frozenset(
                Read(_text(root), _path(path), _how(how), _flag(skipped))
                for root, path, how, skipped in data["reads"]
            ),
            result=frozenset(
                Origin(_text(root), _path(path), _flag(skipped))
                for root, path, skipped in data["result"]
            ),
            roots=frozenset(map(_text, data["roots"])),
            nesting=_number(data["nesting"][0]),
            nesting_offset=_number(data["nesting"][1]),
            refs=_flag(data["refs"]),
            conjuncts=tuple(
                Conjunct(_text(text), _test_from(test), tuple(map(_test_from, alternatives)),
                         frozenset(map(_text, roots)), _flag(iterates), _flag(builds_map))
                for text, test, alternatives, roots, iterates, builds_map in data["conjuncts"]
            ),
            names=frozenset(map(_text, data["names"])),
            compared=frozenset(
                (_text(root), tuple(map(_text, path)), _text(text))
                for root, path, text in data["compared"]
            ),
        )  # fmt: skip
    except (KeyError, IndexError, TypeError, ValueError):
        return None


def _test_from(data: Any) -> PathTest | None:
    if data is None:
        return None
    kind, root, path, negated, text, values = data
    return PathTest(
        _text(kind), _text(root), tuple(map(_text, path)), _flag(negated), _text(text),
        tuple(map(_text, values)),
    )  # fmt: skip


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(value)
    return value


def _path(value: Any) -> Path:
    return tuple(None if step is None else _text(step) for step in value)


def _how(value: Any) -> str:
    if value not in (WHOLE, ITERATED, REACHED):
        raise ValueError(value)
    return str(value)


def _flag(value: Any) -> bool:
    if not isinstance(value, bool):
        raise TypeError(value)
    return value


def _number(value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(value)
    return value
