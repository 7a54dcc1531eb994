"""The cache directory is believed only when it is private and its files verify
(issue 21, item 7).

Whoever could write the cache directory could store the compiled program ``[]``
under every rule's key, and the demo's 32 findings became 0: a restored program
skips compiling, so its type and nesting checks too. Whoever could add a digest to
``validated-rules`` let a broken rule file skip its schema. Here the attacker
writes the files a run reads; the findings must not change.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import stat
import struct
from pathlib import Path

import cli_run
import pytest

from scanner.cel import cpp_available
from scanner.ruleset import cache as rulecache
from scanner.ruleset import load as rules
from scanner.runtime import cachedir

DEMO = cli_run.ROOT / "fixtures" / "demo"
DEMO_FINDINGS = 22
_RECORD = struct.Struct(">16sI")  # scanner/cel/programcache.py: key, length, program
cpp_only = pytest.mark.skipif(not cpp_available(), reason="cel-expr-python not installed")
posix_only = pytest.mark.skipif(not hasattr(os, "geteuid"), reason="POSIX owner and mode")

BROKEN_RULE = """\
id: ACME001
name: broken-rule
level: loud
summary: A level that does not exist.
description: The schema refuses it.
remediation: None.
subject: workload
violations: "[]"
"""


def _scan_demo(cache: Path) -> tuple[int, str]:
    """(violations found, stderr) of a JSON scan of the demo with ``cache``."""
    result = cli_run.poolgate(
        "scan",
        str(DEMO),
        "--format",
        "json",
        "--cel-engine",
        "cpp",
        env={"POOLGATE_CACHE_DIR": str(cache)},
    )
    assert result.returncode in (1, 3), result.stderr
    findings = json.loads(result.stdout)["findings"]
    return sum(finding["outcome"] == "fail" for finding in findings), result.stderr


def _split(data: bytes) -> tuple[bytes, bytes]:
    """(tag, content) of a cache file."""
    return data[: cachedir.TAG_SIZE], data[cachedir.TAG_SIZE :]


def _records(content: bytes) -> list[tuple[bytes, bytes]]:
    found, offset = [], 0
    while offset < len(content):
        key, length = _RECORD.unpack_from(content, offset)
        offset += _RECORD.size
        found.append((key, content[offset : offset + length]))
        offset += length
    return found


def _empty_program() -> bytes:
    from scanner.cel import cpp

    engine = cpp.CppEngine()  # stored as the engine stores a program: checked, vetted
    return engine._prepare(engine.checker.compile("[]"), "[]", True)


def _empty_list_under_every_key(content: bytes) -> bytes:
    """The attack: every stored program replaced by the compiled program ``[]``."""
    empty = _empty_program()
    return b"".join(_RECORD.pack(key, len(empty)) + empty for key, _ in _records(content))


def _tag(key: bytes, name: str, content: bytes) -> bytes:
    return hmac.new(key, name.encode() + b"\0" + content, hashlib.sha256).digest()


@cpp_only
def test_poisoned_compiled_programs_are_recompiled_and_findings_stay(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    assert _scan_demo(cache)[0] == DEMO_FINDINGS  # compiles and stores every program
    [stored] = cache.glob("compiled-cel-*")
    tag, content = _split(stored.read_bytes())
    poisoned = _empty_list_under_every_key(content)
    key = (cache / cachedir.KEY_FILE).read_bytes()

    # Without the key: the old tag, a tag under a key of the attacker's, no tag.
    for forged in (tag + poisoned, _tag(b"x" * 32, stored.name, poisoned) + poisoned, poisoned):
        stored.write_bytes(forged)
        assert _scan_demo(cache) == (DEMO_FINDINGS, "")
        # Compiled again and stored as poolgate compiled it:
        rewritten_tag, rewritten = _split(stored.read_bytes())
        assert rewritten_tag == _tag(key, stored.name, rewritten)
        assert _empty_program() not in {program for _, program in _records(rewritten)}

    # The control: with the directory's own key the same bytes are believed, which
    # is why the key and the directory are the user's alone.
    stored.write_bytes(_tag(key, stored.name, poisoned) + poisoned)
    assert _scan_demo(cache)[0] < DEMO_FINDINGS


def test_a_digest_added_to_the_validated_list_does_not_skip_the_schema(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    rule_dir = tmp_path / "rules"
    rule_dir.mkdir()
    (rule_dir / "ACME001-broken-rule.yaml").write_text(BROKEN_RULE)
    (tmp_path / "app.yaml").write_text("apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n")
    env = {"POOLGATE_CACHE_DIR": str(cache)}
    first = cli_run.poolgate("scan", "app.yaml", "--rules", "rules", cwd=tmp_path, env=env)
    assert first.returncode == 2 and "level" in first.stderr
    listed = cache / rulecache.FILE_NAME
    digest = rulecache.digest(rules._schema_text(), BROKEN_RULE)
    data = listed.read_bytes()
    # The old tag over a longer list; and the list as poolgate 0.1 wrote it, untagged.
    for forged in (data + f"{digest}\n".encode(), data[cachedir.TAG_SIZE :] + digest.encode()):
        listed.write_bytes(forged)
        again = cli_run.poolgate("scan", "app.yaml", "--rules", "rules", cwd=tmp_path, env=env)
        assert again.returncode == 2, again.stderr
        assert again.stderr == first.stderr


@posix_only
@cpp_only
@pytest.mark.parametrize("mode", [0o777, 0o770, 0o702])
def test_a_directory_others_may_write_is_not_used(tmp_path: Path, mode: int) -> None:
    """Even files that verify under a key found there are not read: whoever can write
    the directory can write the key too."""
    cache = tmp_path / "cache"
    assert _scan_demo(cache)[0] == DEMO_FINDINGS
    [stored] = cache.glob("compiled-cel-*")
    key = (cache / cachedir.KEY_FILE).read_bytes()
    poisoned = _empty_list_under_every_key(_split(stored.read_bytes())[1])
    stored.write_bytes(_tag(key, stored.name, poisoned) + poisoned)
    before = sorted(path.name for path in cache.iterdir())
    os.chmod(cache, mode)

    found, stderr = _scan_demo(cache)
    assert found == DEMO_FINDINGS
    assert stderr == (
        f"poolgate: warning: cache directory {cache} may be written by others "
        f"(mode {mode:04o}; it must be 0700); running without a cache\n"
    )  # once, though two caches asked
    assert sorted(path.name for path in cache.iterdir()) == before  # nothing written either
    assert stat.S_IMODE(cache.stat().st_mode) == mode


@posix_only
def test_a_new_directory_and_key_are_private(tmp_path: Path) -> None:
    cache = tmp_path / "deeper" / "cache"
    result = cli_run.poolgate(
        "scan", str(DEMO / "namespaces.yaml"), env={"POOLGATE_CACHE_DIR": str(cache)}
    )
    assert result.returncode in (0, 1), result.stderr
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700
    key = cache / cachedir.KEY_FILE
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert len(key.read_bytes()) == cachedir.KEY_SIZE
    for path in cache.iterdir():
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path


@posix_only
def test_a_directory_only_others_may_read_is_made_private_and_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An older poolgate made the directory 0755: no one else could write to it."""
    cache = tmp_path / "cache"
    cache.mkdir()
    os.chmod(cache, 0o755)
    monkeypatch.setenv("POOLGATE_CACHE_DIR", str(cache))
    cachedir.write("entry", b"kept")
    assert cachedir.read("entry") == b"kept"
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700
    assert capsys.readouterr().err == ""


