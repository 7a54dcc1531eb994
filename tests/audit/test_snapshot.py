"""Snapshots: poolgate's own, and ``kubectl get`` dumps in JSON and YAML."""

from __future__ import annotations

import datetime
import io
import json
from pathlib import Path
from typing import Any

import pytest

from scanner.errors import UsageError
from scanner.inventory import ObjectRef
from scanner.kinds.resources import RESOURCES, REVISION
from scanner.sources import snapshot
from scanner.sources.snapshot import Capture, Unavailable, kind_label
from scanner.sources.yaml import limits as yamllimits
from scanner.sources.yaml import walk as yamlwalk
from scanner.sources.yaml.document import parse_plain

POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "p", "namespace": "ml"},
    "spec": {"containers": [{"name": "c", "image": "x"}]},
}
NODE = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}}


def test_write_then_read_round_trips_everything(tmp_path: Path) -> None:
    captured = datetime.datetime(2025, 6, 1, 2, 17, tzinfo=datetime.UTC)
    capture = Capture(
        "arn:aws:eks:eu-west-1:1:cluster/prod",
        captured,
        [POD, NODE],
        frozenset({("", "Pod"), ("", "Node"), ("nvidia.com", "ClusterPolicy")}),
        [Unavailable("apps", "Deployment", "forbidden", "403 Forbidden: no", "")],
    )
    stream = io.StringIO()
    snapshot.write(capture, stream)
    path = tmp_path / "snap.json"
    path.write_text(stream.getvalue())
    document = json.loads(stream.getvalue())  # one valid JSON List
    assert (document["apiVersion"], document["kind"], len(document["items"])) == ("v1", "List", 2)
    back = snapshot.read(str(path))
    assert back.context == capture.context
    assert back.captured_at == captured
    assert back.objects == [POD, NODE]
    assert back.listed == capture.listed
    assert back.unavailable == capture.unavailable
    assert back.revision == REVISION
    assert document["metadata"]["annotations"]["poolgate.io/kinds-revision"] == str(REVISION)


def test_kubectl_yaml_dump_and_typed_lists(tmp_path: Path) -> None:
    dump = tmp_path / "dump.yaml"
    dump.write_text(
        """\
apiVersion: v1
kind: List
metadata:
  resourceVersion: ""
items:
  - apiVersion: v1
    kind: Node
    metadata:
      name: n1
---
apiVersion: v1
kind: PodList
items:
  - metadata:
      name: p
      namespace: ml
"""
    )
    capture = snapshot.read(str(dump), "prod")
    assert capture.context == "prod"
    assert capture.listed is None  # another tool's dump: kinds covered unknown
    assert [(o["apiVersion"], o["kind"]) for o in capture.objects] == [
        ("v1", "Node"),
        ("v1", "Pod"),
    ]
    inventory = snapshot.to_inventory(capture)
    assert [obj.origin.uri for obj in inventory.objects] == [
        "cluster://prod/Node/n1",
        "cluster://prod/ml/Pod/p",
    ]
    assert {obj.origin.source_type for obj in inventory.objects} == {"cluster"}
    # No file lines for live objects: no position at all (0:0), never a made-up 1:1.
    assert inventory.objects[1].position("spec.containers[0].image") == (0, 0)


def test_context_defaults_and_encoding(tmp_path: Path) -> None:
    dump = tmp_path / "dump.json"
    dump.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [POD]}))
    assert snapshot.read(str(dump)).context == "snapshot"
    ref = ObjectRef("v1", "Pod", "ml", "p")
    assert (
        snapshot.object_uri("arn:aws:eks:us-east-1:1:cluster/a b", ref)
        == "cluster://arn%3Aaws%3Aeks%3Aus-east-1%3A1%3Acluster%2Fa%20b/ml/Pod/p"
    )
    assert snapshot.object_uri("kind-gpu", ObjectRef("v1", "Node", "", "n")) == (
        "cluster://kind-gpu/Node/n"
    )


