"""The architecture rules of issue 22, checked so they stay true.

* no module in ``scanner/`` over ``MAX_MODULE_LINES`` lines;
* no function over ``MAX_FUNCTION_LINES`` lines, except at most two hot loops inlined
  on purpose (``HOT_LOOPS``), each under ``MAX_HOT_LOOP_LINES`` and saying why;
* at most ``MAX_ENTRIES`` entries directly in ``scanner/``;
* imports follow the pipeline's direction (``LAYERS``), ``model/`` never imports
  ``sources/``, the plain evaluator imports no speed-up or process machinery, and
  ``cli`` reaches process and GC workarounds through one fenced entry at most;
* CEL source is read outside ``scanner/cel/`` only through the analysis;
* no timing figures in docstrings or comments (they go to benchmarks/README.md).

Each rule's test fails on any violation: there is no allowlist. A function's length is
counted from its ``def`` line to its last line (decorators aside); a module's in lines.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCANNER = ROOT / "scanner"

MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80
MAX_HOT_LOOP_LINES = 160
MAX_ENTRIES = 20

HOT_LOOPS: dict[str, str] = {
    # At most two, each under MAX_HOT_LOOP_LINES, each saying "hot loop" in its
    # docstring or comments.
    "scanner/sources/yaml/walk.py:build": "every node of every manifest passes through it",
}

LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    # In pipeline order: a module may import its own layer and the ones above it.
    (
        "shared records and utilities",
        (
            "scanner",
            "scanner.errors",
            "scanner.inventory",
            "scanner.kinds",
            "scanner.console",
            "scanner.runtime",
            "scanner.findings.records",
            # The YAML reader: configuration, rule files, manifests and the device-plugin
            # configs the model reads are all YAML, read with the same limits and marks.
            "scanner.sources.yaml",
        ),
    ),
    ("config", ("scanner.config",)),
    ("sources", ("scanner.sources",)),
    # The parse of CEL text is engine-free; issue 22 has model/dra.py and
    # model/admission.py read admission policies' CEL through it, so it comes
    # before the model, apart from the engines.
    (
        "CEL analysis",
        ("scanner.cel.analysis", "scanner.cel.parser", "scanner.cel.syntax", "scanner.cel.walk"),
    ),
    ("model", ("scanner.model",)),
    ("cel", ("scanner.cel",)),
    ("ruleset", ("scanner.ruleset",)),
    ("evaluate", ("scanner.evaluate",)),
    ("findings", ("scanner.findings",)),
    ("reporters", ("scanner.reporters",)),
    # The policy of a run (config, rule files, baseline) from the work tree or a commit.
    ("policy", ("scanner.policy",)),
    ("pipeline", ("scanner.pipeline",)),
    ("audit", ("scanner.audit",)),
    ("cli", ("scanner.cli", "scanner.__main__")),
)

# -- reading the package -------------------------------------------------------------


def _modules(scanner: Path) -> tuple[Path, ...]:
    return tuple(sorted(p for p in scanner.rglob("*.py") if "__pycache__" not in p.parts))


def _relative(path: Path, scanner: Path) -> str:
    return path.relative_to(scanner.parent).as_posix()


def _dotted(path: Path, scanner: Path) -> str:
    parts = path.relative_to(scanner.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), str(path))


@cache
def _module_names(scanner: Path, modules: tuple[Path, ...]) -> frozenset[str]:
    return frozenset(_dotted(path, scanner) for path in modules)


def _functions(
    body: list[ast.stmt], prefix: str = ""
) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """(qualified name, node) of every function, nested ones and methods included."""
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield prefix + node.name, node
            yield from _functions(node.body, f"{prefix}{node.name}.")
        elif isinstance(node, ast.ClassDef):
            yield from _functions(node.body, f"{prefix}{node.name}.")
        else:
            for field in ("body", "orelse", "finalbody", "handlers"):
                inner = getattr(node, field, None)
                if isinstance(inner, list):
                    yield from _functions(inner, prefix)


def _length(node: ast.AST) -> int:
    end = node.end_lineno
    assert end is not None
    return end - node.lineno + 1


def _imports(path: Path, scanner: Path) -> Iterator[tuple[str, list[str]]]:
    """(module imported, names taken from it) for every import, lazy ones included."""
    dotted = _dotted(path, scanner)
    package = dotted if path.name == "__init__.py" else dotted.rpartition(".")[0]
    modules = _module_names(scanner, _modules(scanner))
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, []
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            plain = []
            for alias in node.names:
                if f"{base}.{alias.name}" in modules:  # a submodule
                    yield f"{base}.{alias.name}", []
                else:
                    plain.append(alias.name)
            if plain:
                yield base, plain


def _layer(module: str) -> int:
    best, length = -1, -1
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > length:
                best, length = index, len(prefix)
    return best


def _texts(path: Path) -> Iterator[tuple[int, str]]:
    """(line, text) of every docstring (a string on its own: attributes' too) and
    every comment."""
    for node in ast.walk(_tree(path)):
        if (
            isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            yield node.lineno, node.value.value
    source = path.read_text(encoding="utf-8")
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string


# -- the rules: each returns its violations in the package at ``scanner`` ------------


def module_size(scanner: Path) -> set[str]:
    return {
        _relative(path, scanner)
        for path in _modules(scanner)
        if len(path.read_text(encoding="utf-8").splitlines()) > MAX_MODULE_LINES
    }


def function_size(scanner: Path) -> set[str]:
    found = set()
    for path in _modules(scanner):
        for name, node in _functions(_tree(path).body):
            key = f"{_relative(path, scanner)}:{name}"
            limit = MAX_HOT_LOOP_LINES - 1 if key in HOT_LOOPS else MAX_FUNCTION_LINES
            if _length(node) > limit:
                found.add(key)
    return found


def import_direction(scanner: Path) -> set[str]:
    found = set()
    for path in _modules(scanner):
        importer = _dotted(path, scanner)
        for imported, _ in _imports(path, scanner):
            if imported.startswith("scanner") and _layer(imported) > _layer(importer):
                found.add(f"{importer} -> {imported}")
    return found


def model_imports_no_sources(scanner: Path) -> set[str]:
    return {
        f"{_dotted(path, scanner)} -> {imported}"
        for path in _modules(scanner)
        if _dotted(path, scanner).startswith("scanner.model")
        for imported, _ in _imports(path, scanner)
        if imported == "scanner.sources" or imported.startswith("scanner.sources.")
    }


SPEED_AND_PROCESS = ("scanner.runtime", "scanner.evaluate.optimize")


def plain_evaluator(scanner: Path) -> set[str]:
    """``evaluate/evaluator.py`` (match -> condition -> variables -> findings) knows
    nothing of speed-ups or processes."""
    path = scanner / "evaluate" / "evaluator.py"
    if not path.exists():
        return {"scanner/evaluate/evaluator.py: missing"}
    return {
        f"scanner.evaluate.evaluator -> {imported}"
        for imported, _ in _imports(path, scanner)
        if any(imported == top or imported.startswith(top + ".") for top in SPEED_AND_PROCESS)
    }


WORKAROUNDS = ("scanner.runtime.executors", "scanner.runtime.teardown")


def cli_workarounds(scanner: Path) -> set[str]:
    """What the command-line layer uses of the process and GC workarounds: nothing
    but one fenced entry (one name of a workaround module), and never ``gc``."""
    used: set[str] = set()
    for path in _modules(scanner):
        if not _dotted(path, scanner).startswith(("scanner.cli", "scanner.__main__")):
            continue
        aliases: dict[str, str] = {}
        for imported, names in _imports(path, scanner):
            if imported == "gc":
                used.add("gc")
            if imported in WORKAROUNDS:
                used.update(f"{imported}.{name}" for name in names)
                if not names:
                    aliases[imported.rpartition(".")[2]] = imported
        for node in ast.walk(_tree(path)):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in aliases
            ):
                used.add(f"{aliases[node.value.id]}.{node.attr}")
    if "gc" not in used and len(used) <= 1:
        return set()
    return {f"scanner.cli uses {name}" for name in used}


CEL_READERS = (
    "scanner/evaluate/optimize/",
    "scanner/evaluate/plan.py",
    "scanner/evaluate/evaluator.py",
    "scanner/audit/reads.py",
    "scanner/model/dra.py",
    "scanner/model/admission.py",
)
RAW_PARSE = ("scanner.cel.parser", "scanner.cel.syntax", "scanner.cel.walk")
TEXT_MATCHERS = ("re", "regex", "fnmatch")
CEL_OPERATORS = re.compile(r"&&|\|\|")


def cel_read_outside_the_analysis(scanner: Path) -> set[str]:
    """What can be told mechanically: outside ``scanner/cel/``, no module takes the raw
    parse (only ``scanner.cel.analysis``); the modules that read rules' or admission
    policies' CEL import no text matcher; and no code outside ``scanner/cel/`` holds a
    CEL logical operator in a string (splitting or joining conditions as text). Not
    checked: building CEL text around a rule's own (variable binding wraps sources in
    comprehensions; its equivalence tests check it), or string methods on a source."""
    found = set()
    for path in _modules(scanner):
        name = _relative(path, scanner)
        if name.startswith("scanner/cel/"):
            continue
        for imported, _ in _imports(path, scanner):
            if imported in RAW_PARSE:
                found.add(f"{name} imports {imported}")
            if name.startswith(CEL_READERS) and imported in TEXT_MATCHERS:
                found.add(f"{name} imports {imported}")
        docstrings = {
            id(node.value)
            for node in ast.walk(_tree(path))
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
        }
        for node in ast.walk(_tree(path)):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and id(node) not in docstrings
                and CEL_OPERATORS.search(node.value)
            ):
                found.add(f"{name}:{node.lineno} holds a CEL operator in a string")
    return found


TIMING = re.compile(
    r"(?<![\w.])~?\d[\d,]*(?:\.\d+)?(?:\s?(?:-|\u2013|to)\s?\d[\d,]*(?:\.\d+)?)?"
    r"\s?(?:ms|µs|us|ns|s|secs?|seconds?)\b"
    r"|\b(?:milli|micro|nano)seconds?\b"
    r"|(?:\d|\btwice)\s?(?:x|\u00d7|times)?\s(?:as fast|faster|slower|as long|as slow)\b",
    re.IGNORECASE,
)
"""A duration in figures (``~3 ms``, ``2 s of 9.6 s``, ``4.1-4.4 s``), any number of
milli-, micro- or nanoseconds, or a speed ratio (``~7x as fast``, ``200 times slower``)."""


def timing_figures(scanner: Path) -> set[str]:
    return {
        f"{_relative(path, scanner)}:{line}: {match.group(0)!r}"
        for path in _modules(scanner)
        for line, text in _texts(path)
        for match in TIMING.finditer(text)
    }


def too_many_entries(scanner: Path) -> set[str]:
    entries = sorted(entry.name for entry in scanner.iterdir() if entry.name != "__pycache__")
    return (
        {f"{len(entries)} entries: {', '.join(entries)}"} if len(entries) > MAX_ENTRIES else set()
    )


RULES = {
    "module size": module_size,
    "function size": function_size,
    "entries in scanner/": too_many_entries,
    "import direction": import_direction,
    "model imports no sources": model_imports_no_sources,
    "plain evaluator": plain_evaluator,
    "cli workarounds": cli_workarounds,
    "cel read outside the analysis": cel_read_outside_the_analysis,
    "timing figures": timing_figures,
}


# -- the tests -------------------------------------------------------------------------


@cache
def _current(rule: str) -> frozenset[str]:
    """The violations of ``rule`` in this checkout's ``scanner/``."""
    return frozenset(RULES[rule](SCANNER))


