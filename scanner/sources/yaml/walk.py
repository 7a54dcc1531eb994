"""One walk over a composed YAML node tree: the plain value and its line map together.

PyYAML's constructor would walk the tree a second time to build Python values, and it
is the part that knows how to turn tags into arbitrary objects. This walk builds only
dicts, lists, str, int, float, bool and None, and records for every field path the
1-based position a finding should point at: the key for a mapping entry, the item for
a sequence entry.
"""

from __future__ import annotations

import base64
import binascii
import sys
from collections.abc import Callable
from typing import Any, Final, NamedTuple

from yaml.nodes import MappingNode, Node, SequenceNode

from scanner.inventory import Position, join_path
from scanner.sources.yaml.limits import MAX_DEPTH, MAX_NODES, Refused, too_deep, too_large
from scanner.sources.yaml.numbers import api_number

_Pairs = list[tuple[Node, Node]]

_STR: Final = "tag:yaml.org,2002:str"
_MERGE: Final = "tag:yaml.org,2002:merge"


class Duplicate(NamedTuple):
    """A key that appears twice in one mapping; the last value is the one kept."""

    key: str
    first_line: int
    line: int
    column: int
    path: str


def build(
    root: Node, max_nodes: int | None = None
) -> tuple[Any, dict[str, Position], list[Duplicate]]:
    """Build the plain value and the field-path -> position map in one walk.

    The root's own position is not recorded (``""`` is the caller's choice: for an
    object, its first key). A mapping root gives a dict; other roots are accepted for
    poolgate's own files.

    This is the hot loop of a scan (every node of every manifest passes through it),
    so it trades a little repetition for speed: names are bound locally, scalars are
    handled inline and only mappings and sequences cost a call.
    """
    positions: dict[str, Position] = {}
    duplicates: dict[Position, Duplicate] = {}
    if _PATHS.made > _PATH_CACHE_CHARS:
        _PATHS.clear()
    keyed = _PATHS.keyed
    indexed = _PATHS.indexed
    child = _PATHS.child
    item_paths = _PATHS.items
    convert = _CONVERTERS.get
    mapping_node = MappingNode
    str_tag = _STR
    merge_tag = _MERGE
    # check_expansion measures alias expansion up front when the text has a "*";
    # counting here as well costs one subtraction per collection and keeps the walk
    # bounded even if that screen were ever wrong.
    remaining = MAX_NODES if max_nodes is None else max_nodes

    def mapping(pairs: _Pairs, path: str, depth: int, node: Node) -> dict[str, Any]:
        nonlocal remaining
        remaining -= len(pairs)
        if depth > MAX_DEPTH or remaining < 0:
            raise too_deep(node.start_mark) if depth > MAX_DEPTH else too_large(root.start_mark)
        out: dict[str, Any] = {}
        children = keyed.get(path)
        if children is None:
            children = keyed[path] = {}
        for key_node, value_node in pairs:
            key = key_node.value
            if key_node.tag != str_tag or key.__class__ is not str:
                if key_node.tag == merge_tag:
                    return merged(pairs, path, depth, node)
                key = _text_key(key_node)
            known = children.get(key)
            if known is None:
                known = child(children, path, key)
            key, here = known
            mark = key_node.start_mark
            positions[here] = (mark.line + 1, mark.column + 1)
            value = value_node.value
            if value.__class__ is str:
                tag = value_node.tag
                if tag != str_tag:
                    converter = convert(tag)
                    if converter is not None:
                        value = converter(value)
                out[key] = value
            elif value_node.__class__ is mapping_node:
                out[key] = mapping(value, here, depth + 1, value_node)
            else:
                out[key] = sequence(value, here, depth + 1, value_node)
        if len(out) != len(pairs):
            find_duplicates(pairs, path)
        return out

    def sequence(items: list[Node], path: str, depth: int, node: Node) -> list[Any]:
        nonlocal remaining
        remaining -= len(items)
        if depth > MAX_DEPTH or remaining < 0:
            raise too_deep(node.start_mark) if depth > MAX_DEPTH else too_large(root.start_mark)
        out: list[Any] = []
        append = out.append
        paths = indexed.get(path)
        if paths is None or len(paths) < len(items):
            paths = item_paths(path, len(items))
        for here, entry in zip(paths, items, strict=False):  # paths may run longer
            mark = entry.start_mark
            positions[here] = (mark.line + 1, mark.column + 1)
            value = entry.value
            if value.__class__ is str:
                tag = entry.tag
                if tag != str_tag:
                    converter = convert(tag)
                    if converter is not None:
                        value = converter(value)
                append(value)
            elif entry.__class__ is mapping_node:
                append(mapping(value, here, depth + 1, entry))
            else:
                append(sequence(value, here, depth + 1, entry))
        return out

    def merged(pairs: _Pairs, path: str, depth: int, node: Node) -> dict[str, Any]:
        """YAML 1.1 merge keys, applied as Kubernetes applies them.

        kubectl and the API server read YAML with go-yaml v2 (sigs.k8s.io/yaml), which
        writes a mapping's entries in document order: ``<<`` sets every key of what it
        merges, over an explicit key written before it, and an explicit key after it
        wins; within ``<<: [*a, *b]`` the earlier mapping wins. (PyYAML lets explicit
        keys win wherever they stand: ``privileged: false`` before ``<<: *priv`` read
        false there, and true in the cluster.)
        """
        for key_node, value_node in pairs:
            if key_node.tag == merge_tag:
                sources = value_node.value if value_node.__class__ is SequenceNode else [value_node]
                for source in sources:
                    if source.__class__ is not mapping_node:
                        message = "merge key '<<' needs a mapping or a list of mappings"
                        raise Refused(message, source.start_mark)
        out: dict[str, Any] = {}
        explicit: _Pairs = []
        run: _Pairs = []  # explicit keys since the last merge key
        # Each write walks its nodes when it happens, so the last write wins for the
        # value and its positions alike. Merged mappings count one level deeper, so a
        # mapping merging itself through an alias hits MAX_DEPTH.
        for key_node, value_node in pairs:
            if key_node.tag != merge_tag:
                run.append((key_node, value_node))
                explicit.append((key_node, value_node))
                continue
            if run:
                out.update(mapping(run, path, depth, node))
                run = []
            sources = value_node.value if value_node.__class__ is SequenceNode else [value_node]
            for source in reversed(sources):
                out.update(mapping(source.value, path, depth + 1, source))
        if run:
            out.update(mapping(run, path, depth, node))
        find_duplicates(explicit, path)  # across the runs too
        return out

    def find_duplicates(pairs: _Pairs, path: str) -> None:
        first_line: dict[str, int] = {}
        for key_node, _ in pairs:
            key = key_node.value
            if key_node.tag != str_tag or key.__class__ is not str:
                key = _text_key(key_node)
            mark = key_node.start_mark
            if key not in first_line:
                first_line[key] = mark.line + 1
                continue
            where = (mark.line + 1, mark.column + 1)
            # An anchored mapping walked again through an alias reports once.
            duplicates.setdefault(
                where, Duplicate(key, first_line[key], *where, join_path(path, key))
            )

    value = root.value
    if value.__class__ is str:
        converter = convert(root.tag)
        body = converter(value) if converter is not None else value
    elif root.__class__ is mapping_node:
        body = mapping(value, "", 1, root)
    else:
        body = sequence(value, "", 1, root)
    return body, positions, sorted(duplicates.values(), key=lambda d: (d.line, d.column))


