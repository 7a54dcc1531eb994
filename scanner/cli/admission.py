"""``poolgate admission export``: the per-object rules as ValidatingAdmissionPolicies."""

from __future__ import annotations

from pathlib import Path

import click

from scanner import console
from scanner.cli.exits import EXIT_OK
from scanner.cli.options import rule_options
from scanner.errors import RuleLoadError, UsageError, printable

HELP = "Admission policies from poolgate's rules."

EXPORT_HELP = """Write ValidatingAdmissionPolicies and bindings for the per-object rules.

One policy per enabled rule whose file says how to enforce it (its `admission`
section), a binding for each (validationActions Deny by default; `--actions
Warn,Audit` for a dry run), and the ConfigMap of config values they read as params.
Rules that join objects (pools, namespaces, Kueue queues, DRA claims) cannot be
enforced at admission: they are listed, with the reason, on standard error and in
the file's header. Every expression is compiled in the Kubernetes CEL environment
before anything is written.
"""


def _actions(_ctx: click.Context, _param: click.Parameter, value: str) -> tuple[str, ...]:
    from scanner.ruleset.export import ACTIONS

    actions = tuple(part.strip() for part in value.split(",") if part.strip())
    unknown = [action for action in actions if action not in ACTIONS]
    if unknown or not actions:
        raise click.BadParameter(
            f"{', '.join(unknown) or 'none given'}: use {', '.join(ACTIONS)}, comma-separated"
        )
    if len(set(actions)) != len(actions):
        raise click.BadParameter("an action is named twice")
    if "Deny" in actions and "Warn" in actions:
        # The API server refuses the binding: Deny already returns the message.
        raise click.BadParameter("Deny and Warn cannot be combined")
    return actions


@click.group("admission", help=HELP)
def command() -> None:
    pass


@command.command("export", help=EXPORT_HELP)
@click.option("--output", "-o", "output_file", default="-", help="File to write (default: stdout).")
@click.option(
    "--actions",
    default="Deny",
    show_default=True,
    callback=_actions,
    help="validationActions of the bindings: Deny, or Warn,Audit for a dry run.",
)
@click.option(
    "--params-namespace",
    default="",
    help="Namespace of the params ConfigMap (default: the first operator namespace).",
)
@click.option(
    "--config",
    "config_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Configuration file (default: .poolgate.yaml found upward from here).",
)
@rule_options
def export_command(
    output_file: str,
    actions: tuple[str, ...],
    params_namespace: str,
    config_file: Path | None,
    rule_dirs: tuple[Path, ...],
    cel_engine: str,
) -> int:
    from functools import partial

    from scanner import pipeline
    from scanner.cel import cpp_available, get_engine
    from scanner.config import discovery
    from scanner.reporters import output
    from scanner.ruleset import export

    if params_namespace:
        _check_namespace(params_namespace)
    if not cpp_available():
        raise UsageError(
            "admission export compiles the policies in the Kubernetes CEL environment, "
            "which needs the cel-expr-python package",
            hint="pip install cel-expr-python",
        )
    destination = output.Destination("yaml", output_file)
    if not destination.is_stdout:
        output.check_writable(Path(output_file))
    loaded = discovery.resolve([], config_file)
    for warning in loaded.warnings:
        console.warn(warning)
    # Every mode: audit-only rules are listed as not exported, with why. Rules the
    # config turns off are left out (``export.export``).
    options = pipeline.ScanOptions(
        rule_dirs=rule_dirs, engine=cel_engine, config=loaded.config, enable_all=True
    )
    ruleset = pipeline.load_ruleset(options)
    result = export.export(ruleset.rules, loaded.config, actions, params_namespace)
    # The policies run in the API server's CEL environment, which only the default
    # engine has: the portable one would refuse their optional syntax.
    problems = export.check(result, get_engine("cpp", export.VARIABLES))
    if problems:
        raise RuleLoadError(problems)
    output.write(destination, partial(export.render, result))
    for item in result.skipped:
        console.note(f"not exported: {item.rule_id}: {printable(item.reason)}")
    if not destination.is_stdout:
        console.note(
            f"wrote {len(result.exported)} policies ({', '.join(result.exported)}) to "
            f"{printable(output_file)}"
        )
    return EXIT_OK


def _check_namespace(name: str) -> None:
    """A DNS-1123 label, as a namespace name must be."""
    import re

    if not re.fullmatch(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", name):
        raise UsageError(
            f"--params-namespace {printable(name)!r} is not a namespace name",
            hint="lower-case letters, digits and '-', at most 63 characters",
        )
