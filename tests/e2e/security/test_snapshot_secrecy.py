"""``poolgate snapshot`` keeps no secret no rule reads, and is private (issue 21,
item 11): a pod's literal env values (``DB_PASSWORD=...``) and the
``last-applied-configuration`` annotation (a copy of the object, env values
included) are left out unless an enabled rule may read them, the snapshot says what
it left out, an audit of it with a rule that reads them says that rule cannot run,
and the file is written 0600 whatever the umask.

The cluster is the audit tests' API server (tests/audit/apiserver.py) holding the
lab objects, whose pod and Deployment carry such values; poolgate runs as a user runs
it, in a subprocess.
"""

from __future__ import annotations

import copy
import datetime
import json
import multiprocessing
import os
import stat
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from audit.apiserver import ApiServer, Pki, make_pki, write_kubeconfig
from audit.conftest import CONTEXT, TOKEN, objects
from cli_run import poolgate

from scanner import pipeline
from scanner.audit import redaction
from scanner.audit.reads import reads
from scanner.kinds import WORKLOAD_KINDS
from scanner.sources.files import load_paths

REPO = Path(__file__).resolve().parents[3]
T = TypeVar("T")
SECRETS = ("lab-db-password-in-clear", "lab-api-key-in-clear")
"""The literal values in the lab's Pod and Deployment (tests/audit/lab/workloads.yaml)."""

ENV_RULE = """\
id: ACME701
name: password-in-env
level: error
summary: No password in clear in a container's environment.
description: Reads the literal values of env entries.
remediation: Take it from a Secret (valueFrom.secretKeyRef).
subject: workload
violations: |
  workload.containers.filter(c, has(c.env) && c.env.exists(e,
    e.name.contains("PASSWORD") && has(e.value) && e.value != "")
  ).map(c, {"message": "container " + c.name + " sets a password in clear", "path": c.path})
"""


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture
def kubeconfig(pki: Pki, tmp_path: Path) -> Iterator[Path]:
    with ApiServer(objects("lab"), pki, TOKEN) as server:
        yield write_kubeconfig(tmp_path / "kubeconfig", server.url, pki.ca, CONTEXT, token=TOKEN)


def _run(*args: str, cwd: Path) -> Any:
    return poolgate(
        *args, cwd=cwd, drop=("KUBECONFIG", "KUBERNETES_SERVICE_HOST"), env={"HOME": str(cwd)}
    )


def _preexec_umask() -> None:
    os.umask(0o022)  # the usual umask: a report would be 0644


def test_a_snapshot_leaves_out_env_values_and_is_private(kubeconfig: Path, tmp_path: Path) -> None:
    snap = tmp_path / "snapshot.json"
    taken = poolgate(
        "snapshot",
        "--kubeconfig",
        str(kubeconfig),
        "-o",
        str(snap),
        cwd=tmp_path,
        drop=("KUBECONFIG", "KUBERNETES_SERVICE_HOST"),
        env={"HOME": str(tmp_path)},
        preexec=_preexec_umask,
    )
    assert taken.returncode == 0, taken.stderr
    assert stat.S_IMODE(snap.stat().st_mode) == 0o600
    text = snap.read_text()
    for secret in SECRETS:
        assert secret not in text
    document = json.loads(text)
    pod = next(o for o in document["items"] if o["metadata"]["name"] == "llama-finetune-0")
    # Names and references stay: which variables are set, and from where.
    assert pod["spec"]["containers"][0]["env"] == [
        {"name": "DB_PASSWORD"},
        {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}}},
    ]
    deployment = next(o for o in document["items"] if o["kind"] == "Deployment")
    annotations = deployment["metadata"].get("annotations", {})
    assert redaction.LAST_APPLIED_ANNOTATION not in annotations
    omitted = json.loads(document["metadata"]["annotations"]["poolgate.io/omitted"])
    assert {"Pod", "Deployment"} <= set(omitted["env-values"])
    assert {"Deployment", "Namespace"} <= set(omitted["last-applied"])
    # The audit of it gives the live audit's findings (tests/audit/test_live.py too).
    live = _run("audit", "--kubeconfig", str(kubeconfig), "--format", "json", cwd=tmp_path)
    offline = _run("audit", "--snapshot", str(snap), "--format", "json", cwd=tmp_path)
    assert json.loads(offline.stdout)["findings"] == json.loads(live.stdout)["findings"]
    assert json.loads(offline.stdout)["notifications"] == []


