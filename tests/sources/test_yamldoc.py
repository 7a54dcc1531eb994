"""parse_stream: values, positions and every way a document can go wrong."""

from __future__ import annotations

import gc
import json
import math
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from scanner.inventory import InvalidDocument, Inventory, KubeObject, ObjectRef, Origin
from scanner.sources.yaml import document as yamldoc
from scanner.sources.yaml.document import _Loader, parse_plain, parse_stream
from scanner.sources.yaml.limits import first_too_deep, may_nest_deeply

REPO = Path(__file__).resolve().parents[2]

DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: trainer
  namespace: ml
  labels:
    app.kubernetes.io/name: trainer
    "quoted key": x
spec:
  template:
    spec:
      containers:
        - name: main
          image: registry.example.com/trainer:1
          args: ["--epochs", "3"]
        - name: sidecar
          image: busybox
          securityContext:
            privileged: true
"""

CONFIGMAP = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: {name}
"""


def parse(text: str, uri: str = "k8s/app.yaml") -> Inventory:
    """``parse_stream`` on dedented text, so tests can indent their YAML."""
    return parse_stream(textwrap.dedent(text), uri)


def only_object(inventory: Inventory) -> KubeObject:
    assert len(inventory.objects) == 1, inventory
    return inventory.objects[0]


def only_invalid(inventory: Inventory) -> InvalidDocument:
    assert len(inventory.invalid) == 1, inventory.invalid
    return inventory.invalid[0]


# --- values and positions ----------------------------------------------------------


def test_object_body_origin_and_identity() -> None:
    inventory = parse(DEPLOYMENT)
    obj = only_object(inventory)
    assert obj.ref == ObjectRef("apps/v1", "Deployment", "ml", "trainer")
    assert obj.origin == Origin("k8s/app.yaml", 0, 1, 1, "file")
    containers = obj.body["spec"]["template"]["spec"]["containers"]
    assert containers[0]["args"] == ["--epochs", "3"]
    assert containers[1]["securityContext"] == {"privileged": True}
    assert inventory.invalid == [] and inventory.skipped == 0


@pytest.mark.parametrize(
    ("path", "position"),
    [
        ("", (1, 1)),
        ("kind", (2, 1)),
        ("metadata.name", (4, 3)),
        # a mapping entry points at its key, wherever the value is
        ("spec.template.spec.containers", (12, 7)),
        ("spec.template.spec.containers[1].securityContext.privileged", (19, 13)),
        # a sequence item points at the item itself
        ("spec.template.spec.containers[1]", (16, 11)),
        ("spec.template.spec.containers[0].args[1]", (15, 30)),
        # keys that are not identifiers are quoted in paths
        ("metadata.labels['app.kubernetes.io/name']", (7, 5)),
        ("metadata.labels['quoted key']", (8, 5)),
    ],
)
def test_positions_are_one_based_and_point_at_keys_or_items(
    path: str, position: tuple[int, int]
) -> None:
    obj = only_object(parse(DEPLOYMENT))
    assert obj.lines.positions[path] == position


def test_missing_path_falls_back_to_nearest_ancestor() -> None:
    obj = only_object(parse(DEPLOYMENT))
    assert obj.position("spec.template.spec.containers[1].securityContext.runAsUser") == (18, 11)


def test_every_path_in_the_body_has_a_position() -> None:
    obj = only_object(parse(DEPLOYMENT))
    expected = {""} | set(_paths(obj.body))
    assert set(obj.lines.positions) == expected


def _paths(value: Any, prefix: str = "") -> list[str]:
    from scanner.inventory import join_path

    found: list[str] = []
    if isinstance(value, dict):
        for key, child in value.items():
            path = join_path(prefix, key)
            found += [path, *_paths(child, path)]
    elif isinstance(value, list):
        for index, child in enumerate(value):
            path = join_path(prefix, index)
            found += [path, *_paths(child, path)]
    return found


def test_keys_and_paths_are_one_string_across_documents() -> None:
    """What makes a loader child's pickle small (scanner/sources/parallel.py): pickle
    writes a string object once, so keys and paths must be shared, not equal copies."""
    first, second = parse(DEPLOYMENT).objects[0], parse(DEPLOYMENT).objects[0]
    assert next(iter(first.body)) is next(iter(second.body))  # "apiVersion"
    path = "spec.template.spec.containers[1].securityContext.privileged"
    first_path = next(key for key in first.lines.positions if key == path)
    second_path = next(key for key in second.lines.positions if key == path)
    assert first_path is second_path


