"""Lone surrogates spelled as JSON escapes in a snapshot or an API response become
U+FFFD, as the API server's own (Go, UTF-8) encoding would; every report can then
be written. Pairs stay the character they spell."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_run import poolgate

from scanner.sources.snapshot import read
from scanner.sources.yaml import surrogates

POD = (
    '{"apiVersion": "v1", "kind": "List", "items": [{"apiVersion": "v1", "kind": "Pod",'
    ' "metadata": {"name": "x\\ud800y", "namespace": "ml", "labels": {"k\\udfff": "\\ud83d\\ude80"}},'
    ' "spec": {"containers": [{"name": "c", "image": "img:1"}]}}]}'
)


def test_lone_surrogates_become_replacement_characters_and_pairs_stay(tmp_path: Path) -> None:
    path = tmp_path / "dump.json"
    path.write_text(POD, encoding="utf-8")
    [pod] = read(str(path)).objects
    assert pod["metadata"]["name"] == "x\ufffdy"
    assert pod["metadata"]["labels"] == {"k\ufffd": "\U0001f680"}


def test_text_without_surrogate_escapes_is_not_walked() -> None:
    assert not surrogates.may_hold('{"name": "\\u00e9t\\u00e9"}')
    assert surrogates.may_hold(b'{"name": "\\uD800"}')
    assert surrogates.replaced({"a": ["\ud800", 1, None]}) == {"a": ["\ufffd", 1, None]}


@pytest.mark.parametrize("fmt", ["text", "json", "sarif", "github", "junit"])
def test_every_report_is_written(tmp_path: Path, fmt: str) -> None:
    path = tmp_path / "dump.json"
    path.write_text(POD, encoding="utf-8")
    run = poolgate("audit", "--snapshot", str(path), "--format", fmt)
    assert run.returncode in (0, 1), run.stderr
    assert "Traceback" not in run.stderr
    if fmt in ("json", "sarif"):
        json.loads(run.stdout)
