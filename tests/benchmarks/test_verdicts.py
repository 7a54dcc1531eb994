"""The runner's budget verdicts, on made-up measurements (no timing happens here)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from benchmarks.run import (
    AuditResult,
    Measured,
    PoolsResult,
    Report,
    SizeResult,
    audit_lines,
    parse_args,
    pools_lines,
    verdicts,
)


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


def audit(shape: str, nodes: int, pods: int, seconds: float, rss: int) -> AuditResult:
    measured = Measured(runs=[seconds], peak_rss=[rss])
    return AuditResult(shape, nodes, pods, 0 if shape == "unique" else 3_000, 1, measured)


def test_snapshot_lines_only_for_the_budget_size() -> None:
    report = Report(machine={})
    report.audit = [
        audit("controllers", 500, 10_000, 20.0, 1),
        audit("unique", 500, 10_000, 30.0, 1),
    ]
    assert verdicts(report) == ["  (nothing measured that has a budget line)"]


def test_snapshot_verdict_on_the_controllers_shape_worst_case_only_compared() -> None:
    report = Report(machine={})
    report.audit = [
        audit("controllers", 5_000, 100_000, 20.0, 3 * 2**30),
        audit("unique", 5_000, 100_000, 45.0, 2**30),
    ]
    assert verdicts(report) == [
        "  snapshot 5k nodes + 100k pods, wall: 20.00 s (budget 15 s): "
        "MISSED by 5.00 s (1.33x the budget)",
        "  snapshot 5k nodes + 100k pods, peak memory: 3.00 GiB (budget 2 GiB): "
        "MISSED by 1.00 GiB (1.50x the budget)",
        "  snapshot 5k nodes + 100k pods, worst case: every pod its own template, owners absent "
        "(no verdict): wall 45.00 s = 3.00x the budget, peak memory 1.00 GiB = 0.50x",
    ]
    # A helper process: all processes together, not the main one alone, are judged.
    report.audit[0] = audit("controllers", 5_000, 100_000, 20.0, 3 * 2**29)
    assert "peak memory: 1.50 GiB (budget 2 GiB): met" in verdicts(report)[1]
    report.audit[0].tree_pss = 5 * 2**29
    assert "peak memory: 2.50 GiB (budget 2 GiB): MISSED" in verdicts(report)[1]
    report.audit = report.audit[1:]  # --snapshot-shape unique: still no verdict
    (line,) = verdicts(report)
    assert "no verdict" in line
    assert "met" not in line and "MISSED" not in line


def test_audit_table_has_a_row_per_shape() -> None:
    report = Report(machine={})
    report.audit = [
        audit("controllers", 500, 10_000, 12.5, 300 * 2**20),
        AuditResult("unique", 500, 10_000, 0, 12_500_000, Measured(error="exit -15: killed")),
    ]
    lines = audit_lines(report)
    assert lines[0] == "audit --snapshot, 500 nodes + 10,000 pods:"
    assert lines[2].split()[-3:] == ["12.500", "300", "-"]  # no all-process run
    report.audit[0].tree_pss = 450 * 2**20
    assert audit_lines(report)[2].split()[-3:] == ["12.500", "300", "450"]
    assert lines[2].lstrip().startswith("controllers, pods share their templates")
    assert lines[3].lstrip().startswith("worst case: every pod its own template, owners absent")
    assert "FAILED" in lines[3]
    assert lines[-1] == "audit failed on the unique snapshot: exit -15: killed"
    assert lines[-2].startswith("  (peak RSS: the main process; all PSS:")
    assert audit_lines(Report(machine={})) == ["audit: skipped (--no-audit)"]
    assert audit_lines(Report(machine={}, audit=[], audit_unavailable="no such command")) == [
        "audit: not available yet"
    ]


def test_snapshot_shape_option() -> None:
    assert parse_args([]).snapshot_shapes == ["controllers", "unique"]
    assert parse_args(["--quick"]).snapshot == (500, 10_000)
    assert parse_args(["--snapshot-shape", "unique"]).snapshot_shapes == ["unique"]
    assert parse_args(["--snapshot-shape", "controllers"]).snapshot_shapes == ["controllers"]
    with pytest.raises(SystemExit):
        parse_args(["--snapshot-shape", "pods"])


def test_the_snapshot_as_a_ratio_to_compose_when_both_ran() -> None:
    """The snapshot budget is seconds on its reference machine; beside it, the ratio to
    libyaml's compose of the 10,000-object corpus in the same run, which a faster or
    slower host does not change (that machine composed it in 2.4-2.8 s)."""
    report = Report(machine={}, sizes=[size(10_000, 2.0, 2.9)])
    report.audit = [audit("controllers", 5_000, 100_000, 10.5, 2**30)]
    lines = verdicts(report)
    assert lines[-1] == (
        "  snapshot 5k nodes + 100k pods, wall / libyaml compose of 10,000 objects "
        "(same run, any host; no verdict): 5.25x, where the budget on its reference "
        "machine is 5.36-6.25x"
    )
    report.sizes = [size(1_000, 0.2, 0.5)]  # no 10,000-object compose: no ratio
    assert not [line for line in verdicts(report) if "wall / libyaml" in line]


def test_pools_table_with_and_without_a_second_checkout() -> None:
    report = Report(machine={})
    assert pools_lines(report) == ["pools x workloads: skipped (--no-pools)"]
    report.pools = [
        PoolsResult(1_000, 1_300_000, Measured(runs=[0.8], peak_rss=[100 * 2**20])),
        PoolsResult(4_000, 5_200_000, Measured(runs=[2.4], peak_rss=[300 * 2**20])),
    ]
    lines = pools_lines(report)
    assert lines[2].split() == ["1,000", "1.3", "0.800", "0.800", "100"]
    assert lines[3].split() == ["4,000", "5.2", "2.400", "0.600", "300"]
    assert verdicts(report) == [
        "  pools x workloads 1,000 -> 4,000: seconds x3.00 for x4.00 the objects "
        "(start-up included; no verdict)"
    ]
    report.against = "/elsewhere"
    report.pools[0].against = Measured(runs=[2.4])
    report.pools[1].against = Measured(error="timed out: ")
    lines = pools_lines(report)
    assert lines[2].split()[-2:] == ["2.400", "0.33x"]
    assert lines[3].split()[-2:] == ["FAILED", "-"]
    assert lines[4] == "  (against: the poolgate of /elsewhere, alternating run by run)"
    assert lines[5] == "pools x workloads failed on 4,000 (against): timed out: "


def test_pools_options(tmp_path: Path) -> None:
    assert parse_args([]).pools == [1_000, 4_000]
    assert parse_args(["--quick"]).pools == [500, 2_000]
    assert parse_args(["--pools", "100,400"]).pools == [100, 400]
    assert parse_args(["--no-pools"]).pools == []
    with pytest.raises(SystemExit):
        parse_args(["--against", str(tmp_path)])  # no scanner/ there
    (tmp_path / "scanner").mkdir()
    (tmp_path / "scanner" / "__main__.py").write_text("")
    assert parse_args(["--against", str(tmp_path)]).against == tmp_path.resolve()


def test_one_file_against_another_checkout(tmp_path: Path) -> None:
    """The one-file scan in both checkouts, alternating: each side's runs are its own
    checkout's (here a fake one whose ``scanner`` fails), and the report says both."""
    from benchmarks.run import _alternating, format_report

    other = tmp_path / "other"
    (other / "scanner").mkdir(parents=True)
    (other / "scanner" / "__init__.py").write_text("")
    (other / "scanner" / "__main__.py").write_text("raise SystemExit(7)\n")
    target = tmp_path / "one.yaml"
    target.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n")
    args = parse_args(["--against", str(other), "--timeout", "120"])
    args.env = None
    argv = [sys.executable, "-m", "scanner", "scan", str(target), "--format", "json"]
    mine, theirs = _alternating(argv, args)
    assert len(mine.runs) == 5 and mine.error is None
    assert theirs.runs == [] and theirs.error is not None and theirs.error.startswith("exit 7")

    report = Report(machine=_machine(), one_file=Measured(runs=[0.2]), against=str(other))
    report.one_file_against = Measured(runs=[0.25])
    lines = format_report(report).splitlines()
    mark = lines.index("one small file (pre-commit, start-up included): 0.200 s (median of 1)")
    assert lines[mark + 1] == (
        f"  against {other}: 0.250 s, alternating run by run; this/against 0.80x"
    )


def _machine() -> dict[str, object]:
    return {
        "python": "3",
        "platform": "p",
        "cpus": 2,
        "pyyaml": "6",
        "libyaml": True,
        "loadavg_start": None,
    }
