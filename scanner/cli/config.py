"""``poolgate config``: write a default ``.poolgate.yaml`` (init), check one (validate)."""

from __future__ import annotations

from pathlib import Path
from typing import TextIO

import click

from scanner import console
from scanner.cli.exits import EXIT_OK
from scanner.cli.options import rule_options
from scanner.console import echo
from scanner.errors import printable

HELP = "The configuration file (.poolgate.yaml): write a default one, check one."

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


@command.command("validate", help=VALIDATE_HELP)
@click.argument("file", required=False, type=click.Path(dir_okay=False, path_type=Path))
@rule_options
def config_validate(file: Path | None, rule_dirs: tuple[Path, ...], cel_engine: str) -> int:
    import datetime

    from scanner import pipeline
    from scanner.config import discovery
    from scanner.config import file as configfile
    from scanner.errors import ConfigError
    from scanner.findings import suppress

    if file is None:
        found = discovery.discover(Path.cwd())
        if found is None:
            raise ConfigError(
                f"no {configfile.CONFIG_FILE_NAME} here or above (up to the repository root)",
                hint="`poolgate config init` writes one",
            )
        file = found
    loaded = discovery.resolve([], file)
    for warning in loaded.warnings:
        console.warn(warning)
    pipeline.load_ruleset(
        pipeline.ScanOptions(rule_dirs=rule_dirs, engine=cel_engine, config=loaded.config)
    )
    shown = configfile.display_path(file)
    today = datetime.date.today()
    for exemption in loaded.config.exemptions:
        problem = suppress.exemption_problem(exemption, today)
        if problem:
            console.warn(f"{shown}:{exemption.line}: {problem}")
    echo(f"ok: {printable(shown)}")
    return EXIT_OK