@pytest.mark.parametrize("rule", sorted(RULES))
def test_no_violation(rule: str) -> None:
    assert sorted(_current(rule)) == []


def test_hot_loops_are_few_named_and_say_why() -> None:
    assert len(HOT_LOOPS) <= 2
    for key in HOT_LOOPS:
        module, name = key.split(":")
        path = ROOT / module
        functions = dict(_functions(_tree(path).body))
        assert name in functions, f"{key}: no such function"
        node = functions[name]
        assert _length(node) < MAX_HOT_LOOP_LINES, key
        lines = path.read_text(encoding="utf-8").splitlines()
        source = "\n".join(lines[node.lineno - 1 : node.end_lineno])
        assert "hot loop" in source.lower(), f"{key}: say in it why it is inlined"


def _write(root: Path, name: str, text: str) -> None:
    path = root / "scanner" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def test_each_rule_sees_a_violation_written_for_it(tmp_path: Path) -> None:
    """A package breaking every rule once: a check that could not fail proves nothing."""
    long_body = "".join(f"    x{index} = {index}\n" for index in range(80))
    _write(tmp_path, "__init__.py", "")
    _write(tmp_path, "big.py", "x = 1\n" * (MAX_MODULE_LINES + 1))
    _write(tmp_path, "small.py", "x = 1\n" * MAX_MODULE_LINES)
    _write(tmp_path, "long.py", f"def long():\n{long_body}\n\ndef short():\n{long_body[:-14]}")
    _write(tmp_path, "config/__init__.py", "from scanner.pipeline import scan_paths\n")
    _write(tmp_path, "pipeline.py", "from scanner.config import values\n")
    _write(tmp_path, "config/values.py", "")
    _write(tmp_path, "model/facts.py", "def f():\n    from scanner.sources import files\n")
    _write(tmp_path, "model/dra.py", "import re\nfrom scanner.cel.analysis import analyze\n")
    for module in ("sources/files.py", "runtime/executors.py", "runtime/teardown.py"):
        _write(tmp_path, module, "")
    _write(tmp_path, "cel/parser.py", "")
    _write(tmp_path, "evaluate/evaluator.py", "from scanner.runtime import executors\n")
    _write(tmp_path, "evaluate/optimize/guards.py", 'SPLIT = " && "\n"""a && b"""\n')
    _write(tmp_path, "audit/reads.py", "from scanner.cel import parser\n")
    _write(tmp_path, "cli.py", "from scanner.runtime import teardown\nteardown.end(0)\n")
    _write(tmp_path, "__main__.py", "import gc  # only here: ~10 ms otherwise\n")
    scanner = tmp_path / "scanner"
    assert module_size(scanner) == {"scanner/big.py"}
    assert function_size(scanner) == {"scanner/long.py:long"}
    assert too_many_entries(scanner) == set()
    assert import_direction(scanner) == {"scanner.config -> scanner.pipeline"}
    assert model_imports_no_sources(scanner) == {"scanner.model.facts -> scanner.sources.files"}
    assert plain_evaluator(scanner) == {"scanner.evaluate.evaluator -> scanner.runtime.executors"}
    assert cli_workarounds(scanner) == {
        "scanner.cli uses gc",
        "scanner.cli uses scanner.runtime.teardown.end",
    }
    assert cel_read_outside_the_analysis(scanner) == {
        "scanner/model/dra.py imports re",
        "scanner/audit/reads.py imports scanner.cel.parser",
        "scanner/evaluate/optimize/guards.py:1 holds a CEL operator in a string",
    }
    assert timing_figures(scanner) == {"scanner/__main__.py:1: '~10 ms'"}
    for extra in range(MAX_ENTRIES):
        _write(tmp_path, f"extra{extra}.py", "")
    assert len(too_many_entries(scanner)) == 1


