"""``poolgate audit``: a live cluster, or a snapshot of one, with the rules (the live-only
ones included), and what changed since a previous report (``--compare``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from scanner.cli.cluster import ClusterOptions, cluster_options, load_ruleset, read_live
from scanner.cli.options import color_option
from scanner.cli.reports import ReportOptions, report_options, write_reports
from scanner.errors import UsageError

if TYPE_CHECKING:
    import datetime

    from scanner.findings.report import Report
    from scanner.reporters import Writer
    from scanner.sources.snapshot import Capture

HELP = """Audit a live cluster (or a snapshot of one) with the rules, live-only rules included.

Needs read access (get/list) to the kinds the enabled rules read; deploy/ has a
ClusterRole with exactly those. A kind that is forbidden is reported with the
rules that could not run, and the exit code is 3 when nothing else failed.
With --publish-reports the findings are also applied in the cluster as PolicyReports
(wgpolicyk8s.io/v1alpha2), which needs deploy/optional/policyreports-rbac.yaml.
"""


@click.command("audit", help=HELP)
@click.option(
    "--snapshot",
    "snapshot_file",
    type=click.Path(dir_okay=False),
    help="Audit a snapshot (poolgate snapshot, or any kubectl get -o yaml|json List) "
    "instead of a live cluster.",
)
@click.option(
    "--compare",
    type=click.Path(dir_okay=False),
    help="A previous --format json report: mark findings new, unchanged or resolved.",
)
@click.option(
    "--now",
    "now_text",
    metavar="RFC3339",
    help="Judge durations (Pending for N minutes) as of this time "
    "(default: when the cluster was read).",
)
@click.option(
    "--publish-reports",
    is_flag=True,
    help="Also server-side apply the findings as PolicyReports (wgpolicyk8s.io/v1alpha2) "
    "in the audited cluster and delete poolgate's stale ones (RBAC: deploy/optional/).",
)
@report_options
@click.option("--verbose", "-v", is_flag=True, help="Also report skipped items.")
@color_option
@cluster_options
def command(
    snapshot_file: str | None,
    compare: str | None,
    now_text: str | None,
    publish_reports: bool,
    reports: ReportOptions,
    verbose: bool,
    cluster: ClusterOptions,
) -> int:
    from dataclasses import replace

    from scanner import pipeline
    from scanner.audit import run as auditing
    from scanner.findings import drift
    from scanner.runtime.deadline import READING_SHARE, Deadline
    from scanner.sources import snapshot

    run_deadline = Deadline.after(cluster.deadline)
    destinations = reports.destinations()
    if snapshot_file is not None and cluster.kubeconfig is not None:
        raise UsageError("--snapshot and --kubeconfig exclude each other")
    if snapshot_file is not None and publish_reports:
        raise UsageError(
            "--publish-reports applies the reports in the audited cluster: it needs a "
            "live audit, not --snapshot",
            hint="write them with --format policyreport and kubectl apply --server-side -f",
        )
    previous = drift.load_previous(compare) if compare is not None else None
    now = _time(now_text)
    ruleset, chosen = load_ruleset(cluster)

    captures: list[Capture] = []  # the one read, for its PolicyReports (_policy_reports)

    def read() -> Capture:
        if snapshot_file is not None:
            capture = snapshot.read(snapshot_file, cluster.kube_context)
        else:
            reading = cluster.deadline * READING_SHARE  # the rest is the rules' (deadline.py)
            capture = read_live(ruleset, cluster, reading)
        captures.append(capture)
        return capture

    report, coverage = auditing.read_and_evaluate(
        ruleset, read, snapshot_file=snapshot_file, now=now, deadline=run_deadline
    )
    report = replace(
        report,
        policy=chosen.record,
        notifications=[*chosen.notifications, *report.notifications],
    )
    if snapshot_file is not None and report.scanned is not None:
        named = pipeline.shown_path(snapshot_file, Path.cwd())
        report = replace(report, scanned=replace(report.scanned, snapshot=named))
    report = pipeline.hide_below(report, reports.shown_from)
    changes = None
    if previous is not None and compare is not None:
        previous = drift.at_least(previous, reports.shown_from)
        ran = {rule.id for rule in ruleset.rules} - coverage.blocked - report.stats.unfinished
        changes = drift.compare(report, previous, compare, drift.checker(ran, coverage.unseen))
    writers: dict[str, Writer] = {}
    if publish_reports or "policyreport" in reports.formats:
        report, writers["policyreport"] = _policy_reports(
            report, captures[0], cluster if publish_reports else None
        )
    write_reports(report, destinations, reports.display(verbose), changes, writers)
    return pipeline.exit_code(report, reports.fail_on)


def _policy_reports(
    report: Report, capture: Capture, publish_to: ClusterOptions | None
) -> tuple[Report, Writer]:
    """The PolicyReport writer of this audit (when the cluster was read, and the uids of
    the objects with findings), after publishing the reports in the cluster of
    ``publish_to`` when given: ``report`` then carries what the publish could not do."""
    from scanner.audit import publish
    from scanner.reporters import policyreport
    from scanner.sources.cluster import Settings, Target

    uids = policyreport.object_uids(capture.objects, report.findings)
    found = policyreport.Found(capture.captured_at, uids)
    if publish_to is not None:
        report = publish.publish_report(
            report,
            found,
            Target(publish_to.kubeconfig, publish_to.kube_context),
            Settings(request_timeout=publish_to.request_timeout),
        )
    return report, policyreport.writer(found)


def _time(text: str | None) -> datetime.datetime | None:
    """``--now``: an RFC 3339 time, or ``None`` (when the cluster was read)."""
    from scanner.sources import snapshot

    if text is None:
        return None
    try:
        return snapshot.parse_time(text)
    except ValueError:
        raise UsageError(
            f"--now {text!r} is not an RFC 3339 time", hint="e.g. 2025-06-01T02:00:00Z"
        ) from None
