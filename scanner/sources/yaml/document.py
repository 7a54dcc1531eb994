"""YAML text -> Kubernetes objects with origins and field positions.

Every source hands its YAML (or JSON) text to ``parse_stream``. libyaml composes the
node tree with marks; one walk (``yamlwalk``) builds the plain value and the line map
together; this module turns each document into objects, ``kind: List`` items into one
object each, and every problem into data:

* PG001: the stream does not parse (documents before the error are kept), or a
  document exceeds the limits in ``yamllimits`` (alias bombs, deep nesting);
* PG002: a duplicate key; the last value is kept, as Kubernetes' JSON conversion
  does, but other parsers keep the first;
* PG003: an object without ``metadata.name``; the object is kept.
"""

from __future__ import annotations

import gc
import operator
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from functools import lru_cache
from typing import Any, Final

import yaml
from yaml.error import Mark, MarkedYAMLError
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from yaml.reader import ReaderError

from scanner.inventory import (
    InvalidDocument,
    Inventory,
    KubeObject,
    LineMap,
    Origin,
    Position,
    SourceWarning,
)
from scanner.sources.yaml import surrogates
from scanner.sources.yaml.limits import (
    TOO_DEEP,
    TOO_LARGE,
    TOO_MANY_NODES,
    Refused,
    check_expansion,
    first_too_deep,
    may_nest_deeply,
)
from scanner.sources.yaml.notes import NUL_ESCAPE, list_of_objects, replace_nul, tag_notes
from scanner.sources.yaml.walk import Duplicate, build

try:
    from yaml import CSafeLoader as _SafeLoader

    _WITH_LIBYAML = True
except ImportError:  # PyYAML built without libyaml: pure Python, slower, same answers
    from yaml import SafeLoader as _SafeLoader  # type: ignore[assignment]

    _WITH_LIBYAML = False

STDIN_URI: Final = "<stdin>"
"""The URI of standard input (``poolgate scan -``)."""
_JSON_START: Final = re.compile(r'\s*(?:\{\s*["}]|\[)')
"""Standard input that starts as JSON does (``kubectl get -o json``: an object whose
first key is double-quoted, or an array); a YAML flow mapping such as ``{a: '\\u..'}``
keeps its single-quoted text as written."""

_NULL: Final = "tag:yaml.org,2002:null"
_STR: Final = "tag:yaml.org,2002:str"
_SEQ: Final = "tag:yaml.org,2002:seq"
_MAP: Final = "tag:yaml.org,2002:map"
_OBJECT_KEYS: Final = ("apiVersion", "kind", "<<")


Problem = tuple[str, int, int]
"""(message, 1-based line, 1-based column)."""

_Failure = tuple[int, int, int, str]
"""(document index, line, column, message) of the error that ended a stream."""


_BOOL: Final = "tag:yaml.org,2002:bool"
_ONE_LETTER_BOOL: Final = re.compile(r"^(?:y|Y|n|N)$")
"""YAML 1.1 booleans PyYAML leaves out and Kubernetes reads: go-yaml v2, under
kubectl and the API server, takes ``privileged: y`` for true and ``n`` for false."""

_BY_FIRST_CHAR: Final[dict[str, tuple[tuple[str, re.Pattern[str]], ...]]] = {
    char: tuple(resolvers)
    for char, resolvers in _SafeLoader.yaml_implicit_resolvers.items()
    if char is not None
}
for _char in "yYnN":
    _BY_FIRST_CHAR[_char] = ((_BOOL, _ONE_LETTER_BOOL), *_BY_FIRST_CHAR.get(_char, ()))
# Resolvers registered for any first character; PyYAML's safe table has none.
_ANY_CHAR: Final[tuple[tuple[str, re.Pattern[str]], ...]] = tuple(
    _SafeLoader.yaml_implicit_resolvers.get(None, ())
)
_RESOLVE_CACHE_SIZE: Final = 4096
"""Distinct (kind, text, implicit) answers kept; bounded so hostile text cannot hold memory."""