def test_the_path_cache_empties_past_its_bound_and_answers_the_same(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from scanner.sources.yaml import walk as yamlwalk

    before = only_object(parse(DEPLOYMENT))
    monkeypatch.setattr(yamlwalk, "_PATH_CACHE_CHARS", 10)
    wide = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata:\n" + "".join(
        f"  k{index}: v\n" for index in range(50)
    )
    assert only_object(parse(wide)).body["data"]["k49"] == "v"
    assert yamlwalk._PATHS.made > 10
    after = only_object(parse(DEPLOYMENT))  # the walk after this one starts empty
    assert yamlwalk._PATHS.made == sum(len(path) for path in after.lines.positions)
    assert after.body == before.body
    assert dict(after.lines.positions) == dict(before.lines.positions)


def test_a_longer_list_under_a_known_path_gets_every_item_path() -> None:
    short = "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec: {args: [a, b]}\n"
    long = "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec: {args: [a, b, c, d]}\n"
    only_object(parse(short))
    obj = only_object(parse(long))
    assert [obj.lines.positions[f"spec.args[{index}]"] for index in range(4)] == [
        (4, 15),
        (4, 18),
        (4, 21),
        (4, 24),
    ]


def test_crlf_line_endings_give_the_same_positions() -> None:
    lf = only_object(parse(DEPLOYMENT))
    crlf = only_object(parse_stream(DEPLOYMENT.replace("\n", "\r\n"), "k8s/app.yaml"))
    assert crlf.lines.positions == lf.lines.positions
    assert crlf.body == lf.body


def test_utf8_bom_is_stripped() -> None:
    obj = only_object(parse_stream("\ufeff" + DEPLOYMENT, "k8s/app.yaml"))
    assert obj.kind == "Deployment"
    assert obj.origin.line == 1 and obj.origin.column == 1


def test_columns_count_characters_not_bytes() -> None:
    obj = only_object(parse(CONFIGMAP.format(name="x") + 'data: {"é": a, b: c}\n'))
    assert obj.lines.positions["data.b"] == (5, 16)


def test_flow_mapping_root_origin_is_its_first_key() -> None:
    obj = only_object(parse("{apiVersion: v1, kind: Namespace, metadata: {name: ml}}\n"))
    assert (obj.origin.line, obj.origin.column) == (1, 2)


def test_json_parses_like_yaml() -> None:
    text = '{\n  "apiVersion": "v1",\n  "kind": "Namespace",\n  "metadata": {"name": "ml"}\n}\n'
    obj = only_object(parse_stream(text, "ns.json"))
    assert obj.ref.logical_name == "Namespace/ml"
    assert obj.lines.positions["metadata.name"] == (4, 16)


# --- streams and lists -------------------------------------------------------------


def test_multi_document_stream_keeps_document_indexes() -> None:
    text = "\n---\n".join(
        [
            CONFIGMAP.format(name="a"),
            "",  # empty document: ignored, not counted, but it keeps its index
            CONFIGMAP.format(name="b"),
        ]
    )
    inventory = parse_stream(text, "all.yaml")
    assert [(o.name, o.origin.document_index, o.origin.line) for o in inventory.objects] == [
        ("a", 0, 1),
        ("b", 2, 9),
    ]
    assert inventory.skipped == 0


def test_non_kubernetes_documents_are_skipped_and_counted() -> None:
    text = "\n---\n".join(
        [
            "on: push\njobs: {}",  # a CI workflow
            "- just\n- a list",
            "plain scalar",
            "apiVersion: v1\nkind: 3",  # kind is not a string
            "kind: ConfigMap",  # no apiVersion
            "# only a comment",
            CONFIGMAP.format(name="real"),
        ]
    )
    inventory = parse_stream(text, "mixed.yaml")
    assert [o.name for o in inventory.objects] == ["real"]
    assert inventory.skipped == 5
    assert inventory.invalid == []


def test_list_items_become_objects_with_prefixed_line_maps() -> None:
    inventory = parse(
        """\
        apiVersion: v1
        kind: List
        metadata: {}
        items:
          - apiVersion: v1
            kind: ConfigMap
            metadata:
              name: first
          - just a string
          - apiVersion: v1
            kind: Secret
            metadata:
              name: second
        """
    )
    first, second = inventory.objects
    assert (first.kind, first.name, second.kind, second.name) == (
        "ConfigMap",
        "first",
        "Secret",
        "second",
    )
    assert second.lines.prefix == "items[2]"
    assert second.origin == Origin("k8s/app.yaml", 0, 10, 5, "file")
    # rules address the item from its own root; the line map adds the prefix
    assert second.position("metadata.name") == (13, 7)
    assert second.position("") == (10, 5)
    assert first.lines.positions is second.lines.positions
    assert inventory.skipped == 1  # the string item
    assert inventory.invalid == []