def test_a_rule_that_reads_env_values_keeps_them_or_does_not_run(
    kubeconfig: Path, tmp_path: Path
) -> None:
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "ACME701-password-in-env.yaml").write_text(ENV_RULE)
    with_rule = ("--rules", str(rules))
    live = _run(
        "audit", "--kubeconfig", str(kubeconfig), *with_rule, "--format", "json", cwd=tmp_path
    )
    live_findings = json.loads(live.stdout)["findings"]
    assert [f["object"]["name"] for f in live_findings if f["ruleId"] == "ACME701"] == [
        "llama-finetune-0"
    ]
    # Taken with the rule: the values it reads are kept, and the audits agree.
    kept = tmp_path / "kept.json"
    taken = _run(
        "snapshot", "--kubeconfig", str(kubeconfig), *with_rule, "-o", str(kept), cwd=tmp_path
    )
    assert taken.returncode == 0, taken.stderr
    assert SECRETS[0] in kept.read_text()
    offline = _run("audit", "--snapshot", str(kept), *with_rule, "--format", "json", cwd=tmp_path)
    assert json.loads(offline.stdout)["findings"] == live_findings
    # Taken without it: the rule cannot run on that snapshot, and the audit says so.
    bare = tmp_path / "bare.json"
    taken = _run("snapshot", "--kubeconfig", str(kubeconfig), "-o", str(bare), cwd=tmp_path)
    assert taken.returncode == 0, taken.stderr
    assert SECRETS[0] not in bare.read_text()
    args = ("audit", "--snapshot", str(bare), *with_rule, "--fail-on", "never", "--format", "json")
    result = _run(*args, cwd=tmp_path)
    assert result.returncode == 3, result.stderr
    document = json.loads(result.stdout)
    assert not [f for f in document["findings"] if f["ruleId"] == "ACME701"]
    env, annotation = document["notifications"]
    assert env["message"].startswith(
        "the snapshot left out the literal values of container env entries of "
        "ClusterTrainingRuntime, CronJob, "
    )
    assert annotation["message"].startswith(
        "the snapshot left out the kubectl.kubernetes.io/last-applied-configuration "
        "annotation of ClusterTrainingRuntime, CronJob, "
    )
    more = len(WORKLOAD_KINDS) - 8  # the workload kinds (ACME701 reads workloads), eight named
    for note in (env, annotation):
        assert note["level"] == "error"
        assert f" and {more} more (the rules it was taken with do not read them)" in note["message"]
        assert "rules that may read them did not run: ACME701;" in note["message"]


# -- the bundled rules read neither ------------------------------------------------


ENV_FREE_JOINS = {"PG110": frozenset({"Deployment"})}
"""Workload kinds a rule that says ``env`` joins for something else: PG110 reads the
ClusterPolicy's toolkit env, and of a Deployment only the GPU Operator's image (its
version: ``cluster.gpuOperator``, scanner/model/gpuoperator.py)."""


def test_no_bundled_rule_names_them_on_a_workload() -> None:
    """The bundled rules' own text: ``env`` only in rules that read no workload kind
    (PG110 reads the ClusterPolicy's toolkit env; ``ENV_FREE_JOINS``), and never the
    annotation."""
    ruleset = pipeline.load_ruleset(pipeline.ScanOptions(engine="cpp", enable_all=True))
    for rule in ruleset.rules:
        if rule.builtin:
            continue
        assert redaction._bundled(rule), rule.doc.source
        text = (REPO / "rules" / Path(rule.doc.source).name).read_text()
        assert "last-applied" not in text, rule.id
        if "env" in text.replace("environment", ""):
            kinds = reads(rule).kinds - ENV_FREE_JOINS.get(rule.id, frozenset())
            assert not kinds & WORKLOAD_KINDS, rule.id


