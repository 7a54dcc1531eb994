"""Each executor of the fast path gives the plain path's findings, in the same order:
two processes (a forked child evaluates every other chunk of each subject type) and
the helper process (it evaluates a share of the complete workloads, shipped to it).

The thresholds from which they start are lowered so that every case uses them; the
processes run on Linux (fork) with a second CPU, which the tests pretend to have.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import pytest

from scanner import pipeline
from scanner.evaluate import fast, shipping
from scanner.evaluate.evaluator import Evaluation
from scanner.model import build_model
from scanner.runtime import executors
from scanner.sources.yaml.document import parse_plain

from .cases import CASES, SMALL, Case, assert_same, evaluated
from .conftest import ENGINES

RUNS = [("cpp", name) for name in CASES if "cpp" in ENGINES] + [("python", name) for name in SMALL]

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the processes are forked")


@pytest.fixture(autouse=True)
def two_cpus(monkeypatch: pytest.MonkeyPatch) -> None:
    """A second CPU, and this process small enough to fork (the test process's own
    size is not the subject)."""
    monkeypatch.setattr(executors, "cpus", lambda: 2)
    monkeypatch.setattr(executors, "resident_bytes", lambda: 0)


@pytest.mark.parametrize(("engine", "name"), RUNS)
def test_two_processes_give_the_plain_findings(
    engine: str,
    name: str,
    cases: Callable[[str], Case],
    rulesets: dict[str, pipeline.Ruleset],
    plain: Callable[[str, str], Evaluation],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    forks: list[int] = []
    original = executors.in_two

    def counting(here: Callable[[], Any], there: Callable[[], Any]) -> tuple[Any, Any]:
        forks.append(1)
        return original(here, there)

    monkeypatch.setattr(executors, "in_two", counting)
    monkeypatch.setattr(fast, "PARALLEL_FROM", 1)
    monkeypatch.setattr(fast, "CHUNK", 3)  # chunks alternate between the processes
    got = evaluated(cases(name), rulesets[engine], fast.evaluate)
    assert forks == [1]
    assert_same(got, plain(name, engine))


@pytest.mark.parametrize(("engine", "name"), RUNS)
def test_the_helper_process_gives_the_plain_findings(
    engine: str,
    name: str,
    cases: Callable[[str], Case],
    rulesets: dict[str, pipeline.Ruleset],
    plain: Callable[[str, str], Evaluation],
    monkeypatch: pytest.MonkeyPatch,
    answers: list[object],
) -> None:
    """The fork guard held closed, as in a run past ``FORK_BELOW``: the helper gets
    every complete workload it is offered, and answers for them (a share that comes
    back unanswered is evaluated here: ``answers`` shows the helper did the work)."""
    monkeypatch.setattr(executors, "available", lambda: False)
    monkeypatch.setattr(shipping, "SHIP_FROM", 1)
    monkeypatch.setattr(shipping, "SHIP_AT_LEAST", 1)
    ruleset = rulesets[engine]
    case = cases(name)
    with shipping.evaluation_helper(ruleset.rules, ruleset.engine):
        got = evaluated(case, ruleset, fast.evaluate)
    assert_same(got, plain(name, engine))
    model = build_model(case.inventory, ruleset.config, case.scope, read_yaml=parse_plain)
    complete = [w for w in model.workloads if w.deferred is None and not w.obj.context_only]
    assert None not in answers
    # One or two workloads are not shipped however low the thresholds: by the cost
    # model, this process would then be left with less than its half.
    assert answers or len(complete) < 3


@pytest.fixture
def answers() -> list[object]:
    """The helper's answers in a test (None: it failed, and the parent did the work)."""
    return []


@pytest.fixture(autouse=True)
def recording(monkeypatch: pytest.MonkeyPatch, answers: list[object]) -> None:
    original = executors.Helper.submit

    def submitting(self: Any, function: Any, *args: Any) -> Callable[..., Any]:
        wait = original(self, function, *args)

        def waiting(timeout: float | None = None) -> Any:
            answers.append(wait(timeout))
            return answers[-1]

        return waiting

    monkeypatch.setattr(executors.Helper, "submit", submitting)
