"""``poolgate rules``: the rule catalog (list, show one) and the rule fixtures (test)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import click

from scanner.cli.exits import EXIT_FINDINGS, EXIT_OK
from scanner.cli.options import color_option, rule_options
from scanner.console import echo
from scanner.errors import UsageError

if TYPE_CHECKING:
    from scanner.config.values import Config
    from scanner.ruleset.load import Rule

HELP = "The rule catalog: list, show one, run the rule fixtures."

LIST_HELP = """Every rule: id, level, name, summary; audit-only rules and rules that are off
are marked. The config (.poolgate.yaml) applies: its ruleDirs, levels and enablement."""

SHOW_HELP = (
    "The full documentation of one rule, named by id (PG301) or name, as the config "
    "(.poolgate.yaml) sets it."
)

TEST_HELP = """Run the rule fixtures and compare with their markers.

Default: fixtures/rules here (poolgate's checkout) and the fixtures/ directory
inside each rule directory (the config's ruleDirs and --rules). A fixture
directory is named by rule id. Files named fire*.yaml mark each line a finding is
expected on with "# expect: <ID>"; files named pass*.yaml must stay silent.
"""


@click.group("rules", help=HELP)
def command() -> None:
    pass


CONFIG_OPTION = click.option(
    "--config",
    "config_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Configuration file whose ruleDirs, enablement and levels apply "
    "(default: .poolgate.yaml found upward from here).",
)


@command.command("list", help=LIST_HELP)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json", "markdown"]),
    default="text",
    show_default=True,
    help="markdown writes the rule reference (docs/rules.md).",
)
@click.option("--tag", "tags", multiple=True, help="Only rules with this tag (repeatable: any).")
@click.option(
    "--level",
    "levels",
    multiple=True,
    type=click.Choice(["error", "warning", "note"]),
    help="Only rules at this level, as configured (repeatable: any).",
)
@CONFIG_OPTION
@color_option
@rule_options
def rules_list(
    fmt: str,
    tags: tuple[str, ...],
    levels: tuple[str, ...],
    config_file: Path | None,
    rule_dirs: tuple[Path, ...],
    cel_engine: str,
) -> int:
    from scanner.ruleset import catalog

    rules, configured_off = _catalog(rule_dirs, cel_engine, config_file)
    wanted_tags = {tag.strip().lower() for tag in tags}
    shown = [
        rule
        for rule in rules
        if (not wanted_tags or wanted_tags & {tag.lower() for tag in rule.doc.tags})
        and (not levels or str(rule.doc.level) in levels)
    ]
    echo(catalog.render_list(shown, fmt, configured_off), nl=False)
    return EXIT_OK


@command.command("show", help=SHOW_HELP)
@click.argument("rule_id", metavar="ID_OR_NAME")
@CONFIG_OPTION
@color_option
@rule_options
def rules_show(
    rule_id: str, config_file: Path | None, rule_dirs: tuple[Path, ...], cel_engine: str
) -> int:
    from scanner.ruleset import catalog
    from scanner.ruleset.names import RuleNames

    rules, configured_off = _catalog(rule_dirs, cel_engine, config_file)
    names = RuleNames.of(rule.doc for rule in rules)
    wanted = names.resolve(rule_id)
    for rule in rules:
        if rule.id == wanted:
            echo(catalog.render_rule(rule, rule.id in configured_off), nl=False)
            return EXIT_OK
    raise UsageError(
        f"no rule {rule_id}{names.suggestion(rule_id)}", hint="see `poolgate rules list`"
    )


@command.command("test", help=TEST_HELP)
@click.argument(
    "fixtures", required=False, type=click.Path(file_okay=False, exists=True, path_type=Path)
)
@click.option("--verbose", "-v", is_flag=True, help="Show every fixture file.")
@CONFIG_OPTION
@color_option
@rule_options
def rules_test(
    fixtures: Path | None,
    verbose: bool,
    config_file: Path | None,
    rule_dirs: tuple[Path, ...],
    cel_engine: str,
) -> int:
    from scanner import pipeline
    from scanner.pipeline import fixtures as ruletest

    config = _config(config_file)
    ruleset = pipeline.load_ruleset(
        pipeline.ScanOptions(rule_dirs=rule_dirs, engine=cel_engine, config=config, enable_all=True)
    )
    roots = [fixtures] if fixtures is not None else _fixture_dirs([*config.rule_dirs, *rule_dirs])
    if not roots:
        raise UsageError(
            f"no {OWN_FIXTURES} here and no fixtures/ in a rule directory",
            hint="give the fixtures directory: poolgate rules test DIR",
        )
    results = [result for root in roots for result in ruletest.run(root, ruleset)]
    passed = bool(results) and all(result.ok for result in results)
    lines = ruletest.render(results, verbose).splitlines()
    for line in lines[:-1]:
        echo(line, style="error" if line.startswith("FAIL") else "ok")
    echo(lines[-1], style="ok" if passed else "error")  # the summary
    return EXIT_OK if passed else EXIT_FINDINGS


OWN_FIXTURES = Path("fixtures/rules")
"""Where poolgate's own rule fixtures are, in its checkout."""


def _fixture_dirs(rule_dirs: Sequence[str | Path]) -> list[Path]:
    """The fixtures ``rules test`` runs without a DIR: ``fixtures/rules`` here (the
    layout of poolgate's checkout), and ``fixtures/`` inside each rule directory (a
    rule directory's own, which rule loading never reads: it reads *.yaml files only)."""
    candidates = [OWN_FIXTURES, *(Path(directory) / "fixtures" for directory in rule_dirs)]
    found: list[Path] = []
    for candidate in candidates:
        if candidate.is_dir() and candidate.resolve() not in {p.resolve() for p in found}:
            found.append(candidate)
    return found


def _config(config_file: Path | None) -> Config:
    """The config the rules commands apply: ``--config``, else the one found upward from
    the working directory; unknown keys are warned of (``config validate`` refuses them)."""
    from scanner import console
    from scanner.config import discovery

    loaded = discovery.resolve([], config_file)
    for warning in loaded.warnings:
        console.warn(warning)
    for key in loaded.unknown:
        console.warn(f"{loaded.path}:{key.line}: {key.describe()} (left out)")
    return loaded.config


def _catalog(
    rule_dirs: Sequence[Path], cel_engine: str, config_file: Path | None
) -> tuple[list[Rule], frozenset[str]]:
    """(every rule, bundled, in the config's ruleDirs and in --rules, at the levels and
    enablement the config gives them; the ids the config turns off)."""
    from scanner.cel import get_engine
    from scanner.ruleset.load import bundled_rules_dir, load_rules

    config = _config(config_file)
    directories = [bundled_rules_dir(), *map(Path, config.rule_dirs), *rule_dirs]
    rules = load_rules(directories, get_engine(cel_engine), config)
    off = frozenset(key for key, override in config.rules.items() if override.enabled is False)
    return rules, off
