"""Each speed-up of the evaluation, and all of them together, give the plain path's
findings, fingerprint for fingerprint and in the same order, on every case.

The plain path is scanner/evaluate/evaluator.py alone; the speed-ups are those of
scanner/evaluate/optimize/ (``SPEEDUPS``), applied by the fast path
(scanner/evaluate/fast.py) one at a time, then together. A speed-up added there is
tested here (the tests are parametrized by ``SPEEDUPS``), and must change the plan of
some rule on these cases (``test_each_speedup_changes_some_plan``): a speed-up that
never applies would make its test one that cannot fail.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import pytest

from scanner import pipeline
from scanner.evaluate import fast, plan
from scanner.evaluate.evaluator import Evaluation
from scanner.evaluate.optimize import SPEEDUPS, plan_run
from scanner.evaluate.plan import Plan, RulePlan
from scanner.runtime import executors

from .cases import CASES, SMALL, Case, assert_same, evaluated
from .conftest import ENGINES

RUNS = [("cpp", name) for name in CASES if "cpp" in ENGINES] + [("python", name) for name in SMALL]


@pytest.fixture(autouse=True)
def one_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """The speed-ups alone: both shares of a large case in this process
    (tests/equivalence/test_executors.py compares the processes)."""
    monkeypatch.setattr(executors, "cpus", lambda: 1)


@pytest.fixture
def everywhere(monkeypatch: pytest.MonkeyPatch) -> None:
    """Speed-ups that pay only from some number of subjects on apply from one."""
    monkeypatch.setattr(plan, "PAYS_FROM", 1)


@pytest.mark.usefixtures("everywhere")
@pytest.mark.parametrize("speedup", list(SPEEDUPS))
@pytest.mark.parametrize(("engine", "name"), RUNS)
def test_each_speedup_gives_the_plain_findings(
    speedup: str,
    engine: str,
    name: str,
    cases: Callable[[str], Case],
    rulesets: dict[str, pipeline.Ruleset],
    plain: Callable[[str, str], Evaluation],
) -> None:
    got = evaluated(cases(name), rulesets[engine], partial(fast.evaluate, speedups=[speedup]))
    assert_same(got, plain(name, engine))


@pytest.mark.parametrize("where", ["everywhere", "where-they-pay"])
@pytest.mark.parametrize(("engine", "name"), RUNS)
def test_every_speedup_together_gives_the_plain_findings(
    where: str,
    engine: str,
    name: str,
    cases: Callable[[str], Case],
    rulesets: dict[str, pipeline.Ruleset],
    plain: Callable[[str, str], Evaluation],
    request: pytest.FixtureRequest,
) -> None:
    """Together, as a run applies them: where they pay (the default), and everywhere."""
    if where == "everywhere":
        request.getfixturevalue("everywhere")
    got = evaluated(cases(name), rulesets[engine], fast.evaluate)
    assert_same(got, plain(name, engine))


@pytest.mark.skipif("cpp" not in ENGINES, reason="cel-expr-python not installed")
@pytest.mark.usefixtures("everywhere")
@pytest.mark.parametrize("speedup", list(SPEEDUPS))
def test_each_speedup_changes_some_plan(
    speedup: str,
    cases: Callable[[str], Case],
    rulesets: dict[str, pipeline.Ruleset],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """On some case, the speed-up gives some rule a plan other than the plain one:
    its equivalence test above compares something."""
    made: list[Plan] = []

    def recording(*args: Any, **kwargs: Any) -> Plan:
        made.append(plan_run(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(fast, "plan_run", recording)
    changed = set()
    for name in CASES:
        made.clear()
        evaluated(cases(name), rulesets["cpp"], partial(fast.evaluate, speedups=[speedup]))
        [run_plan] = made  # one plan per run
        changed |= {each.rule.id for each in run_plan.rules if each != RulePlan.of(each.rule)}
    assert changed, f"{speedup} changed no rule's plan on any case"
