from __future__ import annotations

from scanner.findings.report import Report
from scanner.reporters.tally import Tally, plural, summary_line, tally


def test_tally_keeps_rule_errors_and_suppressed_out_of_the_level_counts(report: Report) -> None:
    assert tally(report.findings) == Tally(
        errors=2, warnings=0, notes=1, rule_errors=1, suppressed=1
    )


def test_plural() -> None:
    assert plural(1, "file") == "1 file"
    assert plural(0, "file") == "0 files"
    assert plural(2, "index", "indices") == "2 indices"


def test_summary_for_a_clean_single_file() -> None:
    line = summary_line(Tally(), files=1, objects=1, suppressed_shown=False)
    assert line == "no findings in 1 file, 1 object"


def test_summary_for_a_cluster_audit_leaves_out_files() -> None:
    line = summary_line(Tally(warnings=1), files=0, objects=40, suppressed_shown=False)
    assert line == "1 finding (1 warning) in 40 objects"


def test_summary_names_everything_left_out() -> None:
    counts = Tally(errors=1, notes=2, rule_errors=1, suppressed=3)
    line = summary_line(counts, files=2, objects=5, suppressed_shown=False, skipped_documents=1)
    assert line == (
        "3 findings (1 error, 2 notes) in 2 files, 5 objects; 3 suppressed findings hidden; "
        "1 rule error (results incomplete); 1 non-Kubernetes document skipped"
    )


def test_a_run_that_could_not_read_an_input_never_reads_as_clean() -> None:
    """Found in review: a file skipped as too large left "no findings in 1 file"."""
    line = summary_line(Tally(), files=1, objects=0, suppressed_shown=False, incomplete=1)
    assert line == "no findings in 1 file; 1 input error above (results incomplete)"