def _resolve(kind: type[Node], value: Any, implicit: tuple[bool, bool]) -> str:
    """PyYAML's implicit tag for a node, plus the one-letter booleans (``_ONE_LETTER_BOOL``):
    a pure function of its arguments, so cacheable."""
    if kind is ScalarNode:
        if implicit[0]:
            for tag, regexp in _BY_FIRST_CHAR.get(value[:1], ()) + _ANY_CHAR:
                if regexp.match(value):
                    return tag
        return _STR
    return _SEQ if kind is SequenceNode else _MAP


class _Loader(_SafeLoader):
    """``CSafeLoader`` with the same tag resolution, minus per-node Python overhead.

    libyaml's composer calls back into Python for every node: ``resolve`` to pick the
    implicit tag of a plain scalar, ``descend_resolver``/``ascend_resolver`` for path
    resolvers nobody registers. Those callbacks are a large part of composing time.
    ``resolve`` below gives PyYAML's answers from
    the same resolver table, looked up once by first character; a test compares it
    with PyYAML's own on every resolver-relevant spelling.

    The callbacks are also C functions where that is possible, because a Python frame
    per node is the cost: ``resolve`` goes through a bounded ``lru_cache`` (keys and
    most values repeat across manifests, and a hit never enters Python), and the two
    no-op path-resolver hooks are builtins that ignore their arguments (benchmarks/README.md
    has the figures).
    """

    resolve = staticmethod(lru_cache(maxsize=_RESOLVE_CACHE_SIZE)(_resolve))

    # Path resolvers are never registered; PyYAML's bookkeeping for them is skipped by
    # builtins that take the same arguments and do nothing that matters:
    # ``descend_resolver(parent, index)`` and ``ascend_resolver()``.
    descend_resolver = staticmethod(operator.is_)  # type: ignore[assignment]
    ascend_resolver = staticmethod(tuple)  # type: ignore[assignment]


def parse_stream(text: str, uri: str, source_type: str = "file") -> Inventory:
    """Parse a YAML or JSON stream into objects, invalid documents and a skip count.

    Never raises for bad input: a stream that stops parsing keeps the documents before
    the error and records PG001 at the error's position. Empty documents are ignored;
    documents that are not Kubernetes objects (no ``apiVersion`` and ``kind`` strings)
    are counted in ``skipped``. ``kind: List`` documents yield one object per item.
    """
    inventory = Inventory()
    text = _without_byte_order_marks(text)
    if uri.lower().endswith(".json") or (uri == STDIN_URI and _JSON_START.match(text)):
        text = surrogates.joined_pairs(text)  # "\ud83d\ude00", as json.dumps writes 😀
    failures: list[_Failure] = []
    with collector_paused():
        for index, root in _compose(text, failures):
            _add_document(root, index, text, uri, source_type, inventory)
    for index, line, column, message in failures:
        origin = Origin(uri, index, line, column, source_type)
        inventory.invalid.append(InvalidDocument("PG001", message, origin, line, column))
    fix = _unicode_break_fix(text)
    return inventory if fix is None else _repositioned(inventory, fix)


def parse_plain(
    text: str, *, max_nodes: int | None = None
) -> tuple[list[tuple[Any, dict[str, Position]]], list[Problem]]:
    """Every non-empty document as (plain value, field positions), and the problems found.

    For poolgate's own files (rule files, configuration), which need the same safety
    and positions but none of the Kubernetes handling: nothing is skipped and the root
    may be any value. Problems are (message, line, column): a parse error (which ends
    the stream), a refused document (left out), a duplicate key (the last value kept).
    ``max_nodes``: the nodes one document may have (default ``MAX_NODES``, for
    manifests; a snapshot's single List document is bounded by its length instead).
    """
    documents: list[tuple[Any, dict[str, Position]]] = []
    problems: list[Problem] = []
    text = _without_byte_order_marks(text)
    failures: list[_Failure] = []
    with collector_paused():
        for _, root in _compose(text, failures):
            if _is_empty(root):
                continue
            first = root.value[0][0] if root.__class__ is MappingNode and root.value else root
            start = _position(first.start_mark)
            try:
                body, positions, duplicates = _build_checked(root, text, max_nodes)
            except Refused as refused:
                where = _position(refused.mark) if refused.mark is not None else start
                problems.append((refused.message, *where))
                continue
            positions[""] = start
            documents.append((body, positions))
            problems.extend((_duplicate_message(d), d.line, d.column) for d in duplicates)
    problems.extend((message, line, column) for _, line, column, message in failures)
    fix = _unicode_break_fix(text)
    if fix is not None:
        documents = [(body, {k: fix(*v) for k, v in pos.items()}) for body, pos in documents]
        problems = [(message, *fix(line, column)) for message, line, column in problems]
    return documents, problems


