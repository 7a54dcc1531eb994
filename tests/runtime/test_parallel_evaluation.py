"""Evaluation on two processes (scanner/evaluate/fast.py, scanner/runtime/executors.py) and
with a helper process (scanner/evaluate/shipping.py) gives the findings of one process, in
the same order, and survives a child or helper that fails."""

from __future__ import annotations

import datetime
import os
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from scanner import pipeline
from scanner.audit import run as auditing
from scanner.evaluate import fast, loop, shipping
from scanner.evaluate.optimize import plan_run
from scanner.evaluate.plan import RunShape
from scanner.findings.records import Finding
from scanner.runtime import executors as forking
from scanner.runtime.deadline import Deadline
from scanner.sources.files import load_paths

REPO = Path(__file__).resolve().parents[2]
NOW = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)


Run = Callable[[int], list[Finding]]


@pytest.fixture(autouse=True)
def small_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """The test process's own size is not the subject (by this point of a suite run it
    may hold over ``FORK_BELOW``); tests of the memory guard set it themselves."""
    monkeypatch.setattr(forking, "resident_bytes", lambda: 0)


@pytest.fixture
def findings(monkeypatch: pytest.MonkeyPatch) -> Run:
    ruleset = pipeline.load_ruleset(pipeline.ScanOptions(engine="cpp", enable_all=True))
    fixtures = [str(REPO / "fixtures" / "rules"), str(REPO / "fixtures" / "scenarios")]
    inventory = load_paths(fixtures, REPO)
    monkeypatch.setattr(fast, "PARALLEL_FROM", 10)
    monkeypatch.setattr(fast, "CHUNK", 3)  # chunks alternate between the processes

    def run(cpus: int) -> list[Finding]:
        monkeypatch.setattr(forking, "cpus", lambda: cpus)
        return list(pipeline.evaluate_inventory(inventory, ruleset, REPO, now=NOW).findings)

    return run


