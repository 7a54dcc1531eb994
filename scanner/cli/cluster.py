"""The options ``audit`` and ``snapshot`` share, and the steps they share: the
ruleset whose reads decide what is listed, and listing it from a live cluster.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

import click

from scanner import console
from scanner.cli.options import RULE_OPTIONS, option_group, split_ids

if TYPE_CHECKING:
    from scanner.pipeline import Ruleset
    from scanner.policy import Policy
    from scanner.sources.snapshot import Capture

MAX_REQUEST_TIMEOUT: Final = 3600.0
"""An hour for one API response: past that, a list is better retried or failed."""


@dataclass(frozen=True, slots=True)
class ClusterOptions:
    """Which cluster to read and how (``--kubeconfig`` ... ``--deadline``), and the
    rules the reading is for (``--rules``, ``--cel-engine``, ``--enable``, ``--disable``,
    ``--config``)."""

    rule_dirs: tuple[Path, ...]
    cel_engine: str
    kubeconfig: str | None
    kube_context: str | None
    progress: bool
    page_size: int
    request_timeout: float
    deadline: float
    enable: tuple[str, ...]
    disable: tuple[str, ...]
    config_file: Path | None


def _finite(_context: click.Context, parameter: click.Parameter, value: float) -> float:
    """Refuse ``nan``, which passes every range check (``inf`` does not: ``max``)."""
    if value != value:
        raise click.BadParameter(f"{value!r} is not a number of seconds", param=parameter)
    return value


cluster_options = option_group(
    "cluster",
    ClusterOptions,
    [
        *RULE_OPTIONS,  # first in the help, as they have always been
        click.option(
            "--kubeconfig",
            type=click.Path(dir_okay=False),
            help="Kubeconfig file (default: KUBECONFIG, in-cluster config, ~/.kube/config).",
        ),
        click.option("--context", "kube_context", help="Kubeconfig context (default: current)."),
        click.option(
            "--progress", is_flag=True, help="Per-kind progress on stderr (always on a terminal)."
        ),
        click.option(
            "--page-size",
            type=click.IntRange(1, 10_000),
            default=500,
            show_default=True,
            help="Objects per list request (limit/continue pagination).",
        ),
        click.option(
            "--request-timeout",
            type=click.FloatRange(min=0.1, max=MAX_REQUEST_TIMEOUT),
            callback=_finite,
            default=60.0,
            show_default=True,
            help="Seconds to wait for one API response before retrying.",
        ),
        click.option(
            "--deadline",
            type=click.FloatRange(min=1.0),
            callback=_finite,
            default=2700.0,
            show_default=True,
            help="Seconds the whole command may take. Reading the cluster stops after 90% of "
            "it in an audit (all of it in a snapshot), and kinds not read by then are reported "
            "as not read; an audit's rules not finished at the deadline are named (exit code 3 "
            "either way). Keep it under the Job's activeDeadlineSeconds.",
        ),
        click.option(
            "--enable",
            multiple=True,
            help="Enable rule ids (repeatable, comma-separated); wins over the config.",
        ),
        click.option(
            "--disable", multiple=True, help="Disable rule ids (repeatable, comma-separated)."
        ),
        click.option(
            "--config",
            "config_file",
            type=click.Path(dir_okay=False, path_type=Path),
            help="Configuration file (default: .poolgate.yaml found upward from here).",
        ),
    ],
)


def load_ruleset(options: ClusterOptions) -> tuple[Ruleset, Policy]:
    """(the ruleset of an audit or snapshot, its policy: the record, and notifications
    such as a config key unknown)."""
    from scanner import pipeline, policy

    chosen = policy.from_work_tree([], options.config_file, None, options.rule_dirs)
    for warning in chosen.loaded.warnings:
        console.warn(warning)
    ruleset = pipeline.load_ruleset(
        pipeline.ScanOptions(
            rule_dirs=options.rule_dirs,
            enable=split_ids(options.enable),
            disable=split_ids(options.disable),
            engine=options.cel_engine,
            config=chosen.loaded.config,
            mode="audit",
        )
    )
    return ruleset, chosen


def read_live(ruleset: Ruleset, options: ClusterOptions, deadline: float) -> Capture:
    """The objects ``ruleset``'s rules read, listed from the cluster within ``deadline``
    seconds."""
    from scanner.audit import run as auditing
    from scanner.console import stderr_progress
    from scanner.sources.cluster import Settings, Target

    return auditing.read_cluster(
        Target(options.kubeconfig, options.kube_context),
        Settings(
            page_size=options.page_size,
            request_timeout=options.request_timeout,
            deadline=deadline,
        ),
        ruleset.rules,
        ruleset.config.operator_namespaces,
        stderr_progress(options.progress),
    )
