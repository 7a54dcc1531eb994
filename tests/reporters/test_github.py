from __future__ import annotations

from collections.abc import Callable

from scanner.findings.records import Finding, Level, Location
from scanner.findings.report import Report
from scanner.reporters import Display
from scanner.reporters.github import escape_data, escape_property

from .conftest import POLICY

Render = Callable[..., str]


def test_one_command_per_visible_finding_then_notifications_then_summary(
    report: Report, render: Render
) -> None:
    assert render(report, "github").splitlines() == [
        "::error file=bad dir/broken#1.yaml,line=3,col=14,title=PG001"
        "::mapping values are not allowed here",
        "::notice title=PG401 node-pool-label"
        "::cluster://prod@eks/v1/Node/gpu-node-1: node has no pool label",
        "::error file=k8s/train.yaml,line=5,col=3,title=PG103 gpu-runtime-class (rule error)"
        "::rule could not be evaluated: no such key: runtimeClassName",
        "::error file=k8s/train.yaml,line=12,col=9,title=PG301 privileged-outside-operator"
        '::container "cuda" runs privileged',
        "::warning file=k8s/secret.yaml,title=poolgate::cannot read: permission denied",
        "::notice title=poolgate PG204::rule disabled by config",
        "poolgate: 3 findings (2 errors, 1 note) in 4 files, 12 objects; "
        "1 suppressed finding hidden; 1 rule error (results incomplete)",
    ]


def test_suppressed_finding_shown_on_request_is_a_notice(
    make_report: Callable[..., Report], render: Render
) -> None:
    output = render(make_report(), "github", Display(show_suppressed=True))
    assert (
        "::notice file=k8s/train.yaml,line=20,col=7,title=PG204 pool-toleration (suppressed)"
        "::no toleration for taint nvidia.com/gpu "
        "[suppressed in-source: pool is untainted during migration]"
    ) in output.splitlines()


def test_escaping_follows_the_actions_runner() -> None:
    assert escape_data("100% done\r\nnext") == "100%25 done%0D%0Anext"
    assert escape_property("a:b,c%") == "a%3Ab%2Cc%25"


def test_untrusted_text_cannot_start_a_second_command(
    make_report: Callable[..., Report], render: Render
) -> None:
    hostile = Finding(
        rule_id="PG301",
        level=Level.WARNING,
        message="image x\n::error::forged",
        location=Location("k8s/a,b:c.yaml", 2, 3),
        ref=None,
    )
    lines = render(make_report(findings=(hostile,), notifications=()), "github").splitlines()
    assert lines[0] == (
        "::warning file=k8s/a%2Cb%3Ac.yaml,line=2,col=3,title=PG301 privileged-outside-operator"
        "::image x\\n::error::forged"
    )
    assert len(lines) == 2


def test_control_characters_from_manifests_are_shown_as_escapes(
    make_report: Callable[..., Report], render: Render
) -> None:
    """The Actions log renders ANSI sequences: an ESC from a manifest's name must not
    reach it raw, as in the text report."""
    hostile = Finding(
        rule_id="PG301",
        level=Level.WARNING,
        message="GPU Deployment tr\x01ain in namespace ml\x1b[2J",
        location=Location("k8s/a.yaml", 2, 3),
        ref=None,
    )
    line = render(make_report(findings=(hostile,), notifications=()), "github").splitlines()[0]
    assert line.endswith("::GPU Deployment tr\\x01ain in namespace ml\\x1b[2J")
    assert "\x1b" not in line and "\x01" not in line


def test_the_log_names_the_config_before_the_summary(
    make_report: Callable[..., Report], render: Render
) -> None:
    lines = render(make_report(policy=POLICY), "github").splitlines()
    assert lines[-2].startswith(
        f"poolgate: config: .poolgate.yaml from origin/main (commit {'c' * 12}), sha256 "
    )
    assert lines[-1].startswith("poolgate: 3 findings")
