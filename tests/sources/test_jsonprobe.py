"""jsonprobe: which ``.json`` files a walk reads as manifests, and what that costs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from scanner.sources import jsonprobe
from scanner.sources.jsonprobe import may_be_manifest, names_key

LIMIT = 10 * 1024 * 1024
POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}


def probe(tmp_path: Path, text: str | bytes, limit: int = LIMIT) -> bool:
    path = tmp_path / "x.json"
    if isinstance(text, str):
        path.write_text(text, encoding="utf-8")
    else:
        path.write_bytes(text)
    return may_be_manifest(path, limit)


@pytest.mark.parametrize(
    "text",
    [
        json.dumps(POD),
        json.dumps(POD).replace("apiVersion", "\\u0061piVersion"),
        json.dumps(POD).replace("apiVersion", "\\u0061\\u0070\\u0069\\u0056ersion"),
        json.dumps(POD).replace("apiVersion", "api\\u0056ersion"),
        " " * 100_000 + json.dumps(POD),
        json.dumps({"kind": "Pod", "pad": "x" * 100_000, "apiVersion": "v1"}),
        json.dumps([POD]),  # not what kubectl accepts: read, and the loader warns
        '{"a": 1}\n' + json.dumps(POD),  # a JSON stream
        "\ufeff" + json.dumps(POD),
        "apiVersion: v1\nkind: Pod\n",  # YAML in a .json file
        'kind: Pod\n? "\\x61pi\\\n  Version"\n: v1\n',  # YAML escapes
        "---\nfoo: 1\n---\napiVersion: v1\nkind: Pod\n",
        '{"apiVersion": "v1", "kind": "Pod", "metadata": {',  # truncated: PG001, as before
        "[" * 100_000 + '"apiVersion"',  # too deep for either decoder: PG001
    ],
)
def test_manifests_are_read(tmp_path: Path, text: str) -> None:
    assert probe(tmp_path, text)


@pytest.mark.parametrize(
    "text",
    [
        "",
        '{\n  // comment\n  "compilerOptions": {"strict": true,},\n}\n',
        '{"dir": "C:\\\\x64\\\\bin", // escaped backslashes, then x64\n}\n',
        json.dumps({"greeting": "d\u00e9j\u00e0 vu"}),  # ensure_ascii escapes: not letters
        json.dumps({"name": "web", "packages": {"node_modules/a": {"version": "1.0.0"}}}),
        json.dumps({"properties": {"apiVersion": {"type": "string"}, "kind": {}}}),  # a schema
        json.dumps({"apiVersion": "v1"}),  # no kind
        "name: x\napiVersion: 1\n",  # YAML, no kind
    ],
)
def test_other_json_is_skipped(tmp_path: Path, text: str) -> None:
    assert not probe(tmp_path, text)


def test_undecodable_bytes_are_read_when_they_may_name_the_key(tmp_path: Path) -> None:
    """The loader then says why the file cannot be scanned (not UTF-8)."""
    assert probe(tmp_path, json.dumps(POD).encode("utf-16"))
    assert probe(tmp_path, b'{"apiVersion": "v1", "x": "\xff"}')
    assert not probe(tmp_path, b'{"name": "\xff"}')


def test_over_the_limit_only_the_bytes_are_looked_at(tmp_path: Path) -> None:
    """A large file is never decoded: read (to be reported as too large) only when
    its bytes may spell the key, wherever it sits, also across chunk boundaries."""
    padding = " " * (3 * jsonprobe._CHUNK)
    assert not probe(tmp_path, '{"packages": {}}' + padding, limit=1024)
    assert probe(tmp_path, padding + json.dumps(POD), limit=1024)
    for cut in range(1, len("\\u0056")):  # the escape starts ``cut`` bytes before a chunk ends
        start = jsonprobe._CHUNK - len('{"api') - cut
        text = " " * start + '{"api\\u0056ersion": "v1"}' + padding
        assert probe(tmp_path, text, limit=1024), cut


def test_json_without_the_key_costs_one_pass_over_its_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A large lockfile is neither JSON- nor YAML-decoded: the byte test settles it."""
    calls: list[str] = []

    def counting(name: str, function: Any) -> Any:
        def wrapper(*args: Any) -> Any:
            calls.append(name)
            return function(*args)

        return wrapper

    monkeypatch.setattr(jsonprobe, "_json_values", counting("json", jsonprobe._json_values))
    monkeypatch.setattr(jsonprobe, "may_hold_objects", counting("yaml", jsonprobe.may_hold_objects))
    lock = {f"node_modules/p{index}": {"version": "1.0.0"} for index in range(50_000)}
    assert not probe(tmp_path, json.dumps({"packages": lock}, indent=2))
    assert calls == []
    assert probe(tmp_path, json.dumps(POD)) and calls == ["json"]


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b'"apiVersion"', True),
        (b'"\\u0041"', True),
        (b'"\\U00000061"', True),
        (b'"\\x7a"', True),
        (b'"a\\\nb"', True),
        (b"a\0p", True),
        (b'"\\u00e9 \\u0031 \\n \\t"', False),
        (b'"\\\\u0061"', False),  # an escaped backslash, then the text u0061
        (b'"\\\\\\u0061"', True),  # an escaped backslash, then an escaped letter
        (b'{"version": 1}', False),
    ],
)
def test_names_key(data: bytes, expected: bool) -> None:
    assert names_key(data) is expected