def test_two_processes_find_what_one_does(findings: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    forks: list[int] = []
    original = forking.in_two

    def counting(here: Callable[[], Any], there: Callable[[], Any]) -> tuple[Any, Any]:
        forks.append(1)
        return original(here, there)

    monkeypatch.setattr(forking, "in_two", counting)
    one = findings(1)
    two = findings(2)
    monkeypatch.setattr(fast, "CHUNK", 1_000_000)  # one chunk: the plain loop
    whole = findings(1)
    assert forks and one and two == one == whole


def test_a_failing_child_costs_only_time(findings: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    one = findings(1)
    parent = os.getpid()

    def failing_in_the_child(original: Callable[..., Any]) -> Callable[..., Any]:
        def failing(*args: Any, **kwargs: Any) -> Any:
            if os.getpid() != parent:
                os._exit(9)  # a crash, not an exception: nothing is sent back
            return original(*args, **kwargs)

        return failing

    monkeypatch.setattr(loop, "evaluate_rule", failing_in_the_child(loop.evaluate_rule))
    monkeypatch.setattr(loop, "evaluate_body", failing_in_the_child(loop.evaluate_body))
    assert findings(2) == one


def test_no_second_process_once_this_one_is_large(monkeypatch: pytest.MonkeyPatch) -> None:
    """The child's copied pages are memory too: a large run stays in one process."""
    monkeypatch.setattr(forking, "cpus", lambda: 2)
    monkeypatch.setattr(forking, "resident_bytes", lambda: forking.FORK_BELOW - 1)
    assert forking.available() is (forking.sys.platform == "linux")
    monkeypatch.setattr(forking, "resident_bytes", lambda: forking.FORK_BELOW)
    assert not forking.available()
    calls: list[str] = []
    assert forking.in_two(lambda: calls.append("here"), lambda: calls.append("there"))
    assert calls == ["here", "there"]  # both halves here, in order
    assert forking.resident_bytes() > 0 or forking.sys.platform != "linux"


# -- a helper process started early (scanner/runtime/executors.py, scanner/evaluate/shipping.py) --


def _helper_run(
    monkeypatch: pytest.MonkeyPatch,
    ruleset: pipeline.Ruleset,
    inventory: Any,
    started_with: pipeline.Ruleset | None = None,
    deadline: Deadline | None = None,
) -> tuple[list[Finding], list[object]]:
    """Findings of one run with a helper taking every complete workload it is offered
    (the fork guard held closed, as in a run past 1 GiB), and the helper's answers.
    ``started_with``: the rules the helper was forked with (default: the run's)."""
    answers: list[object] = []
    original = forking.Helper.submit

    def recording(self: Any, function: Any, *args: Any) -> Callable[..., Any]:
        wait = original(self, function, *args)

        def waiting(timeout: float | None = None) -> Any:
            answer = wait(timeout)
            answers.append(answer)
            return answer

        return waiting

    monkeypatch.setattr(forking.Helper, "submit", recording)
    monkeypatch.setattr(forking, "available", lambda: False)
    monkeypatch.setattr(shipping, "SHIP_FROM", 1)
    monkeypatch.setattr(shipping, "SHIP_AT_LEAST", 1)
    started = started_with or ruleset
    with shipping.evaluation_helper(started.rules, started.engine):
        helper = forking.helper()
        assert helper is not None
        report = pipeline.evaluate_inventory(inventory, ruleset, REPO, now=NOW, deadline=deadline)
    assert forking.helper() is None
    assert not helper._process.is_alive()  # it exits when its pipe closes
    return list(report.findings), answers


@pytest.fixture
def fixtures_run() -> tuple[pipeline.Ruleset, Any, list[Finding]]:
    ruleset = pipeline.load_ruleset(pipeline.ScanOptions(engine="cpp", enable_all=True))
    fixtures = [str(REPO / "fixtures" / "rules"), str(REPO / "fixtures" / "scenarios")]
    inventory = load_paths(fixtures, REPO)
    one = list(pipeline.evaluate_inventory(inventory, ruleset, REPO, now=NOW).findings)
    return ruleset, inventory, one


@pytest.mark.skipif(forking.sys.platform != "linux", reason="the helper is forked (Linux)")
def test_a_helper_finds_what_one_process_does(
    fixtures_run: tuple[pipeline.Ruleset, Any, list[Finding]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(forking, "cpus", lambda: 2)
    ruleset, inventory, one = fixtures_run
    helped, answers = _helper_run(monkeypatch, ruleset, inventory)
    assert answers and all(answer is not None for answer in answers)  # the helper worked
    assert helped == one


@pytest.mark.skipif(forking.sys.platform != "linux", reason="the helper is forked (Linux)")
def test_a_helper_that_died_costs_only_time(
    fixtures_run: tuple[pipeline.Ruleset, Any, list[Finding]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(forking, "cpus", lambda: 2)
    ruleset, inventory, one = fixtures_run
    original = forking.Helper.start

    def dead(context: Any) -> Any:
        helper = original(context)
        helper._process.kill()  # type: ignore[union-attr]
        helper._process.join()  # type: ignore[union-attr]
        return helper

    monkeypatch.setattr(forking.Helper, "start", dead)
    helped, answers = _helper_run(monkeypatch, ruleset, inventory)
    assert answers == [None]
    assert helped == one


@pytest.mark.skipif(forking.sys.platform != "linux", reason="the helper is forked (Linux)")
def test_a_helper_with_other_rules_leaves_the_work_here(
    fixtures_run: tuple[pipeline.Ruleset, Any, list[Finding]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The helper holds the rules of the fork; a run with rules that differ (here:
    one rule's parameters) must not be evaluated with the helper's copies."""
    monkeypatch.setattr(forking, "cpus", lambda: 2)
    ruleset, inventory, one = fixtures_run
    changed = [
        replace(rule, params={**rule.params, "minutes": 1}) if rule.id == "PG603" else rule
        for rule in ruleset.rules
    ]
    other = replace(ruleset, rules=changed)
    want = list(pipeline.evaluate_inventory(inventory, other, REPO, now=NOW).findings)
    assert want != one  # the parameter matters on the fixtures
    got, answers = _helper_run(monkeypatch, other, inventory, started_with=ruleset)
    assert answers == [None]  # the helper refused: its PG603 is another rule
    assert got == want


@pytest.mark.skipif(forking.sys.platform != "linux", reason="the helper is forked (Linux)")
def test_a_violation_naming_another_object_is_resolved_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The helper holds no objects to resolve a ``ref`` with: such work comes back
    undone and is evaluated here, with the finding on the object named."""
    monkeypatch.setattr(forking, "cpus", lambda: 2)
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "X900.yaml").write_text(
        "id: X900\nname: names-its-namespace\nlevel: warning\nsummary: s\n"
        "description: d\nremediation: r\nsubject: workload\n"
        'violations: \'[{"message": "in " + workload.namespace,'
        ' "ref": "Namespace/" + workload.namespace}]\'\n'
    )
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    (manifests / "all.yaml").write_text(
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: ml}\n---\n"
        + "---\n".join(
            f"apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: d{index}, namespace: ml}}\n"
            "spec:\n  template:\n    spec:\n      containers: [{name: c, image: x}]\n"
            for index in range(3)
        )
    )
    ruleset = pipeline.load_ruleset(
        pipeline.ScanOptions(engine="cpp", rule_dirs=(rules,), include_bundled=False)
    )
    inventory = load_paths([str(manifests)], tmp_path)
    one = list(pipeline.evaluate_inventory(inventory, ruleset, tmp_path, now=NOW).findings)
    helped, answers = _helper_run(monkeypatch, ruleset, inventory)
    assert answers == [None]  # the helper could not resolve the ref
    assert helped == one and len(one) == 3
    assert {finding.ref.kind for finding in helped if finding.ref} == {"Namespace"}


def test_the_helper_gets_complete_workloads_spread_evenly() -> None:
    """Deferred (controlled) workloads complete through the model, which stays in
    this process; the complete ones are taken evenly across the list."""
    from scanner.inventory import KubeObject, LineMap, Origin
    from scanner.model import Subject

    def subject(index: int, deferred: bool) -> Subject:
        body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p{index}"}}
        obj = KubeObject(body, Origin(f"cluster://c/p{index}"), LineMap({}))
        return Subject("workload", obj, {"workload": {}}, (lambda: None) if deferred else None)

    workloads = [subject(index, deferred=index % 3 == 0) for index in range(3_000)]
    plan = _plan({"workload": workloads})
    chosen = shipping._to_ship({"workload": workloads}, plan)
    assert chosen and all(workloads[index].complete is None for index in chosen)
    assert list(chosen.values()) == list(range(len(chosen)))
    assert sorted(chosen) == list(chosen)  # in subject order
    # Spread: each third of the list gives about a third of them.
    thirds = [sum(1 for index in chosen if index // 1_000 == part) for part in range(3)]
    assert max(thirds) - min(thirds) <= 2
    assert shipping._to_ship({"workload": workloads[: shipping.SHIP_FROM]}, plan) == {}


def _plan(subjects: dict[str, list[Any]]) -> Any:
    """The plan of a run of the bundled rules over ``subjects``."""
    ruleset = pipeline.load_ruleset(pipeline.ScanOptions(engine="cpp"))
    counts = {kind: len(items) for kind, items in subjects.items()}
    return plan_run(ruleset.rules, RunShape(ruleset.engine, {}, counts, deferring=False))


@pytest.mark.skipif(forking.sys.platform != "linux", reason="the helper is forked (Linux)")
def test_an_audit_of_a_large_snapshot_has_a_helper_and_the_same_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``poolgate audit --snapshot`` as the command runs it, in this process so the
    thresholds can be lowered: the snapshot counts as large, the fork guard is closed,
    and the helper takes the dump's complete workloads (the controlled ones, whose
    facts complete through the model, stay here)."""
    from scanner import cli
    from scanner.runtime.executors import Helper

    dump = REPO / "tests" / "audit" / "controlled" / "dump.yaml"
    argv = ["audit", "--snapshot", str(dump), "--now", "2026-01-01T00:00:00Z", "--format", "json"]
    monkeypatch.setattr(forking, "cpus", lambda: 2)
    assert cli.run([*argv, "--output", str(tmp_path / "one.json")]) == 1
    started: list[object] = []
    answered: list[object] = []
    original_start, original_submit = Helper.start, Helper.submit

    def starting(context: Any) -> Any:
        helper = original_start(context)
        started.append(helper)
        return helper

    def submitting(self: Any, function: Any, *args: Any) -> Callable[..., Any]:
        wait = original_submit(self, function, *args)

        def waiting(timeout: float | None = None) -> Any:
            answered.append(wait(timeout))
            return answered[-1]

        return waiting

    monkeypatch.setattr(Helper, "start", starting)
    monkeypatch.setattr(Helper, "submit", submitting)
    monkeypatch.setattr(auditing, "HELPER_FROM_BYTES", 0)
    monkeypatch.setattr(forking, "available", lambda: False)
    monkeypatch.setattr(shipping, "SHIP_FROM", 1)
    monkeypatch.setattr(shipping, "SHIP_AT_LEAST", 1)
    assert cli.run([*argv, "--output", str(tmp_path / "helped.json")]) == 1
    assert started and started[0] is not None
    assert answered and answered[0] is not None  # the helper did its share
    assert forking.helper() is None  # stopped with the command
    assert (tmp_path / "helped.json").read_text() == (tmp_path / "one.json").read_text()
    monkeypatch.setattr(auditing, "HELPER_FROM_BYTES", dump.stat().st_size + 1)
    assert not auditing._large(str(dump)) and auditing._large(None)  # a live audit: unknown size


def test_the_helper_gets_no_more_than_fits_beside_this_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Both processes together stay under HELPER_ROOM by estimate: the helper's share
    shrinks as this process grows, and there is none once it holds that much."""
    from scanner.inventory import KubeObject, LineMap, Origin
    from scanner.model import Subject

    def pod(index: int) -> dict[str, Any]:
        return {"kind": "Pod", "metadata": {"name": f"p{index}"}, "data": f"{index:0>1000}"}

    workloads = [
        Subject("workload", KubeObject(pod(index), Origin(f"c://p{index}"), LineMap({})), {})
        for index in range(2_000)
    ]
    sample = [shipping._shipped(workload) for workload in workloads[::31]]
    monkeypatch.setattr(forking, "resident_bytes", lambda: 0)
    roomy = forking.helper_room(sample)
    monkeypatch.setattr(forking, "resident_bytes", lambda: forking.HELPER_ROOM // 2)
    half = forking.helper_room(sample)
    assert roomy > half > 0
    # ~1 KB pickled each, held eight times over: about HELPER_ROOM / 2 / 8 KB of them
    assert half == pytest.approx(forking.HELPER_ROOM / 2 / 8 / 1_100, rel=0.2)
    monkeypatch.setattr(forking, "resident_bytes", lambda: forking.HELPER_ROOM)
    assert forking.helper_room(sample) == 0
    plan = _plan({"workload": workloads})
    assert shipping._to_ship({"workload": workloads}, plan) == {}


@pytest.mark.skipif(forking.sys.platform != "linux", reason="the helper is forked (Linux)")
def test_a_helper_past_the_deadline_answers_with_nothing_evaluated(
    fixtures_run: tuple[pipeline.Ruleset, Any, list[Finding]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The helper gets the run's deadline: past it, it evaluates none of the workloads
    shipped to it and says so, and the parent does not do them instead."""
    monkeypatch.setattr(forking, "cpus", lambda: 2)
    ruleset, inventory, one = fixtures_run
    passed = Deadline(60, ends=0.0)  # the monotonic clock, shared with the helper
    helped, answers = _helper_run(monkeypatch, ruleset, inventory, deadline=passed)
    assert len(answers) == 1 and isinstance(answers[0], tuple)
    groups, finished = answers[0]
    assert groups and not any(groups) and finished is False
    # Only findings of the built-in rules, which no subject's evaluation makes
    # (unparsable documents, invalid suppressions).
    builtin = {rule.id for rule in ruleset.rules if rule.builtin}
    assert {finding.rule_id for finding in helped} <= builtin
    assert {finding.rule_id for finding in one} - builtin


@pytest.mark.skipif(forking.sys.platform != "linux", reason="the helper is forked (Linux)")
def test_waiting_for_a_helper_gives_up_at_its_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(forking, "cpus", lambda: 2)
    helper = forking.Helper.start(None)
    assert helper is not None
    wait = helper.submit(_sleeping, 60)
    assert wait(0.05) is None  # no answer yet: not "late", a minute from now
    helper.close()  # the work is still under way: stopped
    assert not helper._process.is_alive()


def _sleeping(context: object, seconds: float) -> str:
    time.sleep(seconds)
    return "late"


def _failing(context: object) -> str:
    raise ValueError("in the helper")


def _answering(context: object, value: int) -> tuple[object, int]:
    return context, value * 2


@pytest.mark.skipif(forking.sys.platform != "linux", reason="the helper is forked (Linux)")
def test_a_helper_answers_fails_and_stops(monkeypatch: pytest.MonkeyPatch) -> None:
    """Work gets the helper's copy of the context; an exception there is None here;
    closing while work is under way (the caller failed) stops it at once."""
    monkeypatch.setattr(forking, "cpus", lambda: 2)
    helper = forking.Helper.start({"rules": "from before the fork"})
    assert helper is not None
    assert helper.submit(_answering, 21)() == ({"rules": "from before the fork"}, 42)
    assert helper.submit(_failing)() is None
    assert helper.submit(_answering, 1)() == ({"rules": "from before the fork"}, 2)  # still up
    helper.submit(_sleeping, 60)
    started = time.monotonic()
    helper.close()
    assert time.monotonic() - started < 5
    assert not helper._process.is_alive()
    monkeypatch.setattr(forking, "cpus", lambda: 1)
    assert forking.Helper.start(None) is None  # POOLGATE_JOBS=1, or one CPU


@pytest.mark.parametrize(
    ("v2", "v1", "limit", "usable"),
    [
        ("max 100000\n", None, None, 8),  # v2, no limit
        ("150000 100000\n", None, 1.5, 1),  # 1.5 CPUs: no second whole one
        ("200000 100000\n", None, 2.0, 2),
        ("400000 100000\n", None, 4.0, 4),
        (None, ("-1", "100000"), None, 8),  # v1, no limit
        (None, ("100000", "100000"), 1.0, 1),
        (None, None, None, 8),  # nothing says
        ("garbage\n", None, None, 8),
    ],
)
def test_a_containers_cpu_limit_bounds_the_processes(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    v2: str | None,
    v1: tuple[str, str] | None,
    limit: float | None,
    usable: int,
) -> None:
    """A pod with ``limits.cpu`` sees the node's CPUs but may use only its quota: a
    second process then costs memory for nothing."""
    files = {"v2": tmp_path / "cpu.max", "quota": tmp_path / "q", "period": tmp_path / "p"}
    if v2 is not None:
        files["v2"].write_text(v2)
    if v1 is not None:
        files["quota"].write_text(v1[0])
        files["period"].write_text(v1[1])
    monkeypatch.setattr(forking, "CGROUP_V2_MAX", str(files["v2"]))
    monkeypatch.setattr(forking, "CGROUP_V1_QUOTA", str(files["quota"]))
    monkeypatch.setattr(forking, "CGROUP_V1_PERIOD", str(files["period"]))
    monkeypatch.setattr(forking.os, "sched_getaffinity", lambda pid: set(range(8)), raising=False)
    monkeypatch.delenv("POOLGATE_JOBS", raising=False)
    assert forking.cpu_limit() == limit
    assert forking.cpus() == usable
    monkeypatch.setenv("POOLGATE_JOBS", "3")
    assert forking.cpus() == 3  # the user's word wins