def may_hold_objects(text: str) -> bool | None:
    """Whether a YAML stream holds a document that ``parse_stream`` would look at as a
    Kubernetes object (or warn about as a list of them), composed one document at a
    time and nothing built: True at the first such document, False when the whole
    stream parses without one, None when it stops parsing before one."""
    failures: list[_Failure] = []
    for _, root in _compose(_without_byte_order_marks(text), failures):
        if root.__class__ is MappingNode and _may_be_object(root.value):
            return True
        if list_of_objects(root) is not None:
            return True
    return None if failures else False


_BREAKS: Final = re.compile("\r\n|[\r\n\x85\u2028\u2029]")
_UNICODE_BREAKS: Final = ("\x85", "\u2028", "\u2029")


def _unicode_break_fix(text: str) -> Callable[[int, int], Position] | None:
    """libyaml (YAML 1.1) counts NEL, LS and PS (U+0085, U+2028, U+2029) as line breaks;
    editors, git and GitHub count lines by their line feeds, so every position after one
    would be a line off (a finding annotated on the wrong line). None when ``text`` has
    none; else a function from libyaml's (line, column) to the text's, 1-based."""
    if not any(mark in text for mark in _UNICODE_BREAKS):
        return None
    table: list[tuple[int, int]] = [(1, 0)]  # per libyaml line: (line, columns before it)
    line, line_start = 1, 0
    for match in _BREAKS.finditer(text):
        start = match.end()
        if match.group() not in _UNICODE_BREAKS:
            line, line_start = line + 1, start
        table.append((line, start - line_start))

    def fix(yaml_line: int, column: int) -> Position:
        if not 1 <= yaml_line <= len(table):
            return yaml_line, column
        real, before = table[yaml_line - 1]
        return real, column + before

    return fix


def _repositioned(inventory: Inventory, fix: Callable[[int, int], Position]) -> Inventory:
    """``inventory`` with every position mapped through ``fix`` (``_unicode_break_fix``)."""
    maps: dict[int, LineMap] = {}

    def moved(origin: Origin) -> Origin:
        line, column = fix(origin.line, origin.column)
        return replace(origin, line=line, column=column)

    objects = []
    for obj in inventory.objects:
        lines = maps.get(id(obj.lines.positions))
        if lines is None:
            positions = {path: fix(*at) for path, at in obj.lines.positions.items()}
            lines = maps[id(obj.lines.positions)] = LineMap(positions)
        objects.append(
            replace(obj, origin=moved(obj.origin), lines=LineMap(lines.positions, obj.lines.prefix))
        )
    inventory.objects = objects
    for index, doc in enumerate(inventory.invalid):
        line, column = fix(doc.line, doc.column)
        inventory.invalid[index] = replace(doc, origin=moved(doc.origin), line=line, column=column)
    for index, note in enumerate(inventory.warnings):
        line, column = fix(note.line, note.column)
        inventory.warnings[index] = replace(note, line=line, column=column)
    return inventory