class _PathCache:
    """Field paths already made, shared by every walk: the same few hundred keys and
    paths repeat in every manifest. Paths and keys come out interned, so line maps and
    bodies share one string per path and per key, and pickling a loader child's objects
    back (scanner/sources/parallel.py) writes each once instead of once per field: a
    third of the bytes, read back faster. A child path is found with one lookup in its
    parent's entry instead of being joined again.
    Emptied when the paths it made reach ``_PATH_CACHE_CHARS`` characters, so input
    with millions of distinct keys, or very long ones, holds no memory past the walk
    after it (counting entries let 3,000 paths under a 100,000-character key keep
    286 MiB alive, found in review)."""

    def __init__(self) -> None:
        self.keyed: dict[str, dict[str, tuple[str, str]]] = {}
        """Parent path -> key -> (the key, interned; the child's path)."""
        self.indexed: dict[str, list[str]] = {}
        """Parent path -> the paths of its first items (``path[0]``, ``path[1]``, ...)."""
        self.made = 0

    def child(self, children: dict[str, tuple[str, str]], path: str, key: str) -> tuple[str, str]:
        """Make and remember ``children[key]``: ``path.key``, or ``path['a.b']`` for a
        key that needs quoting (``join_path``)."""
        key = sys.intern(key)
        known = children[key] = (key, sys.intern(join_path(path, key)))
        self.made += len(known[1])
        return known

    def items(self, path: str, count: int) -> list[str]:
        """The paths of the first ``count`` items under ``path``, or more."""
        known = self.indexed.get(path, [])
        added = [sys.intern(f"{path}[{index}]") for index in range(len(known), count)]
        self.made += sum(map(len, added))
        paths = self.indexed[path] = known + added
        return paths

    def clear(self) -> None:
        self.keyed.clear()
        self.indexed.clear()
        self.made = 0


