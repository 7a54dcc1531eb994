"""The runner's budget verdicts, on made-up measurements (no timing happens here)."""

from __future__ import annotations

from benchmarks.run import Measured, Report, SizeResult, verdicts


def size(objects: int, libyaml: float, poolgate: float) -> SizeResult:
    return SizeResult(
        objects, 1, 1, libyaml=Measured(runs=[libyaml]), poolgate=Measured(runs=[poolgate])
    )


def test_met_and_missed_lines_say_by_how_much() -> None:
    report = Report(machine={}, sizes=[size(1_000, 0.3, 0.6), size(10_000, 3.0, 6.0)])
    report.one_file = Measured(runs=[0.30, 0.31, 0.29])
    lines = verdicts(report)
    assert (
        "10,000 objects, poolgate / libyaml compose: 2.00x (budget 1.5x): MISSED by 0.50x"
        in (lines[0])
    )
    assert lines[2] == "  one small file, warm: 0.30 s (budget 0.35 s): met"
    assert lines[-1].startswith("  growth 1,000 -> 10,000: seconds per object x1.00")


def test_snapshot_lines_only_for_the_budget_size() -> None:
    report = Report(machine={})
    small = {"available": True, "nodes": 500, "pods": 10_000, "seconds": 20.0, "peak_rss": 1}
    report.audit = small
    assert verdicts(report) == ["  (nothing measured that has a budget line)"]
    report.audit = small | {"nodes": 5_000, "pods": 100_000, "peak_rss": 3 * 2**30}
    assert verdicts(report) == [
        "  snapshot 5k nodes + 100k pods, wall: 20.00 s (budget 15 s): "
        "MISSED by 5.00 s (1.33x the budget)",
        "  snapshot 5k nodes + 100k pods, peak RSS: 3.00 GiB (budget 2 GiB): "
        "MISSED by 1.00 GiB (1.50x the budget)",
    ]
