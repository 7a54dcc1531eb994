"""Reading files from a git commit, not from the work tree: the policy of ``--policy-ref``.

A pull request's checkout is written by its author; the commit it targets is not.
``poolgate scan --policy-ref REF`` reads the configuration, its rule files and the
baseline from REF's tree through git plumbing, so the pull request cannot choose
the policy it is judged by.

Git runs as a subprocess, never through a shell, with ``git -C <repository root>``
and only commands that read objects: ``rev-parse --verify``, ``ls-tree`` and
``cat-file --batch``. None of them runs hooks, and the options and environment
close what could still run a command or reach the network: every ``GIT_*``
variable of the caller is dropped (``GIT_DIR``, ``GIT_CONFIG_*``, ``GIT_EXEC_PATH``
... could point git elsewhere), ``core.fsmonitor`` is off, ``protocol.allow=never``
refuses any transport (a partial clone would otherwise fetch a missing blob from
its remote), replace refs are ignored, pathspecs are literal and
``GIT_CEILING_DIRECTORIES`` keeps git from looking above the repository root.
Every blob's size is known from ``ls-tree -l`` and checked against a limit before
it is read.

Nothing here runs unless ``--policy-ref`` (or ``--compare-policy``) is given: a
pre-commit run starts no git process.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

from scanner.errors import UsageError, printable

# subprocess and shutil are imported where git runs: a scan without --policy-ref
# (the pre-commit path) should not pay for them.
if TYPE_CHECKING:
    import subprocess

GIT_TIMEOUT: Final = 60.0
"""Seconds one git command may take (each reads a few objects of a local repository)."""
PATHS_PER_CALL: Final = 512
"""Paths passed to one ``ls-tree`` call: far below any command-line length limit."""
FILE_MODES: Final = frozenset({"100644", "100755"})
SYMLINK_MODE: Final = "120000"
TREE_MODE: Final = "040000"
_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f]")
_HEX: Final = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


@dataclass(frozen=True, slots=True)
class Entry:
    """One entry of a commit's tree, as ``git ls-tree -l`` lists it."""

    path: str
    """Relative to the repository root, POSIX separators."""
    mode: str
    """``100644``/``100755`` file, ``120000`` symbolic link, ``040000`` directory,
    ``160000`` submodule."""
    oid: str
    size: int
    """Bytes of a blob; -1 for a directory or a submodule."""

    @property
    def is_file(self) -> bool:
        return self.mode in FILE_MODES

    @property
    def is_dir(self) -> bool:
        return self.mode == TREE_MODE