def test_typed_lists_are_unpacked() -> None:
    inventory = parse(
        """\
        apiVersion: apps/v1
        kind: DeploymentList
        metadata: {resourceVersion: "1"}
        items:
          - {apiVersion: apps/v1, kind: Deployment, metadata: {name: a}}
        """
    )
    assert [o.name for o in inventory.objects] == ["a"]


def test_an_object_whose_kind_ends_in_list_is_not_unpacked() -> None:
    obj = only_object(
        parse(
            """\
            apiVersion: example.com/v1
            kind: AllowList
            metadata: {name: egress}
            items: [a, b]
            """
        )
    )
    assert obj.kind == "AllowList"


# --- scalars and tags --------------------------------------------------------------


def test_scalars_resolve_like_pyyaml_safe_loader() -> None:
    data = only_object(
        parse(
            CONFIGMAP.format(name="x")
            + textwrap.dedent(
                """\
                data:
                  decimal: 42
                  signed: -17
                  underscores: 1_000
                  hex: 0x1F
                  octal: 017
                  explicit-octal: !!int 0o17
                  binary: 0b101
                  base60: 1:30
                  float: 1.5
                  exponent: 6.8523015e+5
                  inf: .inf
                  neg-inf: -.Inf
                  nan: .NaN
                  yes: yes
                  off: Off
                  true: true
                  nothing: ~
                  empty:
                  quoted-int: "42"
                  explicit-str: !!str 42
                  not-a-number: !!int abc
                  timestamp: 2001-12-14
                  binary-tag: !!binary aGk=
                  custom: !thing value
                """
            )
        )
    ).body["data"]
    assert data == {
        "decimal": 42,
        "signed": -17,
        "underscores": 1000,
        "hex": 31,
        "octal": 15,
        "explicit-octal": 15,
        "binary": 5,
        "base60": 90,
        "float": 1.5,
        "exponent": 685230.15,
        "inf": math.inf,
        "neg-inf": -math.inf,
        "nan": data["nan"],
        "true": True,  # the key "yes" is a bool, spelled as JSON would
        "false": False,
        "nothing": None,
        "empty": None,
        "quoted-int": "42",
        "explicit-str": "42",
        "not-a-number": "abc",
        "timestamp": "2001-12-14",
        "binary-tag": "hi",  # decoded, as Kubernetes decodes it (yamlnotes.py)
        "custom": "value",
    }
    assert math.isnan(data["nan"])


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("0", 0),
        ("7", 7),
        ("010", 8),  # YAML 1.1 octal, not the decimal fast path
        ("123456789012345678", 123456789012345678),  # 18 digits: the fast path
        ("9223372036854775807", 9223372036854775807),  # int64's largest
        ("9223372036854775808", 9.223372036854776e18),  # past it: a float, as the API server
    ],
)
def test_integers_past_the_plain_decimal_fast_path(text: str, value: object) -> None:
    body = only_object(parse(CONFIGMAP.format(name="x") + f"data: {{count: {text}}}\n")).body
    assert body["data"]["count"] == value
    assert type(body["data"]["count"]) is type(value)


def test_huge_integers_stay_strings() -> None:
    digits = "9" * 5000
    data = only_object(parse(CONFIGMAP.format(name="x") + f"data: {{big: {digits}}}\n")).body
    assert data["data"]["big"] == digits


def test_non_string_keys_are_spelled_like_json() -> None:
    data = only_object(
        parse(CONFIGMAP.format(name="x") + "data: {80: http, 0x10: hex, ~: x, y: yes}\n")
    )
    # go-yaml v2 reads ``y`` as true, so Kubernetes spells that key "true".
    assert data.body["data"] == {"80": "http", "16": "hex", "null": "x", "true": True}
    assert data.lines.positions["data['80']"] == (5, 8)


def test_python_tags_construct_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    inventory = parse(
        CONFIGMAP.format(name="x")
        + textwrap.dedent(
            f"""\
            data:
              scalar: !!python/object/apply:os.system "touch {marker}"
              sequence: !!python/object/apply:os.system ["touch {marker}"]
              name: !!python/name:os.system
              mapping: !!python/object/new:os.system {{args: ["touch {marker}"]}}
            """
        )
    )
    data = only_object(inventory).body["data"]
    assert not marker.exists()
    # scalars keep their text; collections keep their plain structure, tag dropped
    assert data == {
        "scalar": f"touch {marker}",
        "sequence": [f"touch {marker}"],
        "name": "",
        "mapping": {"args": [f"touch {marker}"]},
    }


