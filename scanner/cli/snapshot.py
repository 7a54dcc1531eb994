"""``poolgate snapshot``: what the enabled rules read from a live cluster, written to
one file that ``poolgate audit --snapshot`` audits later, anywhere.
"""

from __future__ import annotations

from pathlib import Path

import click

from scanner import console
from scanner.cli.cluster import ClusterOptions, cluster_options, load_ruleset, read_live
from scanner.cli.exits import EXIT_INCOMPLETE, EXIT_OK
from scanner.cli.options import color_option
from scanner.errors import printable

HELP = """Write the objects the enabled rules need (never Secrets) to one JSON List.

`poolgate audit --snapshot FILE` audits it later, anywhere, with the same
findings a live audit would have given at capture time. Literal env values and
the last-applied-configuration annotation are left out where no enabled rule
reads them; the file is readable by its owner only.
"""


@click.command("snapshot", help=HELP)
@click.option(
    "--output", "-o", "output_file", required=True, help="File to write the snapshot to (JSON)."
)
@color_option
@cluster_options
def command(output_file: str, cluster: ClusterOptions) -> int:
    from functools import partial

    from scanner.audit import redaction
    from scanner.audit import run as auditing
    from scanner.reporters import output
    from scanner.sources import snapshot

    destination = output.Destination("json", output_file)
    if not destination.is_stdout:
        output.check_writable(Path(output_file))
    ruleset, chosen = load_ruleset(cluster)
    for notification in chosen.notifications:  # a config key unknown: not what was meant
        console.error(printable(f"{notification.uri}:{notification.line}: {notification.message}"))
    capture = read_live(ruleset, cluster, cluster.deadline)
    capture.omitted = redaction.plan(ruleset.rules, auditing.plan(ruleset.rules))
    redaction.apply(capture.objects, capture.omitted)
    output.write(destination, partial(snapshot.write, capture), private=True)
    for item in capture.unavailable:
        where = f" in namespace {item.namespace}" if item.namespace else ""
        console.warn(
            f"could not list {snapshot.kind_label(item.key)}{where}: {item.status}: {item.message}"
        )
    if not destination.is_stdout:
        count = len(capture.objects)
        console.note(f"wrote {count:,} objects from context {capture.context} to {output_file}")
    return EXIT_INCOMPLETE if capture.unavailable or chosen.notifications else EXIT_OK