@posix_only
@pytest.mark.parametrize(
    ("damage", "problem"),
    [
        ("symlinked directory", "is a symbolic link"),
        ("foreign owner", "is owned by user id"),
        ("shared key", "holds a key file that is not this user's alone (it must be 0600)"),
        ("symlinked key", "holds a key file that cannot be used"),
        ("short key", "holds a key file that is not 32 bytes"),
    ],
)
def test_a_directory_or_key_not_the_users_own_is_not_used(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    damage: str,
    problem: str,
) -> None:
    real = tmp_path / "real"
    monkeypatch.setenv("POOLGATE_CACHE_DIR", str(real))
    cachedir.write("entry", b"kept")  # a private directory with a key and one entry
    cache = real
    key = real / cachedir.KEY_FILE
    if damage == "symlinked directory":
        cache = tmp_path / "link"
        cache.symlink_to(real)
    elif damage == "foreign owner":
        uid = os.geteuid()
        monkeypatch.setattr(os, "geteuid", lambda: uid + 1)
        cache = tmp_path / "again"  # a directory this process has not checked yet
        real.rename(cache)
    elif damage == "shared key":
        os.chmod(key, 0o644)
        cache = tmp_path / "again"
        real.rename(cache)
    elif damage == "symlinked key":
        (tmp_path / "elsewhere").write_bytes(key.read_bytes())
        key.unlink()
        key.symlink_to(tmp_path / "elsewhere")
        cache = tmp_path / "again"
        real.rename(cache)
    else:
        key.write_bytes(b"short")
        cache = tmp_path / "again"
        real.rename(cache)
    monkeypatch.setenv("POOLGATE_CACHE_DIR", str(cache))
    assert cachedir.read("entry") is None
    cachedir.write("other", b"not kept")
    assert cachedir.read("entry") is None  # the warning comes once
    warning = capsys.readouterr().err
    assert warning.startswith(f"poolgate: warning: cache directory {cache} {problem}")
    assert warning.endswith("; running without a cache\n") and warning.count("\n") == 1
    assert not (cache / "other").exists()
