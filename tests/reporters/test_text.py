from __future__ import annotations

from collections.abc import Callable

from scanner.config.provenance import PolicyRecord
from scanner.findings.records import Finding, Level, Location
from scanner.findings.report import Report, RunStats
from scanner.reporters import Display

from .conftest import POLICY

Render = Callable[..., str]


def test_findings_are_grouped_under_their_file(report: Report, render: Render) -> None:
    lines = render(report, "text").splitlines()
    assert lines[:12] == [
        "bad dir/broken#1.yaml",
        "bad dir/broken#1.yaml:3:14 error PG001 mapping values are not allowed here",
        "  see poolgate rules show PG001",  # a rule the run did not list: no name
        "",
        "cluster://prod@eks/v1/Node/gpu-node-1",
        "cluster://prod@eks/v1/Node/gpu-node-1 note PG401 node has no pool label",
        "  node-pool-label: poolgate rules show PG401",
        "",
        "k8s/train.yaml",
        "k8s/train.yaml:5:3 rule-error PG103 no such key: runtimeClassName",
        "  gpu-runtime-class: poolgate rules show PG103",
        'k8s/train.yaml:12:9 error PG301 container "cuda" runs privileged',
    ]
    assert lines[12] == "  privileged-outside-operator: poolgate rules show PG301"


def test_notifications_then_counts_per_rule_then_summary_close_the_report(
    report: Report, render: Render
) -> None:
    lines = render(report, "text").splitlines()
    assert lines[-10:] == [
        "",
        "poolgate: warning: k8s/secret.yaml: cannot read: permission denied",
        "poolgate: note: rule disabled by config (PG204)",
        "",
        # The findings that count (not suppressed, not rule errors), most severe first.
        "RULE   NAME                         LEVEL  FINDINGS",
        "PG001                               error  1",
        "PG301  privileged-outside-operator  error  1",
        "PG401  node-pool-label              note   1",
        "",
        "3 findings (2 errors, 1 note) in 4 files, 12 objects; 1 suppressed finding hidden; "
        "1 rule error (results incomplete)",
    ]


def test_what_a_run_leaves_out_is_in_the_summary(
    make_report: Callable[..., Report], render: Render
) -> None:
    stats = RunStats(files=4, objects=12, excluded=3, hidden=2)
    summary = render(make_report(stats=stats), "text").splitlines()[-1]
    assert "2 findings below --min-level hidden" in summary
    assert "3 files excluded" in summary


def test_suppressed_findings_are_hidden_by_default(report: Report, render: Render) -> None:
    output = render(report, "text")
    assert "PG204 no toleration" not in output
    assert "1 suppressed finding hidden" in output


def test_suppressed_findings_shown_on_request(
    make_report: Callable[..., Report], render: Render
) -> None:
    output = render(make_report(), "text", Display(show_suppressed=True))
    assert (
        "k8s/train.yaml:20:7 warning PG204 no toleration for taint nvidia.com/gpu "
        "[suppressed in-source: pool is untainted during migration]"
    ) in output
    assert "1 suppressed finding shown" in output
    # Shown is not counted: the summary still has 3 findings.
    assert output.splitlines()[-1].startswith("3 findings (2 errors, 1 note)")


def test_verbose_counts_skipped_documents(
    make_report: Callable[..., Report], render: Render
) -> None:
    assert "2 non-Kubernetes documents skipped" not in render(make_report(), "text")
    assert "2 non-Kubernetes documents skipped" in render(
        make_report(), "text", Display(verbose=True)
    )


def test_colour_only_when_asked(make_report: Callable[..., Report], render: Render) -> None:
    assert "\x1b[" not in render(make_report(), "text")
    coloured = render(make_report(), "text", Display(color=True))
    assert "\x1b[31merror\x1b[0m PG301" in coloured
    assert "\x1b[35mrule-error\x1b[0m PG103" in coloured


def test_clean_run_prints_only_the_summary(
    make_report: Callable[..., Report], render: Render
) -> None:
    report = make_report(findings=(), notifications=(), stats=RunStats(files=1, objects=3))
    assert render(report, "text") == "no findings in 1 file, 3 objects\n"


def test_control_characters_from_manifests_cannot_drive_the_terminal(
    make_report: Callable[..., Report], render: Render
) -> None:
    hostile = Finding(
        rule_id="PG301",
        level=Level.ERROR,
        message="name \x1b[2Jcleared\nfake line \u202eevil\u2028next pri\u200bvileged\u200f",
        location=Location("k8s/x.yaml", 1, 1),
        ref=None,
    )
    output = render(make_report(findings=(hostile,), notifications=()), "text")
    assert "\x1b" not in output
    assert "\u202e" not in output
    assert r"name \x1b[2Jcleared\nfake line \u202eevil\u2028next pri\u200bvileged\u200f" in output


def test_the_config_line_names_the_policy_before_the_summary(
    make_report: Callable[..., Report], render: Render
) -> None:
    lines = render(make_report(policy=POLICY), "text").splitlines()
    assert lines[-2] == (
        f"config: .poolgate.yaml from origin/main (commit {'c' * 12}), sha256 {'a' * 64}; "
        f"1 rule file; baseline poolgate-baseline.json, sha256 {'d' * 64}; "
        f"1 policy file differs from origin/main (commit {'c' * 12}) in the work tree"
    )
    assert lines[-1].startswith("3 findings (2 errors, 1 note)")
    clean = make_report(
        findings=(), notifications=(), stats=RunStats(files=1), policy=PolicyRecord("defaults")
    )
    assert render(clean, "text") == (
        "config: built-in defaults (no .poolgate.yaml found)\nno findings in 1 file\n"
    )
    work_tree = PolicyRecord("work-tree", "k8s/\x1b[2J.poolgate.yaml", "e" * 64)
    shown = render(make_report(findings=(), notifications=(), policy=work_tree), "text")
    assert (
        shown.splitlines()[0]
        == f"config: k8s/\\x1b[2J.poolgate.yaml (work tree), sha256 {'e' * 64}"
    )
