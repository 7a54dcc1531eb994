"""The command line: the one error boundary that maps errors to exit codes
(``scanner.cli.exits``), and the commands, one module each.

``main`` is the ``poolgate`` console script (and ``python -m scanner``); ``run``
runs one command line and returns its exit code, for library callers and tests.
A command's module is imported only when the command runs (or help lists it):
a one-file scan pays for its own options and no other command's.

    scan.py      poolgate scan       manifests, charts, kustomizations
    audit.py     poolgate audit      a live cluster or a snapshot
    snapshot.py  poolgate snapshot   a cluster's objects to one file
    rules.py     poolgate rules      list, show, test
    config.py    poolgate config     init, validate
    admission.py poolgate admission  export: the rules as ValidatingAdmissionPolicies
    reports.py   the report options of scan and audit, and the loop that writes reports
    cluster.py   the cluster options of audit and snapshot, and reading a cluster
    options.py   the rule options, and option groups
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Sequence

import click

from scanner import __version__, console
from scanner.cli.exits import EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE
from scanner.console import echo
from scanner.errors import PoolgateError, UsageError, printable

COMMANDS = {
    "admission": "scanner.cli.admission",
    "scan": "scanner.cli.scan",
    "audit": "scanner.cli.audit",
    "snapshot": "scanner.cli.snapshot",
    "rules": "scanner.cli.rules",
    "config": "scanner.cli.config",
}
"""Each command's module, which names it ``command``."""


class _Commands(click.Group):
    """The group of ``COMMANDS``, each imported when asked for."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        found: click.Command = importlib.import_module(COMMANDS[cmd_name]).command
        return found


@click.group(cls=_Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(
    __version__, "--version", prog_name="poolgate", message="%(prog)s %(version)s"
)
def cli() -> None:
    """poolgate: policy-as-code compliance scanner for GPU Kubernetes platforms."""


def main(argv: Sequence[str] | None = None) -> None:
    """Console entry point: run the CLI and exit with its code, never with a traceback
    for a user mistake.

    The process runs this one command and ends (``scanner.runtime.entry``: the
    collector off, objects held, no interpreter teardown). Library callers (``run``)
    keep the collector as they set it, and their objects are freed as usual.
    """
    from scanner.runtime import entry

    entry.run_once(lambda: run(argv))


def run(argv: Sequence[str] | None = None) -> int:
    args = list(argv) if argv is not None else sys.argv[1:]
    try:
        console.set_color("auto")  # each command line chooses its own (--color)
        _refuse_files_named_as_options(args)
        result = cli.main(args=args, standalone_mode=False)
    except PoolgateError as error:
        console.error(error.display())
        return error.exit_code
    except click.exceptions.Exit as done:
        return int(done.exit_code)
    except click.ClickException as error:
        console.error(printable(error.format_message()))  # it quotes the arguments given
        return EXIT_USAGE
    except (KeyboardInterrupt, click.exceptions.Abort):
        console.error("interrupted")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader went away (``poolgate scan . | head``); nothing more to say.
        sys.stderr.close()
        return EXIT_OK
    except Exception:
        _crash_report()
        return EXIT_INTERNAL
    return int(result) if isinstance(result, int) else EXIT_OK


def _refuse_files_named_as_options(args: Sequence[str]) -> None:
    """Refuse a ``scan`` argument before ``--`` that starts with ``-`` and names an
    existing file.

    pre-commit appends the staged file names to the hook's command, and a pull request
    chooses them: a file called ``--fail-on=never.yaml`` or ``--config=x.yaml`` would
    be read as an option and make the hook pass. Reading it as a path instead would
    let a file named like the user's own option (``--fail-on=warning``) silently drop
    that option. Either way the run fails here, closed; ``./NAME`` or ``-- NAME``
    names such a file."""
    if not args or args[0] != "scan":
        return
    from scanner.cli.scan import command

    takes_value = {
        name
        for parameter in command.params
        if isinstance(parameter, click.Option) and not parameter.is_flag
        for name in parameter.opts
    }
    value_next = False
    for arg in args[1:]:
        if value_next:  # the value of the option before it (-o -report.json)
            value_next = False
            continue
        if arg == "--":
            return
        if arg in takes_value:
            value_next = True
            continue
        if arg.startswith("-") and arg != "-" and os.path.lexists(arg):
            raise UsageError(
                f"argument {printable(arg)!r} names a file but would be read as an option",
                hint=f"rename the file, or name it as ./{printable(arg)} or after --",
            )


def _crash_report() -> None:
    """An unexpected error: a short report to file as a bug, with the last frames only."""
    import platform  # only here: every start-up would pay for it otherwise
    import traceback

    kind, value, _ = sys.exc_info()
    frames = traceback.format_exc().strip().splitlines()[-6:]
    echo(
        f"poolgate: internal error: {kind.__name__ if kind else 'error'}: {printable(str(value))}\n"
        f"  poolgate {__version__}, Python {platform.python_version()}, {platform.platform()}\n"
        "  please report this with the lines below at https://github.com/poolgate/poolgate/issues\n"
        + "\n".join(f"  {line}" for line in frames),
        err=True,
    )