def test_merge_keys_follow_yaml_1_1() -> None:
    obj = only_object(
        parse(
            """\
            apiVersion: v1
            kind: ConfigMap
            metadata: {name: merged}
            x-base: &base
              a: base
              b: base
            x-other: &other
              b: other
              c: other
            data:
              <<: [*base, *other]
              a: explicit
            """
        )
    )
    assert obj.body["data"] == {"a": "explicit", "b": "base", "c": "other"}
    assert obj.lines.positions["data.a"] == (12, 3)  # the explicit key
    assert obj.lines.positions["data.b"] == (6, 3)  # from the first source, which wins
    assert obj.lines.positions["data.c"] == (9, 3)
    assert obj.lines.positions["data"] == (10, 1)


def test_merge_order_of_several_merge_keys_and_nested_merges() -> None:
    """Values are pinned, not compared with PyYAML: PyYAML 6.0.4 changed its answer for
    several ``<<`` keys and for a merge inside a merged mapping (``nested.k`` became
    ``a``, dropping the inner mapping's own key). go-yaml, which kubectl uses, applies
    entries in document order and a mapping's own keys over the ones it merges."""
    text = textwrap.dedent(
        """\
        apiVersion: v1
        kind: ConfigMap
        metadata: {name: merged}
        a: &a {k: a, only-a: 1}
        b: &b {k: b, only-b: 2}
        c: &c {k: c, only-c: 3}
        data:
          <<: [*a, *b]
          <<: *c
          own: 0
        nested:
          <<: {<<: *a, k: inner}
        """
    )
    body = only_object(parse_stream(text, "x")).body
    assert body["data"] == {"k": "c", "only-a": 1, "only-b": 2, "only-c": 3, "own": 0}
    assert body["nested"] == {"k": "inner", "only-a": 1}


def test_merge_keys_apply_in_document_order_as_kubernetes_does() -> None:
    """kubectl (go-yaml v2) writes entries in order: a ``<<`` after an explicit key
    overrides it, where PyYAML would keep the explicit one."""
    obj = only_object(
        parse(
            """\
            apiVersion: v1
            kind: Pod
            metadata: {name: m}
            x-priv: &priv {privileged: true, runAsUser: 0}
            spec:
              containers:
                - name: c
                  securityContext:
                    privileged: false
                    <<: *priv
                    runAsUser: 1000
            """
        )
    )
    context = obj.body["spec"]["containers"][0]["securityContext"]
    assert context == {"privileged": True, "runAsUser": 1000}
    path = "spec.containers[0].securityContext"
    assert obj.lines.positions[f"{path}.privileged"] == (4, 16)  # the merged key, last written
    assert obj.lines.positions[f"{path}.runAsUser"] == (11, 9)  # the explicit key after it


def test_a_duplicate_key_across_a_merge_is_still_reported() -> None:
    inventory = parse(
        CONFIGMAP.format(name="x") + "base: &b {k: 1}\ndata:\n  a: 1\n  <<: *b\n  a: 2\n"
    )
    [duplicate] = [doc for doc in inventory.invalid if doc.rule_id == "PG002"]
    assert "duplicate key 'a'" in duplicate.message


@pytest.mark.parametrize(
    ("spelling", "value"), [("y", True), ("Y", True), ("n", False), ("N", False), ('"y"', "y")]
)
def test_one_letter_booleans_read_as_kubernetes_reads_them(spelling: str, value: object) -> None:
    obj = only_object(parse(CONFIGMAP.format(name="x") + f"data:\n  flag: {spelling}\n"))
    assert obj.body["data"]["flag"] == value


def test_aliases_are_walked_under_their_own_paths() -> None:
    obj = only_object(
        parse(
            """\
            apiVersion: v1
            kind: Pod
            metadata: {name: p}
            spec:
              containers:
                - &c {name: a, image: x}
                - *c
            """
        )
    )
    containers = obj.body["spec"]["containers"]
    assert containers[0] == containers[1] == {"name": "a", "image": "x"}
    assert "spec.containers[1].image" in obj.lines.positions
    # The composed tree keeps no trace of where an alias was used, only the node it
    # names, so aliased content points at its definition.
    assert obj.lines.positions["spec.containers[1]"] == (6, 7)
    assert obj.lines.positions["spec.containers[1].image"] == (6, 20)


