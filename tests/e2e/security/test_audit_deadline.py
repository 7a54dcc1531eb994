"""The audit's ``--deadline`` bounds the whole run, evaluation included (issue 21,
item 5): objects or rules that make the evaluation slow cannot hang the nightly
audit past its Job's deadline. Rules not finished when it passes are named in an
error notification, the exit code is 3, and the report is written with what was
evaluated. Outcomes are asserted, not timings; the subprocess timeout is generous.
"""

from __future__ import annotations

import datetime
import itertools
import json
from pathlib import Path

import pytest
from cli_run import poolgate

from scanner import pipeline
from scanner.inventory import Inventory
from scanner.runtime import executors as forking
from scanner.runtime.deadline import Deadline
from scanner.sources.files import load_paths

REPO = Path(__file__).resolve().parents[3]
NOW = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
SLOW = ["SLOW901", "SLOW902", "SLOW903"]


def _slow_rules(directory: Path, slow: bool = True) -> None:
    """Rules that each run 9,261 comprehension iterations per Namespace: under the
    cost limit (10,000), so every evaluation completes, slowly; then each reports the
    Namespace. ``slow=False``: the same rules without the iterations."""
    directory.mkdir()
    numbers = ", ".join(str(i) for i in range(21 if slow else 1))
    for rule_id in SLOW:
        (directory / f"{rule_id}-slow.yaml").write_text(
            f"""\
id: {rule_id}
name: slow-{rule_id.lower()}
level: warning
summary: A rule that is slow on purpose.
description: Nested comprehensions over a list literal on every Namespace.
remediation: Nothing to do.
subject: namespace
validations:
  - expression: >-
      [{numbers}].all(a, [{numbers}].all(b, [{numbers}].all(c, a + b + c >= 0)))
      && object.metadata.name == ""
    message: every Namespace
""",
            encoding="utf-8",
        )


def test_a_slow_evaluation_stops_at_the_deadline_and_says_which_rules(tmp_path: Path) -> None:
    """The rules reported every Namespace last night (fast then); tonight they are slow
    and the deadline passes: the report is written, names them, exits 3, and drift
    calls none of last night's findings resolved."""
    _slow_rules(tmp_path / "fast", slow=False)
    _slow_rules(tmp_path / "slow")
    items = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": f"team-{i}"}}
        for i in range(3_000)
    ]
    snapshot = tmp_path / "snapshot.json"
    snapshot.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    audit = ("audit", "--snapshot", str(snapshot), "--fail-on", "never", "--format", "json")
    last = tmp_path / "last.json"
    run = poolgate(*audit, "--rules", str(tmp_path / "fast"), "--output", str(last))
    assert run.returncode == 0, run.stderr
    assert len(json.loads(last.read_text())["findings"]) == 3 * 3_000
    report = tmp_path / "report.json"
    # Without the deadline these rules take about 10-50 s here; the timeout is generous.
    run = poolgate(
        *audit,
        "--rules",
        str(tmp_path / "slow"),
        "--deadline",
        "1",
        "--compare",
        str(last),
        "--output",
        str(report),
        timeout=300,
    )
    assert run.returncode == 3, run.stderr
    written = json.loads(report.read_text())
    (note,) = [n for n in written["notifications"] if "--deadline" in n["message"]]
    assert note["level"] == "error"
    assert all(rule_id in note["message"] for rule_id in SLOW), note["message"]
    assert "passed before these rules finished" in note["message"]
    assert len(written["findings"]) < 3 * 3_000
    assert written["drift"]["resolved"] == []
    assert len(written["drift"]["unverified"]) == 3 * 3_000 - len(written["findings"])


def _fixtures() -> tuple[pipeline.Ruleset, Inventory]:
    ruleset = pipeline.load_ruleset(pipeline.ScanOptions(engine="cpp", enable_all=True))
    return ruleset, load_paths([str(REPO / "fixtures" / "scenarios")], REPO)


def _counted(checks: int) -> Deadline:
    """A deadline that passes at its ``checks``-th look at the clock (one per subject)."""
    return Deadline(60, ends=checks, clock=itertools.count(1).__next__)


def test_the_evaluation_stops_between_subjects(monkeypatch: pytest.MonkeyPatch) -> None:
    """Counted, not timed: a deadline that passes after some subjects leaves the
    findings of those subjects, names the rules that did not get through theirs, and
    makes the run incomplete (exit code 3); one that never passes changes nothing."""
    monkeypatch.setattr(forking, "cpus", lambda: 1)  # one process, one counting clock
    ruleset, inventory = _fixtures()
    whole = pipeline.evaluate_inventory(inventory, ruleset, REPO, now=NOW)
    builtin = {rule.id for rule in ruleset.rules if rule.builtin}
    late = pipeline.evaluate_inventory(
        inventory,
        ruleset,
        REPO,
        now=NOW,
        deadline=_counted(10**9),
    )
    assert late.findings == whole.findings and not late.stats.unfinished
    assert not [n for n in late.notifications if "--deadline" in n.message]

    for checks in (1, 40):
        cut = pipeline.evaluate_inventory(
            inventory,
            ruleset,
            REPO,
            now=NOW,
            deadline=_counted(checks),
        )
        found = {finding.fingerprint for finding in cut.findings}
        assert found < {finding.fingerprint for finding in whole.findings}
        evaluated = {f.rule_id for f in cut.findings} - builtin
        assert bool(evaluated) is (checks > 1)  # the first subject was not evaluated
        assert cut.stats.unfinished and not cut.stats.unfinished & builtin
        (note,) = [n for n in cut.notifications if "--deadline" in n.message]
        assert note.level.name == "ERROR"
        assert all(rule_id in note.message for rule_id in cut.stats.unfinished)
        assert pipeline.exit_code(cut, "never") == 3
