"""Warnings about documents that load, but not quite as written.

Two things in YAML change what a reviewer sees without making a document invalid:

* **tags**. poolgate never constructs anything from a tag (``!!python/object/apply``
  and friends are attacks on unsafe loaders); like Kubernetes' own YAML decoder it
  reads a tagged value as plain data. A custom tag is therefore ignored, and reported
  so a reviewer notices it. ``!!binary`` is the exception Kubernetes makes: its
  decoder turns the base64 text into the string it encodes, and so does poolgate
  (yamlwalk), or a rule would check the encoding while the cluster sees the value.
* **NUL characters** (``"\\0"``, ``"\\u0000"`` in quoted scalars): cel-expr-python cuts a
  string at its first NUL, so the C++ engine would judge ``"nvidia\\0x"`` as ``"nvidia"``
  while the cluster stores all of it. Each NUL is read as U+FFFD instead, on both engines,
  and reported: nothing is cut off, and both engines see the same text.
* **a list of objects**: a document that is a YAML sequence of mappings with
  ``apiVersion`` and ``kind`` looks like manifests, but Kubernetes does not accept it
  (``kind: List`` or ``---`` separated documents are the forms it takes). poolgate
  does not scan it either, and says so instead of passing it over in silence.
"""

from __future__ import annotations

import re
from typing import Any, Final

from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from scanner.inventory import join_path

STANDARD_TAGS: Final = frozenset(
    f"tag:yaml.org,2002:{name}"
    for name in ("str", "int", "float", "bool", "null", "seq", "map", "merge", "timestamp")
)
"""Tags whose meaning Kubernetes and poolgate agree on (explicit or resolved)."""

BINARY_TAG: Final = "tag:yaml.org,2002:binary"
MAX_TAG_WARNINGS: Final = 10
"""Per document: hostile input may hold a tag on every one of a million nodes."""

LIST_OF_OBJECTS: Final = (
    "a YAML list of Kubernetes objects is not a manifest Kubernetes accepts, so it was "
    "not scanned; use `kind: List` or separate the objects with ---"
)

Note = tuple[str, int, int]
"""(message, 1-based line, 1-based column)."""

NUL_ESCAPE: Final = re.compile(r"\\(?:0|x00|u0000|U00000000)")
"""The escapes that put a NUL into a YAML or JSON string (a raw NUL does not parse)."""
NUL_REPLACED: Final = (
    "a NUL character (\\0) in this value is read as U+FFFD: the C++ CEL engine would cut "
    "the text off there"
)


def tag_notes(root: Node) -> list[Note]:
    """A warning for each distinct non-standard tag in the document, at its first use."""
    notes: list[Note] = []
    seen_tags: set[str] = set()
    seen_nodes: set[int] = set()  # aliases share nodes: visit each once
    pending = [root]
    while pending and len(notes) < MAX_TAG_WARNINGS:
        node = pending.pop()
        if id(node) in seen_nodes:
            continue
        seen_nodes.add(id(node))
        tag = node.tag
        if tag not in STANDARD_TAGS and tag not in seen_tags:
            seen_tags.add(tag)
            mark = node.start_mark
            notes.append((_tag_message(tag), mark.line + 1, mark.column + 1))
        if node.__class__ is MappingNode:
            for key, value in reversed(node.value):
                pending += (value, key)
        elif node.__class__ is SequenceNode:
            pending.extend(reversed(node.value))
    return sorted(notes, key=lambda note: (note[1], note[2]))


def _tag_message(tag: str) -> str:
    shown = "!!" + tag.removeprefix("tag:yaml.org,2002:") if tag.startswith("tag:yaml.org") else tag
    if tag == BINARY_TAG:
        return "!!binary value decoded from base64, as Kubernetes decodes it"
    return (
        f"tag {shown} ignored: the value is read as plain data, as Kubernetes reads it "
        "(nothing is constructed or run)"
    )


def list_of_objects(root: Node) -> Note | None:
    """The warning for a sequence document holding Kubernetes-looking mappings, or None."""
    if root.__class__ is not SequenceNode:
        return None
    for item in root.value:
        if item.__class__ is MappingNode:
            keys = {key.value for key, _ in item.value if key.__class__ is ScalarNode}
            if {"apiVersion", "kind"} <= keys:
                mark = root.start_mark
                return LIST_OF_OBJECTS, mark.line + 1, mark.column + 1
    return None


def replace_nul(body: dict[str, Any], positions: dict[str, tuple[int, int]]) -> Note | None:
    """Replace NUL in every string of ``body`` (keys included) with U+FFFD, in place.

    Returns a warning at the first value that held one, or None. Called only for
    documents whose text holds a NUL escape (``NUL_ESCAPE``).
    """
    found: list[str] = []  # paths of the values that held a NUL

    def clean(value: Any, path: str) -> Any:
        if value.__class__ is str:
            if "\0" not in value:
                return value
            found.append(path)
            return value.replace("\0", "\ufffd")
        if value.__class__ is list:
            value[:] = [clean(item, f"{path}[{index}]") for index, item in enumerate(value)]
        elif value.__class__ is dict:
            for key in list(value):
                here = join_path(path, key)
                item = clean(value.pop(key), here)
                if "\0" in key:
                    found.append(here)
                    key = key.replace("\0", "\ufffd")
                value[key] = item
        return value

    clean(body, "")
    if not found:
        return None
    path = found[0]
    while path and path not in positions:  # a renamed key: its parent's position
        path = path.rsplit(".", 1)[0] if "." in path else ""
    line, column = positions.get(path, (0, 0))
    return NUL_REPLACED, line, column
