"""Integers, keys and scalars of snapshots and list responses as the API server
stores them (scanner/sources/yaml/numbers.py; YAML snapshots as manifests are read): CEL
can represent every value an audit reads, so a rule gives the same answer whether
guards, field selection or CEL decide it.

No cluster is available here: the snapshots are written by the tests, and the list
response is decoded as the live reader decodes it (the live path itself is tested
against the local API server in tests/audit/test_live.py).
"""

from __future__ import annotations

import datetime
import json
import textwrap
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scanner.audit import run as audit
from scanner.cel import cpp_available
from scanner.errors import UsageError
from scanner.evaluate.optimize import guards, projection
from scanner.pipeline import ScanOptions, load_ruleset
from scanner.sources import apihttp, snapshot
from scanner.sources.yaml import numbers
from scanner.sources.yaml.document import parse_plain

NOW = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
BIG = 2**64  # past int64
HUGE = "9" * 400  # past float64 too
ENORMOUS = "7" * 5000  # past what int() parses


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("0", 0),
        ("-42", -42),
        ("9" * 18, int("9" * 18)),  # the longest run msgspec decodes alone
        ("1" + "0" * 18, 10**18),  # 19 digits: the standard parser, the same value
        (str(2**63 - 1), 2**63 - 1),
        (str(-(2**63)), -(2**63)),
        (str(2**63), float(2**63)),
        (str(BIG), float(BIG)),
        ("1" + "0" * 308, 1e308),  # the largest power of ten float64 holds
        (HUGE, HUGE),
        (ENORMOUS, ENORMOUS),
    ],
)
def test_json_integers_are_read_the_api_servers_way(text: str, value: object) -> None:
    read = numbers.loads(f'{{"n": {text}}}')["n"]
    assert read == value and type(read) is type(value)


@pytest.mark.parametrize(
    ("text", "check"),
    [
        ('{"n": NaN}', lambda n: n != n),  # what json.loads accepts and msgspec refuses
        ('{"n": "\\ud800x"}', lambda n: n == "\ud800x"),  # surrogates.py replaces it later
        ('{"n": 1, "n": 2}', lambda n: n == 2),  # the last of duplicate keys, either way
    ],
)
def test_what_msgspec_refuses_the_standard_parser_reads(text: str, check: Any) -> None:
    assert check(numbers.loads(text)["n"])


@pytest.mark.parametrize(
    ("text", "long"),
    [
        ('{"image": "r/a@sha256:1234567890123456789012abc"}', False),  # a digest's digits
        ('{"image": "r/a@sha256:abc1234567890123456789012"}', False),
        ('{"n": 123456789012345678}', False),  # 18 digits always fit int64
        ('{"n": 1234567890123456789}', True),
        ('{"n":-1234567890123456789 }', True),
        ("[1,\n  12345678901234567890]", True),
        ("12345678901234567890", True),
        ('{"n": 12345678901234567890.5}', False),  # a float either way
        ('{"note": "id:1234567890123456789,x"}', True),  # looks like one: parsed slowly
    ],
)
def test_integers_that_may_not_fit_send_a_document_to_the_standard_parser(
    text: str, long: bool
) -> None:
    assert numbers._may_hold_long_integer(text.encode()) is long
    assert numbers.loads(text) == json.loads(text, parse_int=numbers.json_int)


def test_a_plain_document_never_reaches_the_standard_parser(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("json.loads called")

    monkeypatch.setattr(json, "loads", refuse)
    text = json.dumps({"items": [pod("a", 7)], "image": "r@sha256:" + "1" * 64})
    assert numbers.loads(text.encode())["items"][0]["spec"]["priority"] == 7


def test_a_snapshot_with_nul_bytes_is_invalid_json_not_utf_32(tmp_path: Path) -> None:
    """Given bytes, json.loads guesses UTF-16 or UTF-32 from NUL bytes: the standard
    parser reads the snapshot's text, as it did before msgspec."""
    path = tmp_path / "snap.json"
    path.write_bytes(b"{\0\0\0\0")
    with pytest.raises(UsageError, match=r"snap.json:1:2: invalid JSON"):
        snapshot.read(str(path))


def test_malformed_json_keeps_the_standard_parsers_position() -> None:
    with pytest.raises(json.JSONDecodeError) as raised:
        numbers.loads('{"a": 1,\n "b": }')
    assert (raised.value.lineno, raised.value.colno) == (2, 7)


def pod(name: str, priority: object) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "team"},
        "spec": {"priority": priority, "containers": [{"name": "c", "image": "busybox"}]},
    }