def test_objects_without_identity_are_skipped(tmp_path: Path) -> None:
    dump = tmp_path / "dump.json"
    items = [POD, {"kind": "Pod"}, {"apiVersion": "v1", "kind": "Pod", "metadata": {}}, "text"]
    dump.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    inventory = snapshot.to_inventory(snapshot.read(str(dump)))
    assert len(inventory.objects) == 1
    assert inventory.skipped == 2


def test_yaml_snapshots_honour_no_tag_and_read_aliases_as_manifests_do(tmp_path: Path) -> None:
    """The manifest reader's rules (scanner/sources/yaml/document.py parse_plain): a tag is
    never honoured, so nothing is constructed or executed, and an alias reads as the
    value it names, its expansion bounded (BOMB below is refused)."""
    dump = tmp_path / "dump.yaml"
    dump.write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: a, namespace: &ns team, labels: {team: *ns}}\n"
        "spec: {x: !!python/object:os.system {}, w: !!null {privileged: true}, z: !!set [a]}\n"
    )
    (body,) = snapshot.read(str(dump)).objects
    assert body["metadata"]["labels"] == {"team": "team"}
    assert body["spec"] == {"x": {}, "w": {"privileged": True}, "z": ["a"]}


def test_a_yaml_list_is_limited_by_its_length_not_the_per_document_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A kubectl List is one document holding every object. With the manifest limit
    made small, the same List is refused as a manifest document but read as a
    snapshot: its node count is bounded by its length."""
    monkeypatch.setattr(yamllimits, "MAX_NODES", 200)
    monkeypatch.setattr(yamlwalk, "MAX_NODES", 200)
    items = "".join(
        f"  - {{apiVersion: v1, kind: Pod, metadata: {{name: p{i}, namespace: ml}}}}\n"
        for i in range(100)
    )
    text = f"apiVersion: v1\nkind: List\nitems:\n{items}"
    dump = tmp_path / "list.yaml"
    dump.write_text(text)
    assert len(snapshot.read(str(dump)).objects) == 100
    _, problems = parse_plain(text)
    assert problems and "nodes" in problems[0][0]


def test_a_top_level_list_of_objects_reads_the_same_in_yaml_and_json(tmp_path: Path) -> None:
    pods = [{**POD, "metadata": {**POD["metadata"], "name": f"p{i}"}} for i in range(2)]
    as_json, as_yaml = tmp_path / "pods.json", tmp_path / "pods.yaml"
    as_json.write_text(json.dumps(pods))
    as_yaml.write_text("".join(f"- {json.dumps(pod)}\n" for pod in pods))
    assert snapshot.read(str(as_yaml)).objects == snapshot.read(str(as_json)).objects
    assert len(snapshot.read(str(as_yaml)).objects) == 2


BOMB = "".join(
    f"{name}: &{name} [{', '.join([f'*{prev}'] * 10 if prev else ['x'] * 10)}]\n"
    for prev, name in zip(["", *"abcdefg"], "abcdefgh", strict=True)
)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"apiVersion": "v1",\n "items": [}', "dump:2:12: invalid JSON"),
        ("items:\n  - a: [1\n", "dump:3:1:"),
        (BOMB, "dump:1:1: alias expansion exceeds limit"),
        ("x: \x01\n", "dump:1:4: YAML does not parse: unacceptable character"),
        ("items: " + "[" * 600 + "]" * 600, "dump:1:507: nesting deeper than 200 levels"),
        ("[" * 100_000 + "]" * 100_000, "dump: nested too deeply"),  # JSON
    ],
)
def test_bad_snapshots_are_one_clear_line(tmp_path: Path, text: str, message: str) -> None:
    dump = tmp_path / "dump"
    dump.write_text(text)
    with pytest.raises(UsageError) as raised:
        snapshot.read(str(dump))
    assert message in str(raised.value).replace(str(tmp_path) + "/", "")
    assert "\n" not in str(raised.value)


def test_missing_snapshot_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no such file"):
        snapshot.read(str(tmp_path / "nope.json"))


@pytest.mark.parametrize(
    "recorded",
    # The last two have no UTC time (found in review: an OverflowError, exit 4).
    ["last night", "0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-23:59"],
)
def test_bad_capture_annotations_are_reported(tmp_path: Path, recorded: str) -> None:
    dump = tmp_path / "dump.json"
    meta = {"annotations": {"poolgate.io/captured-at": recorded}}
    dump.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "metadata": meta, "items": []}))
    with pytest.raises(UsageError, match="captured-at is not an RFC 3339 time"):
        snapshot.read(str(dump))


def test_what_a_snapshot_left_out_round_trips(tmp_path: Path) -> None:
    captured = datetime.datetime(2025, 6, 1, 2, 17, tzinfo=datetime.UTC)
    omitted = {"env-values": frozenset({"Pod", "Deployment"}), "last-applied": frozenset({"Pod"})}
    capture = Capture("prod", captured, [POD], frozenset({("", "Pod")}), omitted=omitted)
    stream = io.StringIO()
    snapshot.write(capture, stream)
    annotations = json.loads(stream.getvalue())["metadata"]["annotations"]
    assert json.loads(annotations["poolgate.io/omitted"]) == {
        "env-values": ["Deployment", "Pod"],
        "last-applied": ["Pod"],
    }
    path = tmp_path / "snap.json"
    path.write_text(stream.getvalue())
    assert snapshot.read(str(path)).omitted == omitted
    capture.omitted = {}
    stream = io.StringIO()
    snapshot.write(capture, stream)
    assert "poolgate.io/omitted" not in stream.getvalue()


@pytest.mark.parametrize("recorded", ["[]", '{"env-values": "Pod"}', '{"x": [1]}', "{"])
def test_a_bad_omitted_annotation_is_reported(tmp_path: Path, recorded: str) -> None:
    dump = tmp_path / "dump.json"
    meta = {"annotations": {"poolgate.io/omitted": recorded}}
    dump.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "metadata": meta, "items": []}))
    with pytest.raises(UsageError, match=r"annotation poolgate\.io/omitted is not valid"):
        snapshot.read(str(dump))


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--now", "0001-01-01T00:00:00+01:00", "is not an RFC 3339 time"),
        ("--request-timeout", "nan", "nan is not a number of seconds"),
        ("--request-timeout", "inf", "inf is not in the range 0.1<=x<=3600.0"),
    ],
)
def test_out_of_range_audit_options_are_usage_errors(
    tmp_path: Path, option: str, value: str, message: str
) -> None:
    """Found in review: an OverflowError (exit 4), or retries that blamed the server."""
    from .conftest import cli

    dump = tmp_path / "dump.json"
    dump.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": []}))
    result = cli("audit", "--snapshot", str(dump), option, value)
    assert (result.returncode, result.stdout) == (2, "")
    assert message in result.stderr and len(result.stderr.splitlines()) == 1


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty: no List and no objects to audit"),  # a failed `kubectl get > dump`
        ("\n---\n", "empty: no List and no objects to audit"),
        ("[]", "empty: no List and no objects to audit"),
        ("42", "entry 1 is a number, not a Kubernetes List or object"),
        ("null", "entry 1 is null, not a Kubernetes List or object"),
        ('"pods"', "entry 1 is a string, not a Kubernetes List or object"),
        ("{}", "entry 1 is an object without kind, not a Kubernetes List or object"),
        ('{"kind": "List", "items": null}', "List (entry 1): its items is null, not a list"),
        ('{"kind": "PodList", "apiVersion": "v1"}', "PodList (entry 1): its items is missing"),
    ],
)
def test_a_snapshot_that_holds_nothing_to_audit_is_a_usage_error(
    tmp_path: Path, text: str, message: str
) -> None:
    """Auditing it would report "clean" about a cluster it never saw (exit 0): the
    audit is a usage error instead (exit 2, one line)."""
    from .conftest import cli

    dump = tmp_path / "dump.json"
    dump.write_text(text)
    with pytest.raises(UsageError) as raised:
        snapshot.read(str(dump))
    assert f"--snapshot {dump}: {message}" in str(raised.value)
    result = cli("audit", "--snapshot", str(dump))
    assert result.returncode == 2 and result.stdout == ""
    [line] = result.stderr.splitlines()
    assert line.startswith(f"poolgate: error: --snapshot {dump}: {message}")


def test_a_kubectl_dump_of_some_kinds_never_resolves_findings_on_others(tmp_path: Path) -> None:
    """Last night's audit of the lab; tonight a `kubectl get nodes,namespaces -o json` dump.
    It says nothing about Pods or Deployments: their findings are unverified, not
    resolved. A finding on a kind the dump holds, of a rule that reads nothing it lacks
    but its own subjects, can still be resolved."""
    from .conftest import CONTEXT, cli, objects

    lab = [body for body in objects("lab") if body["kind"] != "Secret"]
    full = tmp_path / "full.json"
    full.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": lab}))
    last_night = tmp_path / "last.json"
    args = ("--context", CONTEXT, "--format", "json")
    cli("audit", "--snapshot", str(full), *args, "-o", str(last_night))
    before = json.loads(last_night.read_text())["findings"]
    assert {"Pod", "Deployment"} <= {f["object"]["kind"] for f in before}

    some = tmp_path / "some.json"
    kept = [body for body in lab if body["kind"] in ("Node", "Namespace")]
    some.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": kept}))
    result = cli("audit", "--snapshot", str(some), *args, "--compare", str(last_night))
    document = json.loads(result.stdout)
    drift = document["drift"]
    assert drift["resolved"] == []
    assert {"Pod", "Deployment"} <= {f["object"]["kind"] for f in drift["unverified"]}
    notes = [n["message"] for n in document["notifications"]]
    assert any("holds no " in n and "taken as unknown, not as none" in n for n in notes)

    # The debug shell is gone from a dump that has every kind PG301 judges workloads by.
    fixed = tmp_path / "fixed.json"
    tonight = [body for body in lab if body["metadata"]["name"] != "debug-shell"]
    fixed.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": tonight}))
    result = cli("audit", "--snapshot", str(fixed), *args, "--compare", str(last_night))
    resolved = json.loads(result.stdout)["drift"]["resolved"]
    assert ("PG301", "debug-shell") in {(f["ruleId"], f["object"]["name"]) for f in resolved}


@pytest.mark.parametrize("recorded", ["0", "-1", "two", "1.5", "99999999999"])
def test_a_bad_kinds_revision_is_reported(tmp_path: Path, recorded: str) -> None:
    dump = tmp_path / "dump.json"
    meta = {"annotations": {"poolgate.io/listed": "Pod", "poolgate.io/kinds-revision": recorded}}
    dump.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "metadata": meta, "items": []}))
    with pytest.raises(UsageError, match="kinds-revision is not a revision"):
        snapshot.read(str(dump))


def test_a_snapshot_from_before_kueue_is_judged_as_it_was_then(tmp_path: Path) -> None:
    """Found in review: every snapshot written before poolgate listed Kueue's kinds
    stopped PG104-PG106, PG108, PG201 and PG603 (exit 3), although the poolgate that
    wrote it could not have listed them. Without ``poolgate.io/kinds-revision`` it is
    revision 1: those kinds are a note and the rules run as they did then. A snapshot of
    the current revision that lacks them was taken with other rules enabled: they stop."""
    from .conftest import CONTEXT, cli, objects

    lab = [body for body in objects("lab") if body["kind"] != "Secret"]
    before = [r for r in RESOURCES if r.since == 1]
    listed = ",".join(sorted(kind_label(resource.key) for resource in before))
    args = ("--context", CONTEXT, "--format", "json", "--fail-on", "never")

    def audit(annotations: dict[str, str]) -> tuple[int, dict[str, Any]]:
        path = tmp_path / "snap.json"
        meta = {"annotations": annotations}
        path.write_text(
            json.dumps({"apiVersion": "v1", "kind": "List", "metadata": meta, "items": lab})
        )
        result = cli("audit", "--snapshot", str(path), *args)
        return result.returncode, json.loads(result.stdout)

    every = ",".join(sorted(kind_label(resource.key) for resource in RESOURCES))
    code, current = audit(
        {"poolgate.io/listed": every, "poolgate.io/kinds-revision": str(REVISION)}
    )
    old_code, old = audit({"poolgate.io/listed": listed})
    assert old_code == code
    assert old["findings"] == current["findings"]
    assert code == 0
    assert "PG105" in {f["ruleId"] for f in old["findings"]}
    notes = [n["message"] for n in old["notifications"]]
    assert any(n.startswith("the snapshot was written by an earlier poolgate") for n in notes)
    assert any("LocalQueue.kueue.x-k8s.io" in n for n in notes)

    blocked_code, blocked = audit({"poolgate.io/listed": listed, "poolgate.io/kinds-revision": "2"})
    assert blocked_code == 3
    stopped = [n["message"] for n in blocked["notifications"] if "did not run" in n["message"]]
    assert stopped and "PG105" in stopped[0] and "not captured" in stopped[0]


QUEUE_RULE = """\
id: ACME011
name: queued-needs-queues
level: warning
summary: A user rule that needs LocalQueues.
description: Reads Kueue's placement and says it needs the queues to be listed.
remediation: None.
subject: workload
needs: [LocalQueue]
violations: |
  workload.queuedPlacement == "" ? [] : [{"message": "queued", "path": workload.podSpecPath}]
