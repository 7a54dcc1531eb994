"""Hostile YAML and file trees at the source level: what loads, what is refused, what warns.

The whole-command view (every case through ``poolgate scan``) is test_hostile_corpus.py; these
pin down the source behaviour each corpus expectation rests on.
"""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

from scanner.inventory import SourceWarning
from scanner.sources.files import SPECIAL_FILE, load_paths
from scanner.sources.yaml.document import parse_stream
from scanner.sources.yaml.limits import MAX_NODES
from scanner.sources.yaml.notes import LIST_OF_OBJECTS, MAX_TAG_WARNINGS

CONFIGMAP = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n"


def test_custom_tags_are_ignored_and_reported_once_each_at_first_use() -> None:
    text = CONFIGMAP.format(name="tags") + textwrap.dedent(
        """\
        data:
          run: !!python/object/apply:os.system ["touch /tmp/x"]
          again: !!python/object/apply:os.system ["touch /tmp/y"]
          local: !mine {a: 1}
          anchored: &a !mine2 x
          alias: *a
          plain: !!str 42
        """
    )
    inventory = parse_stream(text, "tags.yaml")
    assert inventory.objects[0].body["data"] == {
        "run": ["touch /tmp/x"],
        "again": ["touch /tmp/y"],
        "local": {"a": 1},
        "anchored": "x",
        "alias": "x",
        "plain": "42",
    }
    ignored = "ignored: the value is read as plain data, as Kubernetes reads it"
    assert inventory.warnings == [
        SourceWarning(
            "tags.yaml",
            f"tag !!python/object/apply:os.system {ignored} (nothing is constructed or run)",
            6,
            8,
        ),
        SourceWarning("tags.yaml", f"tag !mine {ignored} (nothing is constructed or run)", 8, 10),
        SourceWarning("tags.yaml", f"tag !mine2 {ignored} (nothing is constructed or run)", 9, 13),
    ]
    assert inventory.invalid == []


def test_tag_warnings_are_capped_per_document() -> None:
    data = "".join(f"  k{index}: !t{index} v\n" for index in range(50))
    inventory = parse_stream(CONFIGMAP.format(name="many") + "data:\n" + data, "many.yaml")
    assert len(inventory.warnings) == MAX_TAG_WARNINGS


def test_binary_values_are_decoded_as_kubernetes_decodes_them() -> None:
    """Otherwise ``namespace: !!binary a3ViZS1zeXN0ZW0=`` would hide kube-system from rules."""
    text = textwrap.dedent(
        """\
        apiVersion: v1
        kind: ConfigMap
        metadata:
          name: b
          namespace: !!binary a3ViZS1zeXN0ZW0=
        data:
          block: !!binary |
            aGVs
            bG8=
          broken: !!binary not-base64!
          nul: !!binary bnZpZGlhAHg=
        """
    )
    inventory = parse_stream(text, "b.yaml")
    obj = inventory.objects[0]
    assert obj.namespace == "kube-system"
    # The NUL decoded from base64 becomes U+FFFD, as a "\0" escape does (found in
    # review: cel-cpp ended "nvidia\0x" at the NUL, so PG103 saw "nvidia").
    assert obj.body["data"] == {"block": "hello", "broken": "not-base64!", "nul": "nvidia\ufffdx"}
    assert inventory.warnings[0] == SourceWarning(
        "b.yaml", "!!binary value decoded from base64, as Kubernetes decodes it", 5, 14
    )


def test_a_yaml_list_of_objects_is_reported_not_scanned() -> None:
    text = "- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: a}\n---\n- just\n- a list\n"
    inventory = parse_stream(text, "list.yaml")
    assert inventory.objects == []
    assert inventory.skipped == 2
    assert inventory.warnings == [SourceWarning("list.yaml", LIST_OF_OBJECTS, 1, 1)]


def test_tab_indentation_says_so() -> None:
    inventory = parse_stream(CONFIGMAP.format(name="t") + "data:\n\tkey: value\n", "tab.yaml")
    (invalid,) = inventory.invalid
    assert (invalid.rule_id, invalid.line, invalid.column) == ("PG001", 6, 1)
    assert invalid.message.endswith("(a tab: YAML indents with spaces only)")
    tab_after_colon = parse_stream(CONFIGMAP.format(name="t") + "data:\n  key:\tvalue\n", "t.yaml")
    assert tab_after_colon.invalid == []  # a tab that is not indentation is fine