def test_parse_stream_agrees_with_safe_load() -> None:
    """Everywhere but the one-letter booleans and merge keys after explicit keys."""
    text = textwrap.dedent(
        """\
        apiVersion: v1
        kind: ConfigMap
        metadata:
          name: same
          labels: {a: "1", b: 'two', c: three}
        base: &base {x: 1, z: [1, 2.5, true, null, ~, "s"]}
        data:
          <<: *base
          list: [[1, [2, {k: v}]], {}, []]
          block: |
            line one
            line two
          folded: >
            folded
            text
          octal: 0755
          float: -1.5e-3
          enabled: no
        """
    )
    assert only_object(parse_stream(text, "x")).body == yaml.safe_load(text)


# --- PG002 / PG003 -----------------------------------------------------------------


def test_duplicate_key_keeps_last_value_and_reports_second_key() -> None:
    inventory = parse(
        """\
        apiVersion: v1
        kind: ConfigMap
        metadata:
          name: first
          name: second
        """
    )
    obj = only_object(inventory)
    assert obj.name == "second"
    assert obj.lines.positions["metadata.name"] == (5, 3)
    assert only_invalid(inventory) == InvalidDocument(
        rule_id="PG002",
        message="duplicate key 'name' (first at line 4); parsers disagree on which value wins",
        origin=obj.origin,
        line=5,
        column=3,
        ref=ObjectRef("v1", "ConfigMap", "", "second"),
        path="metadata.name",
    )


def test_duplicate_key_in_a_list_item_points_at_the_item() -> None:
    inventory = parse(
        """\
        apiVersion: v1
        kind: List
        items:
          - apiVersion: v1
            kind: ConfigMap
            metadata: {name: cm}
            data: {k: 1, k: 2}
        """
    )
    invalid = only_invalid(inventory)
    assert (invalid.line, invalid.column, invalid.path) == (7, 18, "data.k")
    assert invalid.ref is not None and invalid.ref.name == "cm"
    assert invalid.origin.line == 4
    assert inventory.objects[0].body["data"] == {"k": 2}


def test_each_extra_occurrence_is_reported_once() -> None:
    inventory = parse(
        """\
        apiVersion: v1
        kind: ConfigMap
        metadata: {name: x}
        base: &b {k: 1, k: 2}
        again: *b
        data: {a: 1, a: 2, a: 3}
        """
    )
    assert [(i.line, i.column, i.path) for i in inventory.invalid] == [
        (4, 17, "base.k"),  # the alias walks the same node again: still one finding
        (6, 14, "data.a"),
        (6, 20, "data.a"),
    ]


def test_missing_name_is_pg003_and_the_object_is_kept() -> None:
    inventory = parse("apiVersion: v1\nkind: ConfigMap\ndata: {}\n")
    obj = only_object(inventory)
    assert only_invalid(inventory) == InvalidDocument(
        "PG003",
        "ConfigMap has no metadata.name",
        obj.origin,
        1,
        1,
        ref=ObjectRef("v1", "ConfigMap", "", ""),
        path="metadata.name",
    )


def test_generate_name_is_a_name() -> None:
    inventory = parse("apiVersion: batch/v1\nkind: Job\nmetadata: {generateName: run-}\n")
    assert inventory.invalid == [] and len(inventory.objects) == 1


# --- PG001 -------------------------------------------------------------------------


def test_parse_error_keeps_earlier_documents() -> None:
    text = "\n---\n".join(
        [
            CONFIGMAP.format(name="kept"),
            CONFIGMAP.format(name="[unclosed"),
            CONFIGMAP.format(name="never-read"),
        ]
    )
    inventory = parse_stream(text, "broken.yaml")
    assert [o.name for o in inventory.objects] == ["kept"]
    invalid = only_invalid(inventory)
    assert invalid.rule_id == "PG001"
    assert invalid.message.startswith("YAML does not parse: ")
    assert "while parsing a flow sequence" in invalid.message
    # the unclosed "[" runs into the next document's "---"
    assert (invalid.line, invalid.column) == (12, 1)
    assert invalid.origin == Origin("broken.yaml", 1, 12, 1, "file")


def test_control_character_is_pg001_at_its_position() -> None:
    invalid = only_invalid(parse_stream("apiVersion: v1\nkind: \u00e9\x07\n", "x.yaml"))
    assert invalid.rule_id == "PG001"
    assert "#x0007" in invalid.message
    assert (invalid.line, invalid.column) == (2, 8)


def test_lone_surrogate_is_pg001() -> None:
    invalid = only_invalid(parse_stream("apiVersion: v1\nkind: \ud800\n", "x.yaml"))
    assert (invalid.rule_id, invalid.line, invalid.column) == ("PG001", 2, 7)


