"""Everything poolgate prints is escaped as findings are (issue 21, item 10).

A pull request's rule file (``--rules``, ``spec.ruleDirs``) reached the terminal raw
through ``rules list`` and ``rules show``: an OSC sequence retitles the terminal or
plants a hyperlink, a CSI sequence clears the screen, and a line break followed by
``::error ...`` is a command to a GitHub Actions runner, which reads stdout and
stderr. API server messages and snapshot problems reached it raw through errors.
"""

from __future__ import annotations

import ast
import io
import json
import re
from pathlib import Path

import cli_run
import pytest

from scanner.console import ProgressPrinter

# C0 controls but the line break, DEL, C1 controls (0x9b is CSI), bidi overrides.
RAW = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
TITLE = "\x1b]0;owned\x07"  # OSC 0: set the window title
CLEAR = "\x1b[2J"  # CSI: clear the screen

HOSTILE_RULE = r"""
id: ACME001
name: hostile-text
level: warning
summary: "Looks fine\e]0;owned\a\e[2J\u202Eevil\n::error file=x.yaml::forged summary"
description: "First line.\nSecond \e]8;;https://evil.example\e\\line\e]8;;\e\\ here.\n::warning::forged description\n  ::notice::indented"
remediation: "Do \e[31mthis\e[0m.\x9b2J"
tags: ["ta\eg"]
subject: object
match:
  kinds: [ConfigMap]
validations:
  - expression: "!has(object.data) || !('\e[2J' in object.data)"
    message: a key that clears the screen
"""


def assert_clean(text: str) -> None:
    """No control sequence survives, and no line is a workflow command."""
    assert not RAW.search(text), RAW.findall(text)
    commands = [line for line in text.splitlines() if line.lstrip().startswith("::")]
    assert not commands, commands


@pytest.fixture
def rule_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "rules"
    directory.mkdir()
    (directory / "ACME001-hostile-text.yaml").write_text(HOSTILE_RULE.lstrip())
    return directory


def poolgate(*args: str, cwd: Path) -> tuple[int, str, str]:
    result = cli_run.poolgate(*args, cwd=cwd)
    assert_clean(result.stdout)
    assert_clean(result.stderr)
    return result.returncode, result.stdout, result.stderr


def test_rules_list_escapes_a_rules_text(rule_dir: Path) -> None:
    code, out, _ = poolgate("rules", "list", "--rules", str(rule_dir), cwd=rule_dir)
    assert code == 0
    [row] = [line for line in out.splitlines() if line.startswith("ACME001")]
    assert row.endswith(
        r"Looks fine\x1b]0;owned\x07\x1b[2J\u202eevil\n::error file=x.yaml::forged summary"
    )


def test_rules_show_escapes_a_rules_text_and_keeps_its_lines(rule_dir: Path) -> None:
    code, out, _ = poolgate("rules", "show", "ACME001", "--rules", str(rule_dir), cwd=rule_dir)
    assert code == 0
    lines = out.splitlines()
    assert r"Second \x1b]8;;https://evil.example\x1b\line\x1b]8;;\x1b\ here." in lines
    assert r"\x3a:warning::forged description" in lines
    assert r"  \x3a:notice::indented" in lines
    assert r"Remediation: Do \x1b[31mthis\x1b[0m.\x9b2J" in lines
    assert r"tags:      ta\x1bg" in lines
    assert r"""    !has(object.data) || !('\x1b[2J' in object.data)""" in lines


@pytest.mark.parametrize("fmt", ["markdown", "json"])
def test_the_rule_reference_carries_no_control_characters(rule_dir: Path, fmt: str) -> None:
    code, out, _ = poolgate(
        "rules", "list", "--format", fmt, "--rules", str(rule_dir), cwd=rule_dir
    )
    assert code == 0
    if fmt == "json":  # JSON escapes them itself, and the value is the rule's own
        [rule] = [row for row in json.loads(out) if row["id"] == "ACME001"]
        assert rule["summary"].startswith(f"Looks fine{TITLE}{CLEAR}")
    else:
        assert r"| Looks fine\x1b]0;owned\x07\x1b[2J\u202eevil\n::error" in out


def test_rules_test_escapes_fixture_names(rule_dir: Path, tmp_path: Path) -> None:
    fixtures = tmp_path / "fixtures" / "ACME001"
    fixtures.mkdir(parents=True)
    (fixtures / f"fire-{CLEAR}.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {b: c}  # expect: ACME001\n"
    )
    code, out, _ = poolgate(
        "rules", "test", str(fixtures.parent), "--rules", str(rule_dir), cwd=tmp_path
    )
    assert code == 1
    assert r"FAIL ACME001 " in out and r"fire-\x1b[2J.yaml: expected on line(s) 4" in out