def test_a_json_snapshot_holds_no_integer_cel_cannot_represent(tmp_path: Path) -> None:
    path = tmp_path / "snap.json"
    items = [pod("a", "BIG"), pod("b", "ENORMOUS")]
    text = json.dumps({"apiVersion": "v1", "kind": "List", "items": items})
    text = text.replace('"BIG"', str(BIG)).replace('"ENORMOUS"', ENORMOUS)
    path.write_text(text)
    objects = snapshot.read(str(path)).objects
    assert [o["spec"]["priority"] for o in objects] == [float(BIG), ENORMOUS]


def test_a_yaml_snapshot_reads_integers_and_keys_as_manifests_do(tmp_path: Path) -> None:
    path = tmp_path / "snap.yaml"
    path.write_text(
        textwrap.dedent(
            f"""\
            apiVersion: v1
            kind: Pod
            metadata:
              name: a
              namespace: team
              labels: {{~: x, 80: http, true: "y"}}
            spec:
              priority: {BIG}
              overhead: 0x10
              containers: [{{name: c, image: busybox}}]
            """
        )
    )
    (body,) = snapshot.read(str(path)).objects
    assert body["metadata"]["labels"] == {"null": "x", "80": "http", "true": "y"}
    assert body["spec"]["priority"] == float(BIG) and body["spec"]["overhead"] == 16


def test_a_yaml_snapshot_reads_every_scalar_as_a_manifest_does(tmp_path: Path) -> None:
    """Timestamps stay text, !!binary is its text, sets and ordered maps are maps and
    lists of maps: what the API server stores, and what CEL can hold."""
    text = textwrap.dedent(
        """\
        apiVersion: v1
        kind: Pod
        metadata: {name: a, creationTimestamp: 2025-01-01T00:00:00Z, labels: {~: x, 80: h}}
        spec:
          data: !!binary aGVsbG8=
          day: 2020-01-01
          keys: !!set {a, b}
          ordered: !!omap [{a: 1}, {b: 2}]
          flags: [~, yes, off, 1.5, .inf, 0x1F, 0o17, 18446744073709551616]
        """
    )
    path = tmp_path / "snap.yaml"
    path.write_text(text)
    (body,) = snapshot.read(str(path)).objects
    ((manifest, _),), problems = parse_plain(text)
    assert not problems and body == manifest
    assert body["metadata"]["creationTimestamp"] == "2025-01-01T00:00:00Z"
    assert body["spec"]["data"] == "hello" and body["spec"]["keys"] == {"a": None, "b": None}


def test_a_mapping_used_as_a_key_is_a_usage_error_with_its_position(tmp_path: Path) -> None:
    path = tmp_path / "snap.yaml"
    path.write_text("apiVersion: v1\nkind: Pod\nmetadata:\n  ? [a, b]\n  : x\n")
    with pytest.raises(Exception, match=r"snap\.yaml:4:\d+: .*scalar keys"):
        snapshot.read(str(path))


def test_nul_in_snapshot_strings_reads_as_in_manifests(tmp_path: Path) -> None:
    """cel-cpp ends a string at NUL, a guard would not: both see U+FFFD instead."""
    path = tmp_path / "snap.json"
    item = pod("a", 1)
    item["spec"] = {"schedulerName": "default-scheduler\u0000-evil"}
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [item]}))
    (body,) = snapshot.read(str(path)).objects
    assert body["spec"]["schedulerName"] == "default-scheduler\ufffd-evil"


