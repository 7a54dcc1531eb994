"""``poolgate audit``: a live cluster, or a snapshot of one, with the rules (the live-only
ones included), and what changed since a previous report (``--compare``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from scanner.cli.cluster import ClusterOptions, cluster_options, load_ruleset, read_live
from scanner.cli.options import color_option
from scanner.cli.reports import ReportOptions, report_options, write_reports
from scanner.errors import UsageError

if TYPE_CHECKING:
    import datetime

    from scanner.sources.snapshot import Capture

HELP = """Audit a live cluster (or a snapshot of one) with the rules, live-only rules included.

Needs read access (get/list) to the kinds the enabled rules read; deploy/ has a
ClusterRole with exactly those. A kind that is forbidden is reported with the
rules that could not run, and the exit code is 3 when nothing else failed.
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
@report_options
@click.option("--verbose", "-v", is_flag=True, help="Also report skipped items.")
@color_option
@cluster_options
def command(
    snapshot_file: str | None,
    compare: str | None,
    now_text: str | None,
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
    previous = drift.load_previous(compare) if compare is not None else None
    now = _time(now_text)
    ruleset, chosen = load_ruleset(cluster)

    def read() -> Capture:
        if snapshot_file is not None:
            return snapshot.read(snapshot_file, cluster.kube_context)
        reading = cluster.deadline * READING_SHARE  # the rest is the rules' (runtime/deadline.py)
        return read_live(ruleset, cluster, reading)

    report, coverage = auditing.read_and_evaluate(
        ruleset, read, snapshot_file=snapshot_file, now=now, deadline=run_deadline
    )
    report = replace(
        report,
        policy=chosen.record,
        notifications=[*chosen.notifications, *report.notifications],
    )
    changes = None
    if previous is not None and compare is not None:
        ran = {rule.id for rule in ruleset.rules} - coverage.blocked - report.stats.unfinished
        changes = drift.compare(report, previous, compare, drift.checker(ran, coverage.unseen))
    write_reports(report, destinations, reports.display(verbose), changes)
    return pipeline.exit_code(report, reports.fail_on)


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