def test_json_surrogate_pair_escapes_read_as_the_character_they_spell() -> None:
    """``json.dumps`` writes 😀 as ``\\ud83d\\ude00``, valid JSON the YAML parser
    refused escape by escape (found in review: PG001 and exit 3 for a valid manifest).
    Only in JSON: an escaped backslash before ``u`` is text, and a lone surrogate
    escape stays an error."""
    manifest = json.dumps(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "smile", "annotations": {"a": "😀", "b": "\\ud83d\\ude00"}},
        }
    )
    assert "\\ud83d\\ude00" in manifest
    [obj] = parse_stream(manifest, "k8s/smile.json").objects
    assert obj.metadata["annotations"] == {"a": "😀", "b": "\\ud83d\\ude00"}
    lone = json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "\ud83d"}})
    assert only_invalid(parse_stream(lone, "k8s/lone.json")).rule_id == "PG001"


def _billion_laughs() -> str:
    levels = ["a: &a [" + ", ".join(['"lol"'] * 9) + "]"]
    for previous, name in zip("abcdefgh", "bcdefghi", strict=True):
        levels.append(f"{name}: &{name} [" + ", ".join([f"*{previous}"] * 9) + "]")
    return CONFIGMAP.format(name="lol") + "data:\n" + "".join(f"  {lvl}\n" for lvl in levels)


@pytest.mark.parametrize("bom", ["", "\ufeff"])
def test_billion_laughs_is_refused_quickly(bom: str) -> None:
    started = time.perf_counter()
    inventory = parse_stream(
        bom + _billion_laughs() + "---\n" + CONFIGMAP.format(name="after"), "x"
    )
    assert time.perf_counter() - started < 1.0
    invalid = only_invalid(inventory)
    assert invalid.rule_id == "PG001"
    assert invalid.message == "alias expansion exceeds limit of 1,000,000 nodes"
    assert [o.name for o in inventory.objects] == ["after"]  # the stream goes on


def test_walk_stops_alias_expansion_on_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """The walk counts visits too, in case the up-front check is ever skipped wrongly."""
    monkeypatch.setattr(yamldoc, "check_expansion", lambda root, *limits: None)
    started = time.perf_counter()
    invalid = only_invalid(parse_stream(_billion_laughs(), "bomb.yaml"))
    assert time.perf_counter() - started < 10.0
    assert invalid.message == "alias expansion exceeds limit of 1,000,000 nodes"


def test_recursive_alias_is_refused() -> None:
    invalid = only_invalid(parse(CONFIGMAP.format(name="x") + "data: &loop [*loop]\n"))
    assert invalid.rule_id == "PG001"
    assert "contains it" in invalid.message


def test_self_merging_mapping_is_refused() -> None:
    invalid = only_invalid(parse(CONFIGMAP.format(name="x") + "data: &m {<<: *m}\n"))
    assert invalid.rule_id == "PG001"


def test_merge_of_a_scalar_is_refused() -> None:
    invalid = only_invalid(parse(CONFIGMAP.format(name="x") + "data: {<<: 3}\n"))
    assert (invalid.rule_id, invalid.message) == (
        "PG001",
        "merge key '<<' needs a mapping or a list of mappings",
    )


def test_collection_as_key_is_refused() -> None:
    invalid = only_invalid(parse(CONFIGMAP.format(name="x") + "data: {[a]: b}\n"))
    assert invalid.rule_id == "PG001"
    assert (invalid.line, invalid.column) == (5, 8)


def _nested(depth: int) -> str:
    return CONFIGMAP.format(name="deep") + "data: " + "[" * (depth - 1) + "]" * (depth - 1) + "\n"


def test_nesting_at_the_limit_is_accepted() -> None:
    # root mapping = level 1, "data" = level 2, and so on
    assert parse_stream(_nested(200), "x").invalid == []


def test_nesting_past_the_limit_is_refused_and_the_stream_goes_on() -> None:
    text = _nested(201) + "---\n" + CONFIGMAP.format(name="after")
    inventory = parse_stream(text, "deep.yaml")
    invalid = only_invalid(inventory)
    assert (invalid.rule_id, invalid.message) == ("PG001", "nesting deeper than 200 levels")
    assert (invalid.line, invalid.column) == (5, 206)
    assert [o.name for o in inventory.objects] == ["after"]


_DEEP_SCRIPT = """
import sys
from scanner.sources.yaml.document import parse_stream
inventory = parse_stream(sys.stdin.read(), "deep.yaml")
print([o.name for o in inventory.objects], [(i.rule_id, i.message) for i in inventory.invalid])
"""