_PATHS: Final = _PathCache()
_PATH_CACHE_CHARS: Final = 4_000_000
"""About 4 MB of paths: the paths of tens of thousands of distinct fields."""


def _text_key(node: Node) -> str:
    """A mapping key that is not a plain string, spelled as Kubernetes' JSON conversion would.

    ``80: http`` becomes ``"80"``, ``true: x`` becomes ``"true"``; mappings or lists used
    as keys have no JSON spelling, so the document is refused.
    """
    text = node.value
    if text.__class__ is not str:
        raise Refused(
            "a mapping or list is used as a mapping key; Kubernetes accepts only scalar keys",
            node.start_mark,
        )
    converter = _CONVERTERS.get(node.tag)
    value = converter(text) if converter is not None else text
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    return str(text)


# --- scalars -------------------------------------------------------------------------
# Resolution follows PyYAML's SafeLoader (YAML 1.1): the tag is already resolved by the
# composer, these only turn the text into a value. A text the tag does not fit (an
# explicit "!!int abc") stays a string rather than failing the document.


def _to_null(_text: str) -> None:
    return None


_BOOLS: Final = {
    "y": True,
    "yes": True,
    "true": True,
    "on": True,
    "n": False,
    "no": False,
    "false": False,
    "off": False,
}


def _to_bool(text: str) -> bool | str:
    return _BOOLS.get(text.lower(), text)


def _to_int(text: str) -> int | float | str:
    """An integer; one outside int64 becomes a float, as the API server's JSON decoding
    makes it (scanner/sources/yaml/numbers.py)."""
    if len(text) < 19 and text.isdigit() and text.isascii() and (text[0] != "0" or len(text) == 1):
        return int(text)  # plain decimal, well inside int64: most integers in manifests
    value = _parse_int(text)
    return api_number(value, text) if isinstance(value, int) else value


def _parse_int(text: str) -> int | str:
    digits = text.replace("_", "")
    sign = -1 if digits.startswith("-") else 1
    digits = digits[1:] if digits[:1] in ("+", "-") else digits
    prefix = digits[:2].lower()
    try:
        if prefix == "0b":
            return sign * int(digits[2:], 2)
        if prefix == "0x":
            return sign * int(digits[2:], 16)
        if prefix == "0o":
            return sign * int(digits[2:], 8)
        if ":" in digits:  # YAML 1.1 base 60: 1:30 is 90
            if digits.count(":") > 8:  # each part multiplies a growing integer: keep it cheap
                return text
            total = 0
            for part in digits.split(":"):
                total = total * 60 + int(part)
            return sign * total
        if len(digits) > 1 and digits.startswith("0"):
            return sign * int(digits, 8)  # YAML 1.1 octal: 0755
        return sign * int(digits)  # ValueError past 4,300 digits, by Python's own guard
    except ValueError:
        return text


def _to_float(text: str) -> float | str:
    digits = text.replace("_", "").lower()
    sign = -1.0 if digits.startswith("-") else 1.0
    digits = digits[1:] if digits[:1] in ("+", "-") else digits
    if digits == ".inf":
        return sign * float("inf")
    if digits == ".nan":
        return float("nan")
    try:
        if ":" in digits:  # YAML 1.1 base 60
            number = 0.0
            for part in digits.split(":"):
                number = number * 60 + float(part)
            return sign * number
        return sign * float(digits)
    except ValueError:
        return text


def _to_text_from_binary(text: str) -> str:
    """``!!binary``: Kubernetes' YAML decoder (go-yaml) turns the base64 text into the
    string it encodes, so a rule must see that string too (yamlnotes warns about it).
    Like Go's decoder, line breaks are ignored; text that is not base64 stays as it is.
    A NUL in the decoded text becomes U+FFFD, as a NUL escape does (yamlnotes): cel-cpp
    would end the string there, and a guard in Python would not."""
    try:
        data = base64.b64decode(text.replace("\n", "").replace("\r", ""), validate=True)
    except (binascii.Error, ValueError):
        return text
    return data.decode("utf-8", "replace").replace("\x00", "\ufffd")


_CONVERTERS: Final[dict[str, Callable[[str], Any]]] = {
    "tag:yaml.org,2002:null": _to_null,
    "tag:yaml.org,2002:bool": _to_bool,
    "tag:yaml.org,2002:int": _to_int,
    "tag:yaml.org,2002:float": _to_float,
    "tag:yaml.org,2002:binary": _to_text_from_binary,
}
