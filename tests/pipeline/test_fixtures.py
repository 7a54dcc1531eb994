"""Fixture markers: ``# expect:`` on a line, ``# expect-cluster:`` for findings about the
cluster as a whole, which have no line in the file."""

from __future__ import annotations

from collections import Counter
from functools import cache
from pathlib import Path

from scanner.pipeline import Ruleset, ScanOptions, load_ruleset
from scanner.pipeline.fixtures import CLUSTER_LINE, check_file, expected_lines

ROOT = Path(__file__).resolve().parents[2]
WARN_ONLY = ROOT / "fixtures" / "rules" / "PG605" / "fire-warn-only.yaml"


@cache
def ruleset() -> Ruleset:
    return load_ruleset(ScanOptions(enable_all=True))


def test_markers_count_lines_and_the_cluster() -> None:
    text = (
        "# expect-cluster: PG605\n"
        "kind: Pod  # expect: PG301 x2, PG501\n"
        "# expect-cluster: PG605, PG999\n"
        "name: x  # expect: PG605\n"
    )
    assert expected_lines(text, "PG605") == Counter({CLUSTER_LINE: 2, 4: 1})
    assert expected_lines(text, "PG301") == Counter({2: 2})


def test_a_cluster_finding_matches_only_a_cluster_marker(tmp_path: Path) -> None:
    passed = check_file(WARN_ONLY, "PG605", ruleset(), expect_findings=True)
    assert passed.ok, passed.explain()
    assert passed.actual == Counter({CLUSTER_LINE: 1})

    text = WARN_ONLY.read_text().replace("# expect-cluster: PG605", "# (no marker)")
    text = text.replace("  name: gpu-pod-floor\n", "  name: gpu-pod-floor  # expect: PG605\n", 1)
    wrong = tmp_path / "fire-on-a-line.yaml"
    wrong.write_text(text)
    failed = check_file(wrong, "PG605", ruleset(), expect_findings=True)
    assert not failed.ok
    assert failed.explain() == "expected on line(s) 9 but not found; unexpected on the cluster"