class Commit:
    """One commit of the repository at ``root``: its tree, read without the work tree."""

    def __init__(self, root: Path, ref: str, sha: str, program: str) -> None:
        self.root = root
        self.ref = ref
        """The name the user gave (``origin/main``, a SHA)."""
        self.sha = sha
        """The commit it resolved to, in full."""
        self._program = program

    @classmethod
    def resolve(cls, root: Path, ref: str, option: str = "--policy-ref") -> Commit:
        """The commit ``ref`` names in the repository at ``root``; a ``UsageError`` when
        it names none (the run must fail closed, not fall back to the work tree)."""
        import shutil

        shown = printable(ref)
        if not ref or ref.startswith("-") or _CONTROL.search(ref):
            raise UsageError(f"{option} {shown!r}: not a git revision")
        program = shutil.which("git")
        if program is None:
            raise UsageError(f"{option} needs git, which is not on PATH")
        commit = cls(root, ref, "", program)
        done = commit._git(["rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"], check=False)
        sha = done.stdout.decode("ascii", "replace").strip()
        if done.returncode != 0 or not _HEX.fullmatch(sha):
            raise UsageError(
                f"{option} {shown}: no such commit in {root}",
                hint="check the name; a shallow checkout may need "
                "`git fetch --depth=1 origin <commit>` first",
            )
        commit.sha = sha
        return commit

    @property
    def label(self) -> str:
        """How messages name a file of this commit's tree: ``REF:path``, as git does."""
        return printable(self.ref)

    def entries(self, paths: Iterable[str]) -> dict[str, Entry]:
        """The entries at exactly ``paths`` (repository-relative) that exist in the tree."""
        found: dict[str, Entry] = {}
        for batch in _batches(paths):
            for entry in self._ls_tree(sorted(batch)):
                if entry.path in batch:
                    found[entry.path] = entry
        return found

    def listing(self, directory: str) -> list[Entry]:
        """The entries directly inside ``directory`` (``""`` for the root), by name."""
        prefix = f"{directory.rstrip('/')}/" if directory not in ("", ".") else ""
        entries = self._ls_tree([prefix] if prefix else [])
        return sorted(
            (entry for entry in entries if "/" not in entry.path[len(prefix) :]),
            key=lambda entry: entry.path,
        )

    def read(self, entries: Sequence[Entry], limit: int) -> list[bytes]:
        """The bytes of file ``entries``, in order. The caller checked each is a file of
        at most ``limit`` bytes; a size that changed is an error."""
        if not entries:
            return []
        for entry in entries:
            if not entry.is_file or entry.size > limit:
                raise UsageError(f"{self.label}:{printable(entry.path)}: not a readable file")
        request = "".join(f"{entry.oid}\n" for entry in entries).encode("ascii")
        output = self._git(["cat-file", "--batch"], stdin=request).stdout
        contents: list[bytes] = []
        at = 0
        for entry in entries:
            end = output.find(b"\n", at)
            header = output[at:end].split()
            if len(header) != 3 or header[1] != b"blob" or int(header[2]) != entry.size:
                raise UsageError(
                    f"{self.label}:{printable(entry.path)}: git returned an unexpected object"
                )
            contents.append(output[end + 1 : end + 1 + entry.size])
            at = end + 1 + entry.size + 1
        return contents

    def _ls_tree(self, paths: Sequence[str]) -> list[Entry]:
        output = self._git(["ls-tree", "-l", "-z", "--full-tree", self.sha, "--", *paths]).stdout
        entries = []
        for record in output.split(b"\0"):
            if not record:
                continue
            meta, _, raw_path = record.partition(b"\t")
            mode, _kind, oid, size = meta.decode("ascii").split()
            path = os.fsdecode(raw_path)
            entries.append(Entry(path, mode, oid, int(size) if size != "-" else -1))
        return entries

    def _git(
        self, args: Sequence[str], *, stdin: bytes | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[bytes]:
        import subprocess

        argv = [
            self._program,
            "--no-pager",
            "-C",
            str(self.root),
            "-c",
            "core.fsmonitor=false",
            "-c",
            "protocol.allow=never",
            *args,
        ]
        try:
            done = subprocess.run(
                argv,
                input=stdin if stdin is not None else b"",
                capture_output=True,
                env=_environment(self.root),
                timeout=GIT_TIMEOUT,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise UsageError(f"git {args[0]} did not finish in {GIT_TIMEOUT:g} s") from None
        except OSError as error:
            raise UsageError(f"cannot run git: {error.strerror or error}") from None
        if check and done.returncode != 0:
            lines = done.stderr.decode("utf-8", "replace").strip().splitlines()
            reason = printable(lines[-1][:300]) if lines else f"exit status {done.returncode}"
            raise UsageError(f"git {args[0]} on {self.label} failed: {reason}")
        return done


def _batches(paths: Iterable[str]) -> list[set[str]]:
    """``paths`` in groups for one ``ls-tree`` each, none holding a path and one below
    it: given ``a`` and ``a/b``, ls-tree lists what is in ``a`` instead of ``a``."""
    batches: list[set[str]] = []
    for path in sorted(set(paths)):  # an ancestor sorts before what is below it
        parts = path.split("/")
        ancestors = {"/".join(parts[:depth]) for depth in range(1, len(parts))}
        for batch in batches:
            if len(batch) < PATHS_PER_CALL and not ancestors & batch:
                batch.add(path)
                break
        else:
            batches.append({path})
    return batches


def _environment(root: Path) -> dict[str, str]:
    """The caller's environment without anything that steers git, plus what keeps it
    to reading this repository's objects."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("GIT_")}
    env.update(
        GIT_CEILING_DIRECTORIES=str(Path(os.path.abspath(root)).parent),
        GIT_LITERAL_PATHSPECS="1",
        GIT_NO_REPLACE_OBJECTS="1",
        GIT_NO_LAZY_FETCH="1",
        GIT_TERMINAL_PROMPT="0",
        GIT_OPTIONAL_LOCKS="0",
        LC_ALL="C",
    )
    return env


def blob_id(data: bytes, like: str) -> str:
    """The object id git gives ``data`` as a blob, in the hash of object id ``like``
    (SHA-1 or SHA-256 repositories): compares a work-tree file with a tree entry
    without running git."""
    hasher = hashlib.sha1() if len(like) == 40 else hashlib.sha256()
    hasher.update(b"blob %d\0" % len(data))
    hasher.update(data)
    return hasher.hexdigest()


def relative(path: Path | str, root: Path) -> str | None:
    """``path`` (as the user named it) relative to ``root``, POSIX; ``None`` outside it.
    Not resolved through symbolic links, like configuration discovery."""
    try:
        relation = os.path.relpath(os.path.abspath(path), os.path.abspath(root))
    except ValueError:  # another drive (Windows)
        return None
    if relation == os.curdir:
        return ""
    if relation == os.pardir or relation.startswith(os.pardir + os.sep) or os.path.isabs(relation):
        return None
    return Path(relation).as_posix()


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