@contextmanager
def collector_paused(freeze: bool = True) -> Iterator[None]:
    """Pause the cyclic garbage collector while documents are loaded (re-entrant).

    Loading allocates millions of small objects that all survive (nodes, dicts,
    position tuples), and each allocation burst makes the collector rescan the
    growing heap: with it on, composing takes several times as long.
    Sources that read many files hold the pause across all of them.

    On the way out, the outermost pause moves every tracked object to the permanent
    generation (``gc.freeze``) before re-enabling collection. Otherwise the next
    collection traverses everything loaded in one go, and later full collections
    during evaluation do it again. The cost
    is process-wide: objects alive now are never cycle-collected (plain reference
    counting still frees them), which suits a scan that keeps its inventory to the end.
    With ``freeze=False`` the collector is only re-enabled: for work whose cyclic
    garbage must stay collectable (a run inside a longer-lived process).
    """
    was_enabled = gc.isenabled()
    if was_enabled:
        gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            if freeze:
                gc.freeze()
            gc.enable()


def _compose(text: str, failures: list[_Failure]) -> Iterator[tuple[int, Node]]:
    """Yield (index, root node) per document; an error ends the stream in ``failures``.

    ``text`` has no byte-order mark: node marks index into it.
    """
    # Only libyaml's composer can crash on depth; PyYAML's raises RecursionError.
    deep = first_too_deep(text, _Loader) if _WITH_LIBYAML and may_nest_deeply(text) else None
    documents: Iterator[Node] = yaml.compose_all(text, Loader=_Loader)
    index = 0
    while True:
        if deep is not None and index == deep[0]:
            # Composing this document could overflow the C stack: it ends the stream.
            failures.append((index, deep[1], deep[2], TOO_DEEP))
            return
        try:
            root = next(documents)
        except StopIteration:
            return
        except (yaml.YAMLError, UnicodeEncodeError, RecursionError) as error:
            failures.append((index, *_describe_parse_error(error, text)))
            return
        yield index, root
        index += 1


def _build_checked(
    root: Node, text: str, max_nodes: int | None = None
) -> tuple[Any, dict[str, Position], list[Duplicate]]:
    """``build`` behind the alias-expansion check; raises ``Refused``."""
    # Aliases are the only way a small text expands into a huge walk. Every alias
    # starts with "*" and names an anchor ("&") of the same document (libyaml refuses
    # others, and a node's start mark includes its anchor): documents without both
    # skip the check. Cron schedules put a "*" in many manifests; "&" is rare.
    start, end = root.start_mark.index, root.end_mark.index
    aliased = text.find("&", start, end) != -1 and text.find("*", start, end) != -1
    if aliased:
        check_expansion(root, end - start)
    try:
        return build(root, max_nodes)
    except RecursionError as error:  # only if the caller already sits deep in the stack
        raise Refused("nesting too deep to parse", root.start_mark) from error
    except Refused as refused:  # the walk's own node count: no alias to blame
        if refused.message == TOO_LARGE and not aliased:
            raise Refused(TOO_MANY_NODES, refused.mark) from None
        raise


CONFIG_KIND: Final = "GpuPoolGate"
"""The kind of poolgate's own configuration (``scanner.config.file``), in API group
``poolgate.io``: a document of a scan, never an object of the cluster."""


def _is_config(api_version: str, kind: str) -> bool:
    """A poolgate configuration, whatever its file is called (pre-commit passes staged
    ``.poolgate.yaml`` files, and a copy or a template may have any name): a skipped
    document, not an object the rules judge (an unknown kind) or the summary counts."""
    return kind == CONFIG_KIND and api_version.startswith("poolgate.io/")


def _is_empty(root: Node) -> bool:
    """``---`` followed by nothing (or only comments)."""
    return root.__class__ is ScalarNode and root.tag == _NULL and root.value == ""


