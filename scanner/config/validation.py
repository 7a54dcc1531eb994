"""``.poolgate.yaml`` checked against its published JSON schema, in words for YAML editors.

The file is a ``GpuPoolGate`` object checked with ``schemas/config.schema.json``
(the same file editors can use). Like pre-commit's ``cfgv`` and yamllint:

* a key the schema does not know (``UnknownKey``, with the known key it most likely
  misspells) makes ``config validate`` fail, and a scan or audit run without it
  but incomplete (an error notification, exit code 3): the run did not use the
  config that was meant. Inside an exemption it is an error like any other: a
  misspelt ``match`` or ``kind`` would be ignored and the exemption would suppress
  more than it says;
* a value of the wrong type or shape is an error naming the key path and line
  (``FILE:LINE: spec.require.podSecurity: expected one of ...``), every problem
  of the file at once, before any scanning.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any, Final

from scanner.inventory import LineMap, Position, join_path

_JSON_TYPES: Final = {
    dict: "mapping",
    list: "list",
    str: "string",
    bool: "boolean",
    int: "integer",
    float: "number",
    type(None): "null",
}


def schema_text() -> str:
    """The published JSON schema of ``.poolgate.yaml``, as the package holds it."""
    return (resources.files("scanner") / "schemas" / "config.schema.json").read_text()


@cache
def schema() -> dict[str, Any]:
    """The published JSON schema of ``.poolgate.yaml``."""
    loaded: dict[str, Any] = json.loads(schema_text())
    return loaded


@cache
def _validator() -> Any:
    from jsonschema import Draft202012Validator  # lazy: only runs with a config file

    return Draft202012Validator(schema())


@dataclass(frozen=True, slots=True)
class UnknownKey:
    """A key the schema does not know, most often a misspelt one (``skuLable``)."""

    line: int
    path: str
    """Where it is: ``spec.skuLable``."""
    suggestion: str = ""
    """The known key it is closest to (``skuLabel``), if any is close."""

    def hint(self) -> str:
        return f"did you mean {self.suggestion}?" if self.suggestion else ""

    def describe(self) -> str:
        """``unknown key spec.skuLable; did you mean skuLabel?``"""
        hint = self.hint()
        return f"unknown key {self.path}" + (f"; {hint}" if hint else "")


@dataclass(frozen=True, slots=True)
class Checked:
    """What the schema says of a file: every problem at once, sorted by line."""

    problems: list[str]
    unknown: list[UnknownKey]
    """Unknown keys; inside an exemption they are problems instead. The caller decides
    (``config validate`` refuses the file, a scan runs without the key, incomplete)."""
    broken: frozenset[str]
    """The sections with a problem (``spec.require``, ``apiVersion``: ``section_of``),
    which the conversion leaves out so that it can still report the others' problems."""


def check(body: Mapping[str, Any], lines: LineMap, shown: str) -> Checked:
    """``body`` against the schema."""
    problems: set[tuple[int, str]] = set()  # jsonschema repeats some, e.g. per missing key
    unknown: set[UnknownKey] = set()
    broken: set[str] = set()
    for error in _validator().iter_errors(body):
        path = _field_path(error.absolute_path)
        if error.validator == "additionalProperties" and isinstance(error.instance, Mapping):
            known = list(error.schema.get("properties", {}))
            for key in _extra_keys(error.instance, error.schema):
                key_path = join_path(path, str(key))
                line = line_of(lines, key_path)
                if key_path.startswith(_EXEMPTIONS):
                    problems.add((line, f"{shown}:{line}: {key_path}: {_WIDENS}"))
                    broken.add(section_of(key_path))
                else:
                    unknown.add(UnknownKey(line, key_path, closest(str(key), known)))
            continue
        line = line_of(lines, path)
        problems.add((line, f"{shown}:{line}: {path or '(top level)'}: {_message(error)}"))
        broken.add(section_of(path))
    return Checked(
        [text for _, text in sorted(problems)],
        sorted(unknown, key=lambda key: (key.line, key.path)),
        frozenset(broken),
    )


MAX_SUGGESTED: Final = 64
"""Longer keys get no suggestion: no key is that long, and comparing costs per character."""


def closest(word: str, known: Iterable[str]) -> str:
    """The known key ``word`` most likely misspells: the same but for case, else the
    closest by ``difflib`` (at least 0.7 alike), else ``""``."""
    import difflib  # only for a file with an unknown key

    if len(word) > MAX_SUGGESTED:
        return ""
    candidates = list(known)
    for candidate in candidates:
        if candidate.lower() == word.lower():
            return candidate
    lowered = {candidate.lower(): candidate for candidate in candidates}
    found = difflib.get_close_matches(word.lower(), list(lowered), n=1, cutoff=0.7)
    return lowered[found[0]] if found else ""


def section_of(problem_path: str) -> str:
    """The top-level key under ``spec`` a path is in (``spec.require.x`` -> ``require``),
    else the path's first key: where a problem leaves the conversion nothing to trust."""
    parts = problem_path.split(".")
    if parts[0] == "spec" and len(parts) > 1:
        return "spec." + parts[1].split("[")[0]
    return parts[0].split("[")[0]


_EXEMPTIONS: Final = "spec.exemptions["
_WIDENS: Final = (
    "unknown key in an exemption (ignoring it could make the exemption suppress more "
    "than it says; check the spelling: rule, match.namespace, match.kind, match.name, "
    "reason, expires)"
)


def _extra_keys(instance: Mapping[str, Any], subschema: Mapping[str, Any]) -> list[Any]:
    known = subschema.get("properties", {})
    return [key for key in instance if key not in known]


def _message(error: Any) -> str:
    """jsonschema's messages, reworded where they would not help someone editing YAML."""
    value = error.instance
    expected = error.schema.get("x-expected") if isinstance(error.schema, Mapping) else None
    if expected:
        return f"expected {expected}, got {describe(value)}"
    if error.validator == "type":
        types = error.validator_value
        names = [types] if isinstance(types, str) else list(types)
        wanted = " or ".join(_JSON_NAMES.get(name, name) for name in names)
        return f"expected a {wanted}, got {describe(value)}"
    if error.validator == "enum":
        options = ", ".join(json.dumps(option) for option in error.validator_value)
        return f"expected one of {options}; got {describe(value)}"
    if error.validator == "const":
        return f"expected {json.dumps(error.validator_value)}, got {describe(value)}"
    if error.validator == "required":
        missing = [key for key in error.validator_value if key not in value]
        return f"missing required key {', '.join(missing)}"
    if error.validator == "uniqueItems":
        return "lists an entry twice"
    if error.validator == "minLength":
        return "must not be empty"
    message: str = error.message
    return message


_JSON_NAMES: Final = {"object": "mapping", "array": "list", "boolean": "boolean (true/false)"}


def describe(value: object) -> str:
    """A value as a message names it: its YAML type, and a scalar's text (capped)."""
    if value is None:
        return "null"
    kind = _JSON_TYPES.get(type(value), type(value).__name__)
    if isinstance(value, dict | list):
        return f"a {kind}"
    text = json.dumps(value)
    return f"{kind} {text if len(text) <= 60 else text[:57] + '...'}"


def _field_path(parts: Iterable[str | int]) -> str:
    path = ""
    for part in parts:
        path = join_path(path, part if isinstance(part, int) else str(part))
    return path


def line_of(lines: LineMap, path: str) -> int:
    """The line of ``path`` in the file, else 1 (the top)."""
    found: Position | None = lines.lookup(path)
    return found[0] if found is not None else 1