@pytest.mark.parametrize(
    "deep",
    [
        "data: " + "[" * 100_000 + "]" * 100_000,
        "data: " + "{a: " * 100_000 + "x" + "}" * 100_000,
        "data:\n  " + "- " * 100_000 + "x",
    ],
    ids=["flow-sequence", "flow-mapping", "block-sequence"],
)
def test_nesting_that_would_crash_libyaml_is_pg001(deep: str) -> None:
    """libyaml's composer recurses on the C stack; 100,000 levels kill the interpreter."""
    text = CONFIGMAP.format(name="before") + "---\n" + CONFIGMAP.format(name="deep") + deep
    result = subprocess.run(
        [sys.executable, "-c", _DEEP_SCRIPT],
        input=text,
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "['before'] [('PG001', 'nesting deeper than 200 levels')]"


def test_depth_screen_passes_ordinary_manifests() -> None:
    stream = "---\n".join([DEPLOYMENT] * 200)  # 400 flow openers in total, 2 per document
    assert not may_nest_deeply(stream)
    assert may_nest_deeply(_nested(600))
    assert first_too_deep(_nested(600), _Loader) == (0, 5, 506)
    assert first_too_deep(_nested(400), _Loader) is None


def test_collector_state_is_restored() -> None:
    assert gc.isenabled()
    parse(DEPLOYMENT)
    assert gc.isenabled()
    assert gc.get_freeze_count() > 0  # what was loaded is out of the collector's way
    gc.disable()
    try:
        parse(DEPLOYMENT)
        assert not gc.isenabled()
    finally:
        gc.enable()


# --- the faster resolver gives PyYAML's answers, and Kubernetes' one-letter booleans -

_BOOL_TAG = "tag:yaml.org,2002:bool"
_ONE_LETTER = frozenset({"y", "Y", "n", "N"})  # YAML 1.1 booleans PyYAML leaves as strings


def _expected_tag(theirs: str, spelling: str, plain: bool) -> str:
    return _BOOL_TAG if plain and spelling in _ONE_LETTER else theirs


_SPELLINGS = [
    "", "~", "null", "Null", "NULL", "nULL", "true", "True", "TRUE", "tRUE", "false", "yes",
    "Yes", "YES", "no", "No", "on", "On", "ON", "off", "Off", "OFF", "y", "n", "Y", "N",
    "0", "-0", "+0", "12", "+12", "-12", "012", "0o12", "0x1F", "0X1F", "0b101", "1_000",
    "1:30", "-1:30", "190:20:30.15", "8080:80", "1.5", "1.", ".5", "-.5", "1e3", "1.0e+3",
    "6.8523015e+5", ".inf", "-.Inf", "+.INF", ".NaN", ".nan", "2001-12-14",
    "2001-12-14t21:59:43.10-05:00", "2001-12-14 21:59:43.10 -5", "=", "<<", "!", "&", "*",
    "name", "namespace", "nodeSelector", "tolerations", "operator", "Exists", "template",
    "nvidia.com/gpu", "1.2.3", "v1", "apps/v1", "-", "+", ".", "..", "0.", "0x", "_", "1__0",
]  # fmt: skip


@pytest.mark.parametrize("implicit", [(True, False), (False, True), (False, False)])
def test_resolver_matches_pyyaml(implicit: tuple[bool, bool]) -> None:
    ours = _Loader("").resolve
    theirs: Callable[..., str] = yaml.SafeLoader("").resolve  # PyYAML's own, the reference
    for spelling in _SPELLINGS:
        expected = _expected_tag(theirs(ScalarNode, spelling, implicit), spelling, implicit[0])
        assert ours(ScalarNode, spelling, implicit) == expected, spelling
    for kind in (SequenceNode, MappingNode):
        assert ours(kind, None, implicit) == theirs(kind, None, implicit)


def test_composed_tags_match_pyyaml() -> None:
    lines = [f"k{index}: {spelling}" for index, spelling in enumerate(_SPELLINGS)]
    text = "\n".join(line for line in lines if _composes(line))
    text += "\nseq: [a, 1, ~]\nmap: {a: 1, 0x1: true}\n"

    def scalars(node: Node) -> list[tuple[str, str, bool]]:
        """(tag, text, plain) of every node, depth first."""
        if isinstance(node, ScalarNode):
            return [(node.tag, node.value, not node.style)]
        children = (
            [n for pair in node.value for n in pair]
            if isinstance(node, MappingNode)
            else node.value
        )
        return [(node.tag, "", False), *(s for child in children for s in scalars(child))]

    ours, theirs = yaml.compose(text, Loader=_Loader), yaml.compose(text, Loader=yaml.CSafeLoader)
    assert ours is not None and theirs is not None
    expected = [_expected_tag(tag, text, plain) for tag, text, plain in scalars(theirs)]
    assert [tag for tag, _, _ in scalars(ours)] == expected


def _composes(text: str) -> bool:
    try:
        yaml.compose(text, Loader=yaml.CSafeLoader)
    except yaml.YAMLError:
        return False
    return True


# --- parse_plain (poolgate's own files) --------------------------------------------


def test_parse_plain_returns_any_document_with_positions_and_problems() -> None:
    documents, problems = parse_plain("id: PG301\nlevel: error\nlevel: warning\n---\n- a\n")
    assert documents == [
        ({"id": "PG301", "level": "warning"}, {"": (1, 1), "id": (1, 1), "level": (3, 1)}),
        (["a"], {"": (5, 1), "[0]": (5, 3)}),
    ]
    assert problems == [
        (
            "duplicate key 'level' (first at line 2); parsers disagree on which value wins",
            3,
            1,
        )
    ]


def test_parse_plain_reports_parse_errors() -> None:
    documents, problems = parse_plain("id: [\n")
    assert documents == []
    [(message, line, column)] = problems
    assert message.startswith("YAML does not parse: ")
    assert (line, column) == (2, 1)


# -- found in review: stdin JSON, byte order marks, the end of the text ---------------


def test_json_on_standard_input_may_spell_characters_as_surrogate_pairs() -> None:
    """``kubectl get -o json | poolgate scan -``: the pairs are joined as for a ``.json``
    file (the parser refuses surrogate escapes one by one)."""
    text = json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x😀"}})
    assert "\\ud83d\\ude00" in text
    inventory = parse_stream(text, "<stdin>")
    assert [obj.name for obj in inventory.objects] == ["x😀"] and not inventory.invalid


def test_a_byte_order_mark_may_start_every_document() -> None:
    """Two files saved by an editor with a BOM and joined with ``---`` (YAML 1.2 allows
    a BOM before each document; libyaml only the first)."""
    pod = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {}\n"
    text = "\ufeff" + pod.format("p1") + "---\n\ufeff" + pod.format("p2")
    inventory = parse_stream(text, "joined.yaml")
    assert [(obj.name, obj.origin.line) for obj in inventory.objects] == [("p1", 1), ("p2", 6)]
    assert not inventory.invalid


def test_a_parse_error_at_the_end_points_at_the_last_line() -> None:
    text = '{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, '
    [invalid] = parse_stream(text, "t.json").invalid
    assert (invalid.line, invalid.column) == (1, len(text) + 1)


@pytest.mark.parametrize("mark", ["\u2028", "\u2029", "\x85"])
def test_unicode_line_separators_do_not_move_positions(mark: str) -> None:
    """libyaml counts NEL, LS and PS as line breaks; editors and GitHub count line feeds,
    so findings after one were annotated a line lower (found in review)."""
    text = textwrap.dedent(
        f"""\
        apiVersion: v1
        kind: Pod
        metadata:
          name: p
          annotations: {{description: "first{mark}second"}}
        spec:
          containers:
            - name: c
              securityContext: {{privileged: true}}
        """
    )
    plain = text.replace(mark, "x")  # the same text without the separator
    [obj] = parse_stream(text, "ls.yaml").objects
    [reference] = parse_stream(plain, "ls.yaml").objects
    assert obj.lines.positions == reference.lines.positions
    assert obj.position("spec.containers[0].securityContext.privileged") == (9, 25)
    broken = parse_stream(text + "---\nkind: [\n", "ls.yaml").invalid
    expected = parse_stream(plain + "---\nkind: [\n", "ls.yaml").invalid
    assert [(d.line, d.column) for d in broken] == [(d.line, d.column) for d in expected]
    assert parse_plain(text)[0][0][1] == parse_plain(plain)[0][0][1]


def test_a_yaml_flow_mapping_on_standard_input_keeps_single_quoted_escapes() -> None:
    """Only standard input that starts as JSON has its surrogate pairs joined (found in
    review: a single-quoted '\\ud83d\\ude00' is six characters in YAML)."""
    text = "{apiVersion: v1, kind: ConfigMap, metadata: {name: x}, data: {k: '\\ud83d\\ude00'}}"
    [obj] = parse_stream(text, "<stdin>").objects
    assert obj.body["data"]["k"] == "\\ud83d\\ude00"