"""


def test_an_older_snapshot_never_resolves_findings_that_need_kueue(tmp_path: Path) -> None:
    """Found in review: last night's snapshot listed Kueue and PG105 fired on a queued
    job whose flavor adds nothing; tonight's was written by a poolgate from before
    Kueue (no queues: the job is not judged). --compare must call that finding
    unverified, not resolved; and a user rule that needs LocalQueues does not run."""
    import yaml

    from .conftest import CONTEXT, ROOT, cli

    text = (ROOT / "fixtures/rules/PG105/fire-kueue-flavor-adds-nothing.yaml").read_text()
    bodies = [body for body in yaml.safe_load_all(text) if body]
    for body in bodies:
        if body["kind"] == "Job":
            body["spec"]["suspend"] = True  # waiting in its queue (admitted: as written)
    every = ",".join(sorted(kind_label(resource.key) for resource in RESOURCES))
    old = ",".join(sorted(kind_label(r.key) for r in RESOURCES if r.since == 1))
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "ACME011-queued.yaml").write_text(QUEUE_RULE)
    args = ("--context", CONTEXT, "--format", "json", "--rules", str(rules))

    def write(name: str, items: list[dict[str, Any]], annotations: dict[str, str]) -> Path:
        path = tmp_path / name
        meta = {"annotations": annotations}
        path.write_text(
            json.dumps({"apiVersion": "v1", "kind": "List", "metadata": meta, "items": items})
        )
        return path

    last = write(
        "last.json",
        bodies,
        {"poolgate.io/listed": every, "poolgate.io/kinds-revision": str(REVISION)},
    )
    report = tmp_path / "last-report.json"
    cli("audit", "--snapshot", str(last), *args, "-o", str(report))
    assert "PG105" in {f["ruleId"] for f in json.loads(report.read_text())["findings"]}

    kueue = {"LocalQueue", "ClusterQueue", "ResourceFlavor"}
    tonight = write(
        "tonight.json", [b for b in bodies if b["kind"] not in kueue], {"poolgate.io/listed": old}
    )
    result = cli("audit", "--snapshot", str(tonight), *args, "--compare", str(report))
    document = json.loads(result.stdout)
    drift = document["drift"]
    assert ("PG105", "finetune") in {
        (f["ruleId"], f["object"]["name"]) for f in drift["unverified"]
    }
    assert not [f for f in drift["resolved"] if f["ruleId"] == "PG105"]
    [note] = [n for n in document["notifications"] if "earlier poolgate" in n["message"]]
    assert note["level"] == "error"
    assert note["message"].endswith(
        "rules that need them did not run: ACME011; take a new snapshot to include them"
    )
    assert "ACME011" not in {f["ruleId"] for f in document["findings"]}
    assert result.returncode in (1, 3)