def _with_secrets(body: dict[str, Any]) -> dict[str, Any]:
    """``body`` with a last-applied annotation holding it whole, as kubectl writes it."""
    copied = copy.deepcopy(body)
    metadata = copied.setdefault("metadata", {})
    if isinstance(metadata, dict):
        annotations = metadata.setdefault("annotations", {})
        if isinstance(annotations, dict):
            annotations[redaction.LAST_APPLIED_ANNOTATION] = json.dumps(body, default=str)
    return copied


@pytest.mark.skipif(sys.platform != "linux", reason="the comparison runs in a forked child")
def test_the_bundled_rules_find_the_same_without_them() -> None:
    """Every fixture, its objects with their env values and a last-applied annotation,
    then with both left out as a snapshot leaves them out: the same findings. (In a
    forked child: evaluating every fixture twice leaves this process larger.)"""
    whole, with_values = _in_child(_fixture_findings, False)
    stripped, left = _in_child(_fixture_findings, True)
    assert with_values > 10 and left == 0  # the fixtures had env values to leave out
    assert whole and stripped == whole


def _in_child(function: Callable[[bool], T], argument: bool) -> T:
    """``function(argument)`` in a forked child (not a daemon: the evaluation may fork
    too), its answer sent back through a pipe."""
    context = multiprocessing.get_context("fork")
    receive, send = context.Pipe(duplex=False)

    def child() -> None:
        send.send(function(argument))

    process = context.Process(target=child)
    process.start()
    send.close()  # the child's end: a child that fails closes it, and recv() raises
    try:
        answer: T = receive.recv()
    finally:
        process.join()
    return answer


def _fixture_findings(strip: bool) -> tuple[list[tuple[str, ...]], int]:
    """The bundled rules' findings on every fixture (each object given a last-applied
    annotation), with what a snapshot leaves out left out when ``strip``; and how many
    env entries then still hold a literal value."""
    ruleset = pipeline.load_ruleset(pipeline.ScanOptions(engine="cpp", enable_all=True))
    fixtures = [str(REPO / "fixtures" / "rules"), str(REPO / "fixtures" / "scenarios")]
    inventory = load_paths(fixtures, REPO)
    for obj in inventory.objects:
        if isinstance(obj.body, dict):
            obj.body.update(_with_secrets(obj.body))
    bodies = [obj.body for obj in inventory.objects if isinstance(obj.body, dict)]
    if strip:
        every = {obj.kind for obj in inventory.objects}
        omitted = {redaction.ENV_VALUES: every & WORKLOAD_KINDS, redaction.LAST_APPLIED: every}
        redaction.apply(bodies, {what: frozenset(kinds) for what, kinds in omitted.items()})
    values = sum("value" in entry for body in bodies for entry in _env_entries(body))
    now = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    report = pipeline.evaluate_inventory(inventory, ruleset, REPO, now=now)
    found = [(f.rule_id, f.fingerprint, f.message, str(f.location)) for f in report.findings]
    return found, values


def _env_entries(body: dict[str, Any]) -> Iterator[dict[str, Any]]:
    from scanner.kinds import CONTAINER_FIELDS, workload_kind

    entry = workload_kind(str(body.get("kind")), str(body.get("apiVersion")))
    for template in entry.templates(body) if entry is not None else ():
        spec = template.spec if isinstance(template.spec, dict) else {}
        for field, _ in CONTAINER_FIELDS:
            for container in spec.get(field) or []:
                if isinstance(container, dict):
                    yield from (e for e in container.get("env") or [] if isinstance(e, dict))