def test_a_list_response_is_decoded_the_same_way() -> None:
    data = f'{{"kind": "PodList", "items": [{{"spec": {{"priority": {BIG}}}}}]}}'.encode()
    assert apihttp.decode(data)["items"][0]["spec"]["priority"] == float(BIG)
    assert apihttp.decode(b'{"items": ["a\\u0000b"]}')["items"] == ["a\ufffdb"]
    with pytest.raises(ValueError, match="nested too deeply"):
        apihttp.decode(b'{"a": ' + b"[" * 5000 + b'"\\ud800"' + b"]" * 5000 + b"}")


RULES = {
    # a guard decides the condition; the body does not read the object
    "ACME301": ("workload.gpu", '[{"message": "gpu workload"}]'),
    # the activation holds only workload.gpu
    "ACME302": (None, 'workload.gpu ? [{"message": "gpu"}] : [{"message": "cpu"}]'),
    # reads the object, whose spec holds the large integer
    "ACME303": (None, '[{"message": string(object.spec.priority)}]'),
}


@pytest.mark.skipif(not cpp_available(), reason="cel-expr-python not installed")
def test_findings_on_a_large_integer_do_not_depend_on_guards_or_fields(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rules = tmp_path / "rules"
    rules.mkdir()
    for rule_id, (condition, violations) in RULES.items():
        match = f"match:\n  condition: {json.dumps(condition)}\n" if condition else ""
        (rules / f"{rule_id}.yaml").write_text(
            f"id: {rule_id}\nname: large-integer-{rule_id.lower()}\nlevel: warning\n"
            "summary: Reads a pod with a large integer.\ndescription: For the test.\n"
            f"remediation: None.\nsubject: {'object' if rule_id == 'ACME303' else 'workload'}\n"
            f"{match}violations: {json.dumps(violations)}\n"
        )
    ruleset = load_ruleset(ScanOptions(rule_dirs=[rules], engine="cpp", include_bundled=False))
    items = [pod(f"p{i}", "BIG" if i == 0 else 1) for i in range(20)]
    for item in items:
        spec = item["spec"]
        assert isinstance(spec, dict)
        spec["containers"] = [
            {"name": "c", "image": "busybox", "resources": {"limits": {"nvidia.com/gpu": 1}}}
        ]
    path = tmp_path / "snap.json"
    text = json.dumps({"apiVersion": "v1", "kind": "List", "items": items})
    path.write_text(text.replace('"BIG"', str(BIG)))
    capture = snapshot.read(str(path))

    def run() -> list[tuple[str, str, str, str]]:
        report, _ = audit.evaluate(capture, ruleset, now=NOW)
        return [(f.rule_id, f.location.uri, f.message, f.outcome.value) for f in report.findings]

    optimized = run()
    monkeypatch.setattr(guards, "ENGINES", frozenset())
    monkeypatch.setattr(projection, "ENGINES", frozenset())
    plain = run()
    assert optimized == plain
    first = [f for f in plain if f[1].endswith("/p0")]
    assert {f[3] for f in first} == {"fail"}  # no rule errors on the large integer
    assert ("ACME303", first[-1][1], "1.8446744073709552e+19", "fail") in first


_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.sampled_from([2**63 - 1, 2**63, -(2**63), -(2**63) - 1, 10**18, 2**64])
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(alphabet='0123456789ab:,[]{}"\\ -.e', max_size=40)
)
_DOCUMENTS = st.recursive(
    _SCALARS,
    lambda inner: (
        st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=8), inner, max_size=5)
    ),
    max_leaves=25,
)


@settings(max_examples=300, deadline=None)
@given(_DOCUMENTS, st.sampled_from([None, 0, 2]))
def test_msgspec_and_the_standard_parser_read_every_document_alike(
    document: object, indent: int | None
) -> None:
    """Whichever parser reads a document, the values are those of ``json.loads`` with
    integers read the API server's way: the fast path changes nothing but speed."""
    text = json.dumps(document, indent=indent, separators=None if indent else (",", ":"))
    expected = json.loads(text, parse_int=numbers.json_int)
    read = numbers.loads(text.encode())
    assert read == expected
    assert _types(read) == _types(expected)


def _types(value: object) -> object:
    if isinstance(value, dict):
        return {key: _types(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_types(item) for item in value]
    return type(value).__name__