def test_one_fenced_workaround_is_allowed_and_gc_never(tmp_path: Path) -> None:
    _write(tmp_path, "cli/__init__.py", "from scanner.runtime.teardown import run_and_exit\n")
    assert cli_workarounds(tmp_path / "scanner") == set()
    _write(tmp_path, "cli/scan.py", "import gc\n")
    assert cli_workarounds(tmp_path / "scanner") == {
        "scanner.cli uses gc",
        "scanner.cli uses scanner.runtime.teardown.run_and_exit",
    }


@pytest.mark.parametrize(
    "text",
    [
        "costs ~3 ms",
        "(2 s of 9.6 s)",
        "4.1-4.4 s -> 3.4 s CPU",
        "about 100 µs per container",
        "(~380 us)",
        "about a millisecond",
        "tens of microseconds",
        "~7x as fast",
        "200 times slower",
        "twice as long to build",
    ],
)
def test_timing_figures_are_recognised(text: str) -> None:
    assert TIMING.search(text)


@pytest.mark.parametrize(
    "text",
    [
        "k8s.io/pod-security-admission",
        "The deadline ``seconds`` from now.",
        "a pod Pending for 40 minutes",
        "ints (decimal, ``0x``)",
        "Seconds one git command may take",
        "at most 1,000 endpoints",
    ],
)
def test_other_numbers_are_not_timing_figures(text: str) -> None:
    assert not TIMING.search(text)


def test_layers_follow_the_pipeline() -> None:
    assert _layer("scanner.findings.records") < _layer("scanner.config") < _layer("scanner.sources")
    assert _layer("scanner.cel.analysis") < _layer("scanner.model") < _layer("scanner.cel.cpp")
    assert _layer("scanner.evaluate.engine") < _layer("scanner.findings.drift")
    assert _layer("scanner.reporters.json") < _layer("scanner.pipeline") < _layer("scanner.cli")