def _add_document(
    root: Node, index: int, text: str, uri: str, source_type: str, inventory: Inventory
) -> None:
    if root.__class__ is not MappingNode:
        if not _is_empty(root):
            inventory.skipped += 1
            note = list_of_objects(root)
            if note is not None:
                inventory.warnings.append(SourceWarning(uri, *note))
        return
    pairs: list[tuple[Node, Node]] = root.value
    if not _may_be_object(pairs):
        inventory.skipped += 1
        return
    line, column = _position(pairs[0][0].start_mark)
    origin = Origin(uri, index, line, column, source_type)
    try:
        built = _build_checked(root, text)
    except Refused as refused:
        where = _position(refused.mark) if refused.mark is not None else (line, column)
        inventory.invalid.append(InvalidDocument("PG001", refused.message, origin, *where))
        return
    body: dict[str, Any] = built[0]
    positions, duplicates = built[1], built[2]
    positions[""] = (line, column)
    api_version, kind = body.get("apiVersion"), body.get("kind")
    if not (isinstance(api_version, str) and isinstance(kind, str)):
        inventory.skipped += 1
        return
    if kind == CONFIG_KIND and _is_config(api_version, kind):
        inventory.skipped += 1
        return
    if text.find("!", root.start_mark.index, root.end_mark.index) != -1:  # tags start with "!"
        inventory.warnings.extend(SourceWarning(uri, *note) for note in tag_notes(root))
    if text.find("\\", root.start_mark.index, root.end_mark.index) != -1 and NUL_ESCAPE.search(
        text, root.start_mark.index, root.end_mark.index
    ):
        nul = replace_nul(body, positions)
        if nul is not None:
            inventory.warnings.append(SourceWarning(uri, *nul))

    objects: list[tuple[str, KubeObject]] = []
    items = _list_items(body, api_version, kind)
    if items is None:
        objects.append(("", KubeObject(body, origin, LineMap(positions=positions))))
    else:
        for item_index, item in enumerate(items):
            prefix = f"items[{item_index}]"
            if not _is_object(item):
                inventory.skipped += 1
                continue
            item_line, item_column = positions[prefix]
            item_origin = replace(origin, line=item_line, column=item_column)
            lines = LineMap(positions=positions, prefix=prefix)
            objects.append((prefix, KubeObject(item, item_origin, lines)))

    for _, obj in objects:
        inventory.objects.append(obj)
        if not _has_name(obj):
            inventory.invalid.append(
                InvalidDocument(
                    "PG003",
                    f"{obj.kind} has no metadata.name",
                    obj.origin,
                    obj.origin.line,
                    obj.origin.column,
                    ref=obj.ref,
                    path="metadata.name",
                )
            )
    for duplicate in duplicates:
        inventory.invalid.append(_duplicate_document(duplicate, origin, objects))


def _may_be_object(pairs: list[tuple[Node, Node]]) -> bool:
    """Cheap pre-filter: can this mapping end up with both ``apiVersion`` and ``kind``?

    Non-Kubernetes YAML (CI workflows, Helm values) is skipped without a walk, so its
    quirks never turn into findings.
    """
    found = {key.value for key, _ in pairs if key.value in _OBJECT_KEYS}
    return "<<" in found or len(found) == 2


def _is_object(value: object) -> bool:
    return (
        isinstance(value, dict)
        and isinstance(value.get("apiVersion"), str)
        and isinstance(value.get("kind"), str)
    )


def _list_items(body: dict[str, Any], api_version: str, kind: str) -> list[Any] | None:
    """The items of a list document, or None for an ordinary object.

    ``kind: List`` is what ``kubectl get -o yaml`` writes. Typed lists (``PodList``,
    ``apps/v1`` ``DeploymentList``) come from raw API calls; they are recognised by
    the ``List`` suffix plus an ``items`` list plus either ``apiVersion: v1`` or no
    ``metadata.name`` (list metadata has no name, objects do).
    """
    items = body.get("items")
    if kind == "List":
        if items is None:
            return []
        return items if isinstance(items, list) else None
    if not (kind.endswith("List") and isinstance(items, list)):
        return None
    metadata = body.get("metadata")
    named = isinstance(metadata, dict) and "name" in metadata
    return items if api_version == "v1" or not named else None


def _has_name(obj: KubeObject) -> bool:
    metadata = obj.metadata
    name, generate_name = metadata.get("name"), metadata.get("generateName")
    return (isinstance(name, str) and name != "") or (
        isinstance(generate_name, str) and generate_name != ""
    )


