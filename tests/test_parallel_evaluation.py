"""Evaluation on two processes (scanner/engine.py, scanner/forking.py) gives the
findings of one process, in the same order, and survives a child that fails."""

from __future__ import annotations

import datetime
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from scanner import engine, forking, pipeline
from scanner.findings import Finding
from scanner.sources.files import load_paths

REPO = Path(__file__).resolve().parents[1]
NOW = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)


Run = Callable[[int], list[Finding]]


@pytest.fixture
def findings(monkeypatch: pytest.MonkeyPatch) -> Run:
    ruleset = pipeline.load_ruleset(pipeline.ScanOptions(engine="cpp", enable_all=True))
    fixtures = [str(REPO / "fixtures" / "rules"), str(REPO / "fixtures" / "scenarios")]
    inventory = load_paths(fixtures, REPO)
    monkeypatch.setattr(engine, "PARALLEL_FROM", 10)
    monkeypatch.setattr(engine, "CHUNK", 3)  # chunks alternate between the processes

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
    monkeypatch.setattr(engine, "CHUNK", 1_000_000)  # one chunk: the plain loop
    whole = findings(1)
    assert forks and one and two == one == whole


def test_a_failing_child_costs_only_time(findings: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    one = findings(1)
    parent = os.getpid()
    original = engine._run_rule

    def failing_in_the_child(*args: Any, **kwargs: Any) -> Any:
        if os.getpid() != parent:
            os._exit(9)  # a crash, not an exception: nothing is sent back
        return original(*args, **kwargs)

    monkeypatch.setattr(engine, "_run_rule", failing_in_the_child)
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
