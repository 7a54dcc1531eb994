"""Coverage-guided fuzzing of poolgate's input path with atheris (not run in CI).

Each input is read as manifest text (UTF-8, undecodable bytes replaced) and goes
through what ``poolgate scan`` does with a file: parse_stream (libyaml, the limits,
the walk), the model, every bundled rule on the chosen CEL engine, and every
reporter. Anything but a clean return is a bug: an exception, a crash of libyaml or
a CEL runtime, a hang (atheris' -timeout), or memory past -rss_limit_mb. With
``--compare`` each input also runs on the pure-Python engine and the findings must
match (slower, and the check that found a NUL-truncation bug in cel-expr-python).

    pip install -e '.[fuzz]'
    python fuzz/fuzz_yaml.py -max_len=4096 -timeout=20 -rss_limit_mb=2048 fuzz/corpus
    python fuzz/fuzz_yaml.py --compare -runs=20000 fuzz/corpus

Seed the corpus directory with manifests (fixtures/demo, fixtures/hostile) first;
atheris writes each crashing input to crash-<hash> in the working directory, and
``python fuzz/fuzz_yaml.py crash-<hash>`` replays it.
"""

from __future__ import annotations

import datetime
import io
import sys
from functools import cache
from pathlib import Path
from typing import Any

import atheris

with atheris.instrument_imports(include=["scanner"]):
    from scanner.pipeline import Ruleset, ScanOptions, evaluate_inventory, load_ruleset
    from scanner.reporters import FORMATS, Report, writer_for
    from scanner.sources.yaml.document import parse_stream

NOW = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
COMPARE = "--compare" in sys.argv


@cache
def ruleset(engine: str) -> Ruleset:
    return load_ruleset(ScanOptions(engine=engine, enable_all=True))


def scan(text: str, engine: str) -> Report:
    inventory = parse_stream(text, "fuzz.yaml")
    report = evaluate_inventory(inventory, ruleset(engine), Path("/r"), now=NOW)
    for fmt in FORMATS:
        writer_for(fmt)(report, io.StringIO())
    return report


def comparable(report: Report) -> list[tuple[Any, ...]]:
    """Findings as both engines must agree on them (error texts are each engine's own)."""
    return sorted(
        (
            f.rule_id,
            f.location.line,
            f.location.column,
            f.location.path,
            f.level,
            f.outcome.value,
            f.message if f.outcome.value == "fail" else "",
        )
        for f in report.findings
    )


def test_one_input(data: bytes) -> None:
    text = data.decode("utf-8", "replace")
    report = scan(text, "cpp")
    if COMPARE:
        python = scan(text, "python")
        if comparable(report) != comparable(python):
            raise AssertionError(f"engines disagree:\n{comparable(report)}\n{comparable(python)}")


def main() -> None:
    ruleset("cpp")  # load once, outside the measured runs
    if COMPARE:
        ruleset("python")
    argv = [argument for argument in sys.argv if argument != "--compare"]
    atheris.Setup(argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