def test_errors_quoting_arguments_are_escaped(tmp_path: Path) -> None:
    code, _, err = poolgate("rules", "show", f"X{TITLE}\n::error::forged", cwd=tmp_path)
    assert code == 2
    assert err == (
        r"poolgate: error: no rule X\x1b]0;owned\x07\n::error::forged "
        "(see `poolgate rules list`)\n"
    )
    code, _, err = poolgate("scan", ".", "--format", f"json{CLEAR}", cwd=tmp_path)
    assert code == 2 and r"json\x1b[2J" in err


def test_snapshot_problems_are_escaped(tmp_path: Path) -> None:
    snapshot = tmp_path / "snapshot.json"
    snapshot.write_text(json.dumps({"kind": f"{TITLE}\n::error::forged List", "apiVersion": "v1"}))
    code, out, err = poolgate("audit", "--snapshot", str(snapshot), cwd=tmp_path)
    assert code == 2 and out == ""
    assert err.count("\n") == 1
    assert r"\x1b]0;owned\x07\n::error::forged List (entry 1): its items is missing" in err


def test_api_server_messages_are_escaped(tmp_path: Path) -> None:
    from audit.apiserver import ApiServer, make_pki, write_kubeconfig

    (tmp_path / "pki").mkdir()
    pki = make_pki(tmp_path / "pki")
    body = {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "reason": "Forbidden",
        "code": 403,
        "message": f"go away{TITLE}{CLEAR}\n::error file=.github/workflows/x.yml::forged",
    }
    with ApiServer([], pki, "token") as server:
        server.behaviour.replies["/api"] = lambda _query: (403, json.dumps(body).encode())
        config = write_kubeconfig(tmp_path / "kc", server.url, pki.ca, "ctx", token="token")
        code, out, err = poolgate(
            "snapshot", "-o", str(tmp_path / "s.json"), "--kubeconfig", str(config), cwd=tmp_path
        )
    assert code == 2 and out == ""
    assert err.count("\n") == 1
    assert r"go away\x1b]0;owned\x07\x1b[2J\n::error file=.github/workflows/x.yml::forged" in err


def test_a_file_named_like_a_workflow_command_starts_no_line_of_a_text_report(
    tmp_path: Path,
) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "::error title=Passed::all good.yaml").write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: a, namespace: ml}\nspec:\n"
        "  containers:\n  - {name: c, image: busybox, securityContext: {privileged: true}}\n"
    )
    code, out, _ = poolgate("scan", ".", "--format", "text", cwd=tmp_path)
    assert code == 1
    assert r"\x3a:error title=Passed::all good.yaml" in out.splitlines()  # the file's header
    assert r"\x3a:error title=Passed::all good.yaml:6:" in out  # and each finding's line


def test_audit_progress_escapes_kind_names_and_outcomes() -> None:
    stream = io.StringIO()
    printer = ProgressPrinter(stream, live=False)
    printer.done(f"pods{TITLE}", f"forbidden{CLEAR}\n::error::forged")
    assert stream.getvalue() == r"  pods\x1b]0;owned\x07: forbidden\x1b[2J\n::error::forged" + "\n"
    live = io.StringIO()
    ProgressPrinter(live, live=True).page(f"pods{CLEAR}", 3)
    assert live.getvalue() == "\r\x1b[K  listing pods\\x1b[2J ... 3"  # its own erase only


SCANNER = Path(__file__).resolve().parents[3] / "scanner"
PRINTS_THROUGH_CONSOLE = {"console.py"}


def _raw_writes(tree: ast.AST) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        function = node.func
        if isinstance(function, ast.Name) and function.id == "print":
            found.append(f"print, line {node.lineno}")
        if isinstance(function, ast.Attribute):
            name = ast.unparse(function)
            if name in ("click.echo", "click.secho", "sys.stdout.write", "sys.stderr.write"):
                found.append(f"{name}, line {node.lineno}")
    return found


def test_poolgate_prints_only_through_the_console_module() -> None:
    """One place escapes what poolgate prints (``scanner.console``): a new message
    written with ``click.echo`` or ``print`` elsewhere would skip it."""
    offenders = {
        str(path.relative_to(SCANNER)): writes
        for path in sorted(SCANNER.rglob("*.py"))
        if path.name not in PRINTS_THROUGH_CONSOLE
        and (writes := _raw_writes(ast.parse(path.read_text())))
    }
    assert offenders == {}
