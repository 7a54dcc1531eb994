"""Fixtures of the equivalence tests: each case's plain findings, computed once."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from scanner import pipeline
from scanner.cel import cpp_available
from scanner.evaluate import evaluator
from scanner.evaluate.evaluator import Evaluation

from .cases import Case, evaluated, make_case

ENGINES = ["cpp", "python"] if cpp_available() else ["python"]
RULES = Path(__file__).parent / "rules"


@pytest.fixture(scope="session")
def rulesets() -> dict[str, pipeline.Ruleset]:
    """Every bundled rule, and rules of the tests' own that read their parameters
    where the bundled ones do not (``RULES``)."""
    return {
        name: pipeline.load_ruleset(
            pipeline.ScanOptions(engine=name, enable_all=True, rule_dirs=(RULES,))
        )
        for name in ENGINES
    }


@pytest.fixture(scope="session")
def cases(
    tmp_path_factory: pytest.TempPathFactory, rulesets: dict[str, pipeline.Ruleset]
) -> Callable[[str], Case]:
    """Case name -> the case, made on first use."""
    made: dict[str, Case] = {}
    rules = next(iter(rulesets.values())).rules

    def case(name: str) -> Case:
        if name not in made:
            made[name] = make_case(name, rules, tmp_path_factory.mktemp("case"))
        return made[name]

    return case


@pytest.fixture(scope="session")
def plain(
    cases: Callable[[str], Case], rulesets: dict[str, pipeline.Ruleset]
) -> Callable[[str, str], Evaluation]:
    """(case, engine) -> its findings on the plain path (scanner/evaluate/evaluator.py)."""
    done: dict[tuple[str, str], Evaluation] = {}

    def findings(name: str, engine: str) -> Evaluation:
        if (name, engine) not in done:
            done[(name, engine)] = evaluated(cases(name), rulesets[engine], evaluator.evaluate)
        return done[(name, engine)]

    return findings