def test_a_huge_document_without_aliases_is_not_blamed_on_aliases() -> None:
    items = ",".join(["0"] * (MAX_NODES + 1))
    inventory = parse_stream(CONFIGMAP.format(name="big") + f"data:\n  l: [{items}]\n", "b.yaml")
    (invalid,) = inventory.invalid
    assert (invalid.rule_id, invalid.message) == (
        "PG001",
        "document has more than 1,000,000 nodes (limit)",
    )


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes on this platform")
def test_named_pipes_in_a_walk_are_reported_and_never_opened(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.yaml")  # opening it would block until a writer appears
    os.mkfifo(tmp_path / "pipe.txt")  # not a manifest name: not even mentioned
    (tmp_path / "ok.yaml").write_text(CONFIGMAP.format(name="ok"))
    inventory = load_paths([str(tmp_path)], tmp_path)
    assert [obj.name for obj in inventory.objects] == ["ok"]
    assert inventory.warnings == [SourceWarning("pipe.yaml", SPECIAL_FILE)]
    assert inventory.read_errors == []


def test_a_device_named_on_the_command_line_is_bounded_by_the_size_limit(tmp_path: Path) -> None:
    if not os.path.exists("/dev/zero"):
        pytest.skip("no /dev/zero")
    inventory = load_paths(["/dev/zero"], tmp_path, max_file_size=4096)
    assert [(error.uri, error.message) for error in inventory.read_errors] == [
        ("/dev/zero", "file is larger than 4,096 bytes; skipped")
    ]


def test_alias_amplification_is_bounded_by_the_text_length() -> None:
    """A 14 KB document of references to one big anchor stays under the node limit
    (990,000 nodes) yet would take 220 MB; each document may add one node per character."""
    anchor = "a: &a [" + ", ".join(["x"] * 999) + "]"
    refs = "".join(f"  r{index}: *a\n" for index in range(990))
    text = CONFIGMAP.format(name="quadratic") + f"data:\n  {anchor}\n{refs}"
    (invalid,) = parse_stream(text, "q.yaml").invalid
    assert (invalid.rule_id, invalid.line, invalid.column) == ("PG001", 1, 1)
    assert invalid.message == (
        f"aliases add 990,000 nodes to a document of {len(text):,} characters "
        "(limit: one added node per character)"
    )
    # Anchors used the way people use them (shared env, resources) stay well inside it.
    shared = CONFIGMAP.format(name="shared") + "data:\n  a: &env {A: '1', B: '2'}\n"
    shared += "".join(f"  u{index}: *env\n" for index in range(20))
    inventory = parse_stream(shared, "s.yaml")
    assert inventory.invalid == []
    assert inventory.objects[0].body["data"]["u19"] == {"A": "1", "B": "2"}


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("9223372036854775807", 9223372036854775807),  # int64 max stays an integer
        ("9223372036854775808", 9.223372036854776e18),  # past it: a float, as the API
        ("-9223372036854775809", -9.223372036854776e18),  # server's JSON decoding has it
        ("0xffffffffffffffffffff", 1.2089258196146292e24),
        ("1" + "0" * 400, "1" + "0" * 400),  # past any float: the text
    ],
)
def test_integers_outside_int64_are_floats_as_in_kubernetes(text: str, value: object) -> None:
    """Found by test_fuzz: cel-python failed (an internal error) on metadata.name: 2**63."""
    inventory = parse_stream(CONFIGMAP.format(name="big") + f"data:\n  big: {text}\n", "big.yaml")
    assert inventory.objects[0].body["data"]["big"] == value


def test_nul_characters_are_replaced_so_no_engine_cuts_a_string_short() -> None:
    """Found by test_fuzz: cel-expr-python reads "ab\\0cd" as "ab"; cel-python reads it whole."""
    text = CONFIGMAP.format(name="nul") + textwrap.dedent(
        """\
        data:
          plain: 'single-quoted \\0 is no escape'
          value: "nvidia\\0evil"
          "key\\u0000": "x\\x00y"
        """
    )
    inventory = parse_stream(text, "n.yaml")
    assert inventory.objects[0].body["data"] == {
        "plain": "single-quoted \\0 is no escape",
        "value": "nvidia\ufffdevil",
        "key\ufffd": "x\ufffdy",
    }
    (warning,) = inventory.warnings
    assert (warning.line, warning.column) == (7, 3)
    assert warning.message.startswith("a NUL character (\\0) in this value is read as U+FFFD")


def test_an_integer_just_below_two_to_the_1024_does_not_overflow_a_float() -> None:
    """float(2**1024 - 1) raises OverflowError: such a number stays text."""
    text = str(2**1024 - 1)
    inventory = parse_stream(CONFIGMAP.format(name="big") + f"data:\n  big: {text}\n", "big.yaml")
    assert inventory.objects[0].body["data"]["big"] == text
