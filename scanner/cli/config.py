"""``poolgate config``: write a default ``.poolgate.yaml`` (init), check one (validate),
print the JSON schema both use (schema)."""

from __future__ import annotations

from pathlib import Path
from typing import TextIO

import click

from scanner import console
from scanner.cli.exits import EXIT_OK
from scanner.cli.options import color_option, rule_options
from scanner.console import echo
from scanner.errors import printable

HELP = "The configuration file (.poolgate.yaml): write a default one, check one, its schema."

SCHEMA_HELP = """Print the JSON schema of .poolgate.yaml: the one validation uses, for editors.

Save it and point the YAML language server at it, e.g. a first line
"# yaml-language-server: $schema=poolgate-config.schema.json".
"""

INIT_HELP = "Write a commented .poolgate.yaml holding the defaults (PATH: file or directory)."

VALIDATE_HELP = """Check a config file (default: .poolgate.yaml found upward from here).

Prints "ok: FILE" when valid; problems exit with code 2. Rule ids must name
bundled rules, rules in spec.ruleDirs or in --rules.
"""


@click.group("config", help=HELP)
def command() -> None:
    pass


@command.command("init", help=INIT_HELP)
@click.argument("path", required=False, default=".", type=click.Path())
@click.option("--force", is_flag=True, help="Overwrite an existing file.")
@color_option
def config_init(path: str, force: bool) -> int:
    from scanner.config import template
    from scanner.reporters import output

    target = template.init_target(path, force)
    output.refuse_link_out_of_checkout(target, "config init")
    text = template.default_text()

    def render(stream: TextIO) -> None:
        stream.write(text)

    output.write(output.Destination("yaml", str(target)), render)
    echo(f"wrote {printable(str(target))}")
    return EXIT_OK


@command.command("schema", help=SCHEMA_HELP)
def config_schema() -> int:
    from scanner.config.validation import schema_text

    echo(schema_text(), nl=False)
    return EXIT_OK


@command.command("validate", help=VALIDATE_HELP)
@click.argument("file", required=False, type=click.Path(dir_okay=False, path_type=Path))
@color_option
@rule_options
def config_validate(file: Path | None, rule_dirs: tuple[Path, ...], cel_engine: str) -> int:
    import datetime

    from scanner.cel import get_engine
    from scanner.config import discovery
    from scanner.config import file as configfile
    from scanner.errors import ConfigError, UsageError
    from scanner.findings import suppress
    from scanner.ruleset.load import bundled_rules_dir, load_rules
    from scanner.ruleset.names import RuleNames

    if file is None:
        found = discovery.discover(Path.cwd())
        if found is None:
            raise ConfigError(
                f"no {configfile.CONFIG_FILE_NAME} here or above (up to the repository root)",
                hint="`poolgate config init` writes one",
            )
        file = found
    elif not file.is_file():
        raise UsageError(f"{file}: no such file", hint="check the path")
    shown = configfile.display_path(file)
    loaded, problems = configfile.examine_file(file)
    problems += [f"{shown}:{key.line}: {key.describe()}" for key in loaded.unknown]
    directories = [bundled_rules_dir(), *map(Path, loaded.config.rule_dirs), *rule_dirs]
    rules = load_rules(directories, get_engine(cel_engine), loaded.config)
    names = RuleNames.of(rule.doc for rule in rules)
    try:
        configured = names.configured(loaded.config)  # rule names become ids
    except ConfigError as error:
        problems.append(str(error))
        configured = loaded.config
    overrides = configfile.rule_override_problems(
        configured, {rule.id: rule.defaults for rule in rules}, names.suggestion
    )
    if problems or overrides:
        hint = configfile.UNKNOWN_RULE_HINT if overrides else ""
        configfile.raise_problems(sorted([*problems, *overrides], key=_line), hint=hint)
    today = datetime.date.today()
    for exemption in loaded.config.exemptions:
        problem = suppress.exemption_problem(exemption, today)
        if problem:
            console.warn(f"{shown}:{exemption.line}: {problem}")
    echo(f"ok: {printable(shown)}")
    return EXIT_OK


def _line(problem: str) -> int:
    """The line a problem names (``FILE:LINE: ...``), for listing them in file order."""
    for part in problem.split(":")[1:3]:
        if part.strip().isdigit():
            return int(part)
    return 0
