"""``poolgate rules``: the rule catalog (list, show one) and the rule fixtures (test)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import click

from scanner.cli.exits import EXIT_FINDINGS, EXIT_OK
from scanner.cli.options import rule_options
from scanner.console import echo
from scanner.errors import UsageError

if TYPE_CHECKING:
    from scanner.ruleset.load import Rule

HELP = "The rule catalog: list, show one, run the rule fixtures."

LIST_HELP = "Every rule: id, level, name, summary."

SHOW_HELP = "The full documentation of one rule."

TEST_HELP = """Run every rule's fixtures (default: fixtures/rules) and compare with their markers.

A fixture directory is named by rule id. Files named fire*.yaml mark each line a
finding is expected on with "# expect: <ID>"; files named pass*.yaml must stay silent.
"""


@click.group("rules", help=HELP)
def command() -> None:
    pass


@command.command("list", help=LIST_HELP)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json", "markdown"]),
    default="text",
    show_default=True,
    help="markdown writes the rule reference (docs/rules.md).",
)
@rule_options
def rules_list(fmt: str, rule_dirs: tuple[Path, ...], cel_engine: str) -> int:
    from scanner.ruleset import catalog

    echo(catalog.render_list(_all_rules(rule_dirs, cel_engine), fmt), nl=False)
    return EXIT_OK


@command.command("show", help=SHOW_HELP)
@click.argument("rule_id")
@rule_options
def rules_show(rule_id: str, rule_dirs: tuple[Path, ...], cel_engine: str) -> int:
    from scanner.ruleset import catalog

    wanted = {rule_id.strip(), rule_id.strip().upper()}  # PG301 or pg301; a policy's name
    for rule in _all_rules(rule_dirs, cel_engine):
        if rule.id in wanted:
            echo(catalog.render_rule(rule), nl=False)
            return EXIT_OK
    raise UsageError(f"no rule {rule_id}", hint="see `poolgate rules list`")


@command.command("test", help=TEST_HELP)
@click.argument(
    "fixtures", required=False, type=click.Path(file_okay=False, exists=True, path_type=Path)
)
@click.option("--verbose", "-v", is_flag=True, help="Show every fixture file.")
@rule_options
def rules_test(
    fixtures: Path | None, verbose: bool, rule_dirs: tuple[Path, ...], cel_engine: str
) -> int:
    from scanner import pipeline
    from scanner.pipeline import fixtures as ruletest

    ruleset = pipeline.load_ruleset(
        pipeline.ScanOptions(rule_dirs=rule_dirs, engine=cel_engine, enable_all=True)
    )
    root = fixtures or Path("fixtures/rules")
    if not root.is_dir():  # the default, outside a checkout that has it
        raise UsageError(
            f"{root}: no such directory",
            hint="give the fixtures directory: poolgate rules test DIR",
        )
    results = ruletest.run(root, ruleset)
    echo(ruletest.render(results, verbose), nl=False)
    return EXIT_OK if results and all(result.ok for result in results) else EXIT_FINDINGS


def _all_rules(rule_dirs: Sequence[Path], cel_engine: str) -> list[Rule]:
    from scanner.cel import get_engine
    from scanner.ruleset.load import bundled_rules_dir, load_rules

    return load_rules([bundled_rules_dir(), *rule_dirs], get_engine(cel_engine))