def _duplicate_document(
    duplicate: Duplicate, origin: Origin, objects: list[tuple[str, KubeObject]]
) -> InvalidDocument:
    """PG002 for one repeated key, attributed to the object (or List item) holding it."""
    message = _duplicate_message(duplicate)
    for prefix, obj in objects:
        if not prefix:
            ref, path = obj.ref, duplicate.path
        elif duplicate.path.startswith((f"{prefix}.", f"{prefix}[")):
            ref, path = obj.ref, duplicate.path[len(prefix) :].removeprefix(".")
        else:
            continue
        return InvalidDocument(
            "PG002", message, obj.origin, duplicate.line, duplicate.column, ref=ref, path=path
        )
    return InvalidDocument(
        "PG002", message, origin, duplicate.line, duplicate.column, path=duplicate.path
    )


DUPLICATE_KEY: Final = "duplicate key "
"""How the message of a duplicate-key problem starts (``parse_plain``)."""


def _duplicate_message(duplicate: Duplicate) -> str:
    return (
        f"{DUPLICATE_KEY}'{duplicate.key}' (first at line {duplicate.first_line}); "
        "parsers disagree on which value wins"
    )


# --- errors --------------------------------------------------------------------------


def _without_byte_order_marks(text: str) -> str:
    """``text`` without the byte order marks YAML 1.2 allows before each document: at
    the start, and at the start of a line (files saved by an editor and joined with
    ``---``); libyaml accepts only the first. The spec forbids one inside a document."""
    text = text.removeprefix("\ufeff")
    return text.replace("\n\ufeff", "\n") if "\n\ufeff" in text else text


def _position(mark: Mark) -> Position:
    return mark.line + 1, mark.column + 1


def _describe_parse_error(error: BaseException, text: str) -> tuple[int, int, str]:
    """(line, column, message) for an error raised while composing."""
    if isinstance(error, MarkedYAMLError):
        detail = " ".join(part for part in (error.problem, error.context) if part)
        mark = error.problem_mark or error.context_mark
        line, column = _position(mark) if mark is not None else (1, 1)
        # At the end of a text without a final line break, libyaml reports the line
        # after the last one, which no editor shows: the end of the last line instead.
        # (Counted as libyaml counts lines; _unicode_break_fix maps them afterwards.)
        starts = [0, *(match.end() for match in _BREAKS.finditer(text))]
        if line > len(starts):
            line, column = len(starts), len(text) - starts[-1] + 1
        if "tab" not in detail and _char_at(text, line, column) == "\t":
            detail += " (a tab: YAML indents with spaces only)"
        return line, column, f"YAML does not parse: {detail or error}"
    if isinstance(error, ReaderError):
        offset = error.position
        if _WITH_LIBYAML:  # libyaml counts bytes of the UTF-8 text
            offset = len(text.encode("utf-8")[:offset].decode("utf-8", "ignore"))
        if isinstance(error.character, int):
            detail = f"unacceptable character #x{error.character:04x}: {error.reason}"
        else:
            detail = error.reason
        return (*_offset_position(text, offset), f"YAML does not parse: {detail}")
    if isinstance(error, UnicodeEncodeError):
        detail = "text is not valid Unicode"
        return (*_offset_position(text, error.start), f"YAML does not parse: {detail}")
    if isinstance(error, RecursionError):
        return 1, 1, "YAML does not parse: nesting too deep to parse"
    return 1, 1, f"YAML does not parse: {error}"


def _char_at(text: str, line: int, column: int) -> str:
    """The character at a 1-based position ("" past the end); for error messages only."""
    start = 0
    for _ in range(line - 1):
        start = text.find("\n", start) + 1
        if start == 0:
            return ""
    return text[start + column - 1 : start + column]


def _offset_position(text: str, offset: int) -> Position:
    line_start = text.rfind("\n", 0, offset) + 1
    return text.count("\n", 0, offset) + 1, offset - line_start + 1
