"""Compiled programs kept between runs (scanner/cel/programcache.py): only exactly the
same text, result kind and compiler identity is restored, and a broken cache file
only costs a compile."""

from __future__ import annotations

from pathlib import Path

import pytest

from scanner.cel import ResultKind, cpp_available
from scanner.cel import cpp as cpp_module
from scanner.cel.programcache import ProgramCache, identity, key
from scanner.errors import CelError

pytestmark = pytest.mark.skipif(not cpp_available(), reason="cel-expr-python not installed")

SOURCE = 'object.spec.containers.exists(c, c.name == "app")'
OBJECT = {"spec": {"containers": [{"name": "app"}]}}


@pytest.fixture(autouse=True)
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("POOLGATE_CACHE_DIR", str(tmp_path))
    return tmp_path


def fresh_engine() -> cpp_module.CppEngine:
    return cpp_module.CppEngine()


def no_compiling(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_: object) -> None:
        raise AssertionError("compiled although the program was cached")

    monkeypatch.setattr(cpp_module, "check", refuse)
    monkeypatch.setattr(cpp_module, "check_nesting", refuse)


def test_a_saved_program_is_restored_and_evaluates_the_same(
    monkeypatch: pytest.MonkeyPatch, cache_dir: Path
) -> None:
    first = fresh_engine()
    compiled = first.compile(SOURCE, ResultKind.BOOL)
    first.save_cache()
    assert len(list(cache_dir.glob("compiled-cel-*"))) == 1
    no_compiling(monkeypatch)
    restored = fresh_engine().compile(SOURCE, ResultKind.BOOL)
    engine = fresh_engine()
    activation = engine.activation({"object": OBJECT})
    assert restored.evaluate(activation) is compiled.evaluate(activation) is True


def test_other_text_or_result_kind_compiles_again(monkeypatch: pytest.MonkeyPatch) -> None:
    first = fresh_engine()
    first.compile(SOURCE, ResultKind.BOOL)
    first.save_cache()
    calls: list[str] = []
    original = cpp_module.check

    def counting(env: object, source: str, result: ResultKind) -> object:
        calls.append(source)
        return original(env, source, result)

    monkeypatch.setattr(cpp_module, "check", counting)
    engine = fresh_engine()
    engine.compile(SOURCE + " ", ResultKind.BOOL)
    engine.compile(SOURCE, ResultKind.ANY)
    engine.compile(SOURCE, ResultKind.BOOL)
    assert calls == [SOURCE + " ", SOURCE]


def test_a_program_that_fails_to_compile_is_never_kept(cache_dir: Path) -> None:
    engine = fresh_engine()
    with pytest.raises(CelError):
        engine.compile("object.spec +", ResultKind.BOOL)
    with pytest.raises(CelError):  # the nesting limit is part of compiling
        engine.compile("[1].all(a, [1].all(b, [1].all(c, [1].all(d, true))))", ResultKind.BOOL)
    engine.save_cache()
    assert not list(cache_dir.glob("compiled-cel-*"))


@pytest.mark.parametrize("damage", ["truncate", "garbage", "empty"])
def test_a_damaged_cache_file_costs_only_a_compile(cache_dir: Path, damage: str) -> None:
    first = fresh_engine()
    first.compile(SOURCE, ResultKind.BOOL)
    first.compile("object.kind == 'Pod'", ResultKind.BOOL)
    first.save_cache()
    [path] = cache_dir.glob("compiled-cel-*")
    data = path.read_bytes()
    if damage == "truncate":
        path.write_bytes(data[: len(data) - 7])
    elif damage == "garbage":
        path.write_bytes(data[:20] + b"\xff" * (len(data) - 20))
    else:
        path.write_bytes(b"")
    engine = fresh_engine()
    program = engine.compile(SOURCE, ResultKind.BOOL)
    assert program.evaluate(engine.activation({"object": OBJECT})) is True
    engine.save_cache()


def test_an_unwritable_cache_directory_changes_nothing_but_speed(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("POOLGATE_CACHE_DIR", str(blocker / "cache"))
    engine = fresh_engine()
    program = engine.compile(SOURCE, ResultKind.BOOL)
    engine.save_cache()
    assert program.evaluate(engine.activation({"object": OBJECT})) is True


def test_identity_follows_the_library_and_the_declarations(tmp_path: Path) -> None:
    library = tmp_path / "cel.so"
    library.write_bytes(b"one")
    base = identity(library, ["var object: dyn"])
    assert identity(library, ["var object: dyn", "var node: dyn"]) != base
    library.write_bytes(b"three")
    assert identity(library, ["var object: dyn"]) != base
    assert identity(tmp_path / "missing.so", ["var object: dyn"]) != base
    check = tmp_path / "budget.py"
    check.write_text("MAX_NESTING = 3")
    vetted = identity(library, ["var object: dyn"], [check])
    check.write_text("MAX_NESTING = 2")  # a stricter check: old programs must not skip it
    assert identity(library, ["var object: dyn"], [check]) != vetted


def test_the_newest_entries_are_kept(monkeypatch: pytest.MonkeyPatch, cache_dir: Path) -> None:
    monkeypatch.setattr("scanner.cel.programcache.MAX_ENTRIES", 2)
    cache = ProgramCache("test")
    for index in range(3):
        cache.put(key(str(index), "bool"), f"data-{index}".encode())
    cache.save()
    reread = ProgramCache("test")
    assert reread.get(key("0", "bool")) is None
    assert reread.get(key("2", "bool")) == b"data-2"


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("object.spec.containers.map(c, c.name)", ["app"]),  # the standard runtime
        ("quantity('1Gi').isGreaterThan(quantity('1G'))", True),  # the full one
        ("{'b': 1, 'a': 2}.transformList(k, v, k)", ["a", "b"]),  # rewritten
    ],
)
def test_programs_of_either_runtime_are_restored(
    monkeypatch: pytest.MonkeyPatch, source: str, expected: object
) -> None:
    first = fresh_engine()
    first.compile(source, ResultKind.ANY)
    first.save_cache()
    no_compiling(monkeypatch)
    engine = fresh_engine()
    restored = engine.compile(source, ResultKind.ANY)
    assert restored.evaluate(engine.activation({"object": OBJECT})) == expected


def test_the_identity_hashes_the_code_that_checks_and_rewrites_programs() -> None:
    """A changed library, literal check or rewrite must not meet a program stored by
    the code before it."""
    vetted = {path.name for path in cpp_module.vetting_code()}
    kubernetes = {path.name for path in (Path(cpp_module.__file__).parent / "k8s").glob("*.py")}
    assert {"cpp.py", "budget.py", "checked.py"} | kubernetes <= vetted
    assert {"rewrite.py", "literals.py", "quantity.py", "runtime.py"} <= kubernetes


def test_a_program_cannot_be_restored_without_its_runtime_byte(cache_dir: Path) -> None:
    """Entries name the runtime that plans them; one without that byte compiles again."""
    engine = fresh_engine()
    engine._cache.put(key(SOURCE, "bool"), b"\x00garbage")
    program = engine.compile(SOURCE, ResultKind.BOOL)
    assert program.evaluate(engine.activation({"object": OBJECT})) is True
