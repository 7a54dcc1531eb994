"""Where a scan's policy comes from: the work tree, or a git commit (``--policy-ref``).

The policy is everything besides the manifests that decides a verdict: the
configuration (``.poolgate.yaml`` or ``--config``), the user rule files of its
``ruleDirs`` and of ``--rules``, and the ``--baseline``. In a pull request all of
them sit in the checkout the author wrote: a ``.poolgate.yaml`` that adds
``team-a`` to the operator namespaces, a nested ``k8s/.poolgate.yaml`` that wins
over the root one, a rule directory of the author's own, a baseline holding the
pull request's own findings.

``--policy-ref REF`` reads every one of them from the commit REF (the pull
request's base) instead, through ``scanner.config.gitref``: the config is discovered in
REF's tree exactly as in the work tree (nearest ``.poolgate.yaml`` from the first
scanned path up to the repository root), ``--config``, ``--rules`` and
``--baseline`` paths inside the repository name files of REF, and ``ruleDirs`` are
listed in REF. Paths outside the repository (a config or rules the CI job brings
along) are not the pull request's and are read from the file system. A REF that
does not name a commit is a usage error: the run fails closed.

Either way the run keeps a ``PolicyRecord`` (``scanner.config.provenance``) naming the
files used and their SHA-256, and with a commit to compare against
(``--policy-ref`` or ``--compare-policy``) a warning names the policy files whose
work-tree version differs from the commit's. Without either option no git
process starts (the pre-commit path).
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Final

from scanner.config import discovery, provenance
from scanner.config import file as configfile
from scanner.config.file import CONFIG_FILE_NAME, MAX_CONFIG_SIZE, LoadedConfig
from scanner.config.gitref import SYMLINK_MODE, Commit, Entry, blob_id, relative
from scanner.config.provenance import Comparison, PolicyChange, PolicyFile, PolicyRecord
from scanner.config.values import Config
from scanner.errors import ConfigError, RuleLoadError, UsageError
from scanner.findings import baseline
from scanner.findings.records import Level, Notification
from scanner.ruleset.load import MAX_RULE_FILE_SIZE, RuleText, rule_files

LISTED_CHANGES: Final = 20
"""Changed policy files named in the warning; the report lists them all."""


@dataclass(frozen=True, slots=True)
class Policy:
    """What a scan is judged by, ready for ``pipeline.load_ruleset``."""

    loaded: LoadedConfig
    rule_dirs: tuple[Path, ...]
    """Rule directories read from the file system (all of them without a commit)."""
    rule_texts: tuple[RuleText, ...]
    """Rule files read from the commit."""
    recorded: baseline.Recorded | None
    """The baseline's findings; ``None`` without ``--baseline``."""
    record: PolicyRecord
    notifications: tuple[Notification, ...] = ()


def resolve(
    paths: Sequence[str],
    *,
    config_file: Path | None = None,
    baseline_file: Path | None = None,
    rule_dirs: Sequence[Path] = (),
    policy_ref: str | None = None,
    compare_ref: str | None = None,
) -> Policy:
    """The policy of a scan of ``paths``: from commit ``policy_ref`` when given, else
    from the work tree (compared with ``compare_ref`` when given)."""
    if policy_ref is not None and compare_ref is not None and policy_ref != compare_ref:
        raise UsageError(
            "--policy-ref and --compare-policy name different commits",
            hint="--policy-ref compares the work tree with its own commit already",
        )
    if policy_ref is not None:
        return _from_commit(paths, policy_ref, config_file, baseline_file, rule_dirs)
    policy = from_work_tree(paths, config_file, baseline_file, rule_dirs)
    if compare_ref is None:
        return policy
    start = _start(paths)
    commit = Commit.resolve(_repository(start, "--compare-policy"), compare_ref, "--compare-policy")
    used = _work_tree_policy_paths(policy, baseline_file, commit.root)
    comparison = _compare(commit, start, config_file, used)
    record = replace(policy.record, compared=comparison)
    notifications = (*policy.notifications, *_changed(comparison, used_ref=False))
    return replace(policy, record=record, notifications=notifications)


def from_work_tree(
    paths: Sequence[str],
    config_file: Path | None,
    baseline_file: Path | None,
    rule_dirs: Sequence[Path],
) -> Policy:
    """The policy as the files on disk hold it (today's behaviour, now with digests)."""
    recorded = baseline_record = None
    root = _uri_root()
    if baseline_file is not None:
        data = baseline.read(baseline_file)
        recorded = baseline.parse(data, str(baseline_file))
        baseline_record = PolicyFile(_shown(baseline_file, root), _sha256(data), provenance.FILE)
    loaded = discovery.resolve(paths, config_file)
    directories = (*(Path(item) for item in loaded.config.rule_dirs), *rule_dirs)
    source = (
        provenance.EXPLICIT
        if config_file is not None
        else provenance.WORK_TREE
        if loaded.path is not None
        else provenance.DEFAULTS
    )
    record = PolicyRecord(
        source=source,
        path=_shown(loaded.path, root) if loaded.path is not None else "",
        sha256=loaded.sha256,
        rule_files=tuple(_digests(rule_files(_existing(directories)), root)),
        baseline=baseline_record,
    )
    return Policy(loaded, tuple(rule_dirs), (), recorded, record, unknown_keys(loaded, record.path))


def _from_commit(
    paths: Sequence[str],
    ref: str,
    config_file: Path | None,
    baseline_file: Path | None,
    rule_dirs: Sequence[Path],
) -> Policy:
    start = _start(paths)
    root = _repository(start, "--policy-ref")
    commit = Commit.resolve(root, ref)
    notes: list[Notification] = []
    recorded, baseline_record = _baseline(commit, baseline_file, notes)
    loaded, source = _config(commit, paths, start, config_file)
    from_ref: list[str] = [] if source != provenance.GIT_REF else list(loaded.config.rule_dirs)
    if source == provenance.GIT_REF:
        loaded = replace(loaded, config=replace(loaded.config, rule_dirs=()))
    file_dirs = [Path(item) for item in loaded.config.rule_dirs]
    for directory in rule_dirs:
        inside = relative(directory, root)
        if inside is None:
            file_dirs.append(directory)
        elif not _is_dir(commit, inside):
            raise UsageError(f"--rules {directory}: no such directory in {commit.label}")
        else:
            from_ref.append(inside)
    texts, ref_files = _rule_texts(commit, from_ref)
    record = PolicyRecord(
        source=source,
        path=_shown(loaded.path, root) if loaded.path is not None else "",
        sha256=loaded.sha256,
        ref=ref,
        commit=commit.sha,
        rule_files=(*ref_files, *_digests(rule_files(_existing(file_dirs)), root)),
        baseline=baseline_record,
    )
    used = _PolicyPaths(
        config=relative(loaded.path, root) if loaded.path is not None else None,
        rule_dirs=tuple(from_ref),
        baseline=relative(baseline_file, root) if baseline_file is not None else None,
    )
    comparison = _compare(commit, start, config_file, used)
    record = replace(record, compared=comparison)
    notes[:0] = _changed(comparison, used_ref=True)
    notes[:0] = unknown_keys(loaded, record.path)
    return Policy(loaded, tuple(file_dirs), texts, recorded, record, tuple(notes))


def _config(
    commit: Commit, paths: Sequence[str], start: Path, config_file: Path | None
) -> tuple[LoadedConfig, str]:
    """REF's config (discovered, or ``--config`` inside the repository) and its source."""
    if config_file is not None:
        inside = relative(config_file, commit.root)
        if inside is None:  # brought by the CI job, not part of the pull request
            return discovery.resolve(paths, config_file), provenance.EXPLICIT
        entry = commit.entries([inside]).get(inside)
        if entry is None:
            raise UsageError(
                f"--config {config_file}: not in {commit.label}", hint="check the path"
            )
        return _load_config(commit, entry), provenance.GIT_REF
    directories = _directories(paths, start, commit.root)
    found = _nearest_configs(commit, directories)
    first = found[directories[0]]
    loaded = LoadedConfig(Config()) if first is None else _load_config(commit, first)
    others = [found[directory] for directory in directories[1:]]
    named = list(dict.fromkeys(other.path if other else "" for other in others if other != first))
    if named:
        used = f"{commit.label}:{first.path}" if first else ""
        shown = [f"{commit.label}:{name}" if name else "" for name in named]
        warning = discovery.mixed_configs(used, shown)
        loaded = replace(loaded, warnings=(*loaded.warnings, warning))
    return loaded, provenance.GIT_REF if first is not None else provenance.DEFAULTS


def _load_config(commit: Commit, entry: Entry) -> LoadedConfig:
    shown = f"{commit.label}:{entry.path}"
    if not entry.is_file:
        what = "a symbolic link" if entry.mode == SYMLINK_MODE else "not a file"
        raise ConfigError(
            f"{shown}: {what}; poolgate reads regular files from a git commit",
            hint="replace it with a file, or pass --config",
        )
    if entry.size > MAX_CONFIG_SIZE:
        raise ConfigError(f"{shown}: larger than {MAX_CONFIG_SIZE // 1024} KiB")
    (data,) = commit.read([entry], MAX_CONFIG_SIZE)
    directory = posixpath.dirname(entry.path)

    def rule_dir(name: str) -> tuple[str, str]:
        joined = posixpath.normpath(posixpath.join(directory, name))
        if posixpath.isabs(name) or joined == ".." or joined.startswith("../"):
            return "", (
                "outside the repository; a config's rule directories must be inside it "
                "(give others with --rules)"
            )
        joined = "" if joined == "." else joined
        if not _is_dir(commit, joined):
            where = directory or "the repository root"
            return "", f"no such directory in {commit.label} (relative to {where})"
        return joined, ""

    return configfile.parse(data, commit.root / entry.path, shown, rule_dir)


def _directories(paths: Sequence[str], start: Path, root: Path) -> list[str]:
    """The repository-relative directory of each scanned path, the first one's first;
    paths outside the repository have no config in the commit and are left out."""
    found: list[str] = []
    for index, path in enumerate(paths or ["-"]):
        here = start if index == 0 else Path.cwd() if path == "-" else Path(path)
        directory = here if here.is_dir() else Path(os.path.abspath(here)).parent
        inside = relative(directory, root)
        if inside is None and index == 0:
            raise UsageError(
                f"--policy-ref: {path} is outside the repository {root}",
                hint="scan paths inside the repository whose commit holds the policy",
            )
        if inside is not None and inside not in found:
            found.append(inside)
    return found


def _nearest_configs(commit: Commit, directories: Sequence[str]) -> dict[str, Entry | None]:
    """For each directory, the nearest ``.poolgate.yaml`` at or above it in the commit's
    tree (one ``ls-tree`` for all): the work tree's discovery, over the commit."""
    chains = {directory: _ancestors(directory) for directory in directories}
    candidates = {posixpath.join(d, CONFIG_FILE_NAME) for c in chains.values() for d in c}
    entries = commit.entries(candidates)
    found: dict[str, Entry | None] = {}
    for directory, chain in chains.items():
        hits = (entries.get(posixpath.join(item, CONFIG_FILE_NAME)) for item in chain)
        # A directory (or submodule) named .poolgate.yaml is passed over, as in the work
        # tree; a symbolic link is taken, and refused when read.
        found[directory] = next(
            (hit for hit in hits if hit is not None and (hit.is_file or hit.mode == SYMLINK_MODE)),
            None,
        )
    return found


def _ancestors(directory: str) -> list[str]:
    """``a/b`` -> ``[a/b, a, ""]`` (``""``: the repository root)."""
    chain = [directory]
    while directory:
        directory = posixpath.dirname(directory)
        chain.append(directory)
    return chain


def _is_dir(commit: Commit, path: str) -> bool:
    if not path:
        return True
    entry = commit.entries([path]).get(path)
    return entry is not None and entry.is_dir


def _rule_texts(
    commit: Commit, directories: Sequence[str]
) -> tuple[tuple[RuleText, ...], list[PolicyFile]]:
    """The ``*.yaml`` files directly in each directory of the commit, read at once."""
    problems: list[str] = []
    wanted: list[Entry] = []
    seen: set[str] = set()
    for directory in directories:
        for entry in commit.listing(directory):
            if not _rule_name(entry.path) or entry.path in seen:
                continue
            seen.add(entry.path)
            shown = f"{commit.label}:{entry.path}"
            if not entry.is_file:
                problems.append(f"{shown}: not a regular file (links are not followed in a commit)")
            elif entry.size > MAX_RULE_FILE_SIZE:
                problems.append(f"{shown}: larger than {MAX_RULE_FILE_SIZE // 1024} KiB")
            else:
                wanted.append(entry)
    if problems:
        raise RuleLoadError(problems)
    contents = commit.read(wanted, MAX_RULE_FILE_SIZE)
    texts = tuple(
        RuleText(f"{commit.label}:{entry.path}", data)
        for entry, data in zip(wanted, contents, strict=True)
    )
    files = [
        PolicyFile(entry.path, _sha256(data), provenance.GIT_REF)
        for entry, data in zip(wanted, contents, strict=True)
    ]
    return texts, files


def _baseline(
    commit: Commit, path: Path | None, notes: list[Notification]
) -> tuple[baseline.Recorded | None, PolicyFile | None]:
    """The baseline from the commit (a path inside the repository) or the file system.

    One the commit lacks hides nothing, with a warning: a baseline the pull request
    adds is not trusted, and its findings are reported like any others."""
    if path is None:
        return None, None
    inside = relative(path, commit.root)
    if inside is None:
        data = baseline.read(path)
        return baseline.parse(data, str(path)), PolicyFile(
            str(path), _sha256(data), provenance.FILE
        )
    shown = f"{commit.label}:{inside}"
    entry = commit.entries([inside]).get(inside)
    if entry is None:
        notes.append(
            Notification(
                Level.WARNING,
                f"--baseline {inside}: not in {provenance.revision(commit.label, commit.sha)}; "
                "no finding is left out as baselined",
            )
        )
        return baseline.Recorded(), None
    if not entry.is_file:
        raise UsageError(f"--baseline {shown}: not a regular file")
    if entry.size > baseline.MAX_SIZE:
        raise UsageError(f"--baseline {shown}: larger than {baseline.MAX_SIZE // 1024**2} MiB")
    (data,) = commit.read([entry], baseline.MAX_SIZE)
    return baseline.parse(data, shown), PolicyFile(inside, _sha256(data), provenance.GIT_REF)


# --- comparing the work tree's policy files with the commit's ---------------------


@dataclass(frozen=True, slots=True)
class _PolicyPaths:
    """Repository-relative paths of the policy files a run used."""

    config: str | None
    rule_dirs: tuple[str, ...]
    baseline: str | None


def _work_tree_policy_paths(policy: Policy, baseline_file: Path | None, root: Path) -> _PolicyPaths:
    loaded = policy.loaded
    directories: list[str | Path] = [*loaded.config.rule_dirs, *policy.rule_dirs]
    inside = (relative(directory, root) for directory in directories)
    return _PolicyPaths(
        config=relative(loaded.path, root) if loaded.path is not None else None,
        rule_dirs=tuple(item for item in inside if item is not None),
        baseline=relative(baseline_file, root) if baseline_file is not None else None,
    )


def _compare(
    commit: Commit, start: Path, config_file: Path | None, used: _PolicyPaths
) -> Comparison:
    """The policy files whose work-tree version differs from the commit's: the
    config each side would use, the rule files of the directories used, the baseline."""
    root = commit.root
    paths: set[str] = set()
    if used.config is not None:
        paths.add(used.config)
    if config_file is not None:
        explicit = relative(config_file, root)
        if explicit is not None:
            paths.add(explicit)
    else:
        found, _ = discovery.nearest(start)  # the config the work tree would use
        head = relative(found, root) if found is not None else None
        if head is not None:
            paths.add(head)
        paths.update(_nearest_configs_paths(commit, start))
    if used.baseline is not None:
        paths.add(used.baseline)
    for directory in used.rule_dirs:
        if directory:  # a directory in both is equal; a link or file in its place is not
            paths.add(directory)
        paths.update(entry.path for entry in commit.listing(directory) if _rule_name(entry.path))
        paths.update(_work_tree_rule_files(root, directory))
    in_commit = commit.entries(paths)
    like = commit.sha
    changes = []
    for path in sorted(paths):
        theirs = _commit_state(in_commit.get(path))
        ours = _work_tree_state(root, path, like)
        if theirs == ours or {theirs, ours} <= {None, "dir"}:  # a new rule directory's
            continue  # files are listed, the directory itself says nothing more
        change = "added" if theirs is None else "removed" if ours is None else "changed"
        changes.append(PolicyChange(path, change))
    return Comparison(commit.ref, commit.sha, tuple(changes))


def _nearest_configs_paths(commit: Commit, start: Path) -> Iterable[str]:
    """The config the commit's tree has nearest to ``start`` (the work-tree side is
    ``discovery.nearest``)."""
    directory = start if start.is_dir() else Path(os.path.abspath(start)).parent
    inside = relative(directory, commit.root)
    if inside is None:
        return []
    entry = _nearest_configs(commit, [inside])[inside]
    return [entry.path] if entry is not None else []


def _rule_name(path: str) -> bool:
    return path.endswith(".yaml")


def _work_tree_rule_files(root: Path, directory: str) -> list[str]:
    """The rule file names in a work-tree directory: only a real directory of the
    checkout is listed (a link to elsewhere on the runner would name its files)."""
    if not _within(root, directory):
        return []
    try:
        names = os.listdir(root / directory)
    except OSError:
        return []
    return [posixpath.join(directory, name) for name in names if _rule_name(name)]


def _commit_state(entry: Entry | None) -> str | None:
    """What a path holds in the commit, comparable with ``_work_tree_state``."""
    if entry is None:
        return None
    if entry.is_dir:
        return "dir"
    kind = "file" if entry.is_file else entry.mode
    return f"{kind}:{entry.oid}"


def _work_tree_state(root: Path, path: str, like: str) -> str | None:
    """What ``path`` holds in the work tree, as ``_commit_state`` spells it: the git
    object id of a file or link, computed here (no git process). A special file, one
    larger than any policy file, or one reached through a link out of the checkout
    differs without being read."""
    if not _within(root, posixpath.dirname(path)):
        return "other"
    full = root / path
    try:
        status = full.lstat()
        if stat.S_ISLNK(status.st_mode):
            return f"120000:{blob_id(os.fsencode(os.readlink(full)), like)}"
        if stat.S_ISDIR(status.st_mode):
            return "dir"
        if not stat.S_ISREG(status.st_mode) or status.st_size > baseline.MAX_SIZE:
            return "other"
        return f"file:{blob_id(full.read_bytes(), like)}"
    except OSError:
        return None


def _within(root: Path, directory: str) -> bool:
    """Whether the work tree's ``directory`` is a directory of the checkout, reached
    without a link out of it (a missing one counts: nothing is read there)."""
    real_root = os.path.realpath(root)
    real = os.path.realpath(root / directory)
    return real == real_root or real.startswith(real_root + os.sep)


def _changed(comparison: Comparison, *, used_ref: bool) -> tuple[Notification, ...]:
    changes = comparison.changes
    if not changes:
        return ()
    listed = ", ".join(f"{item.path} ({item.change})" for item in changes[:LISTED_CHANGES])
    if len(changes) > LISTED_CHANGES:
        listed += f" and {len(changes) - LISTED_CHANGES} more"
    at = provenance.revision(comparison.ref, comparison.commit)
    used = "the commit's" if used_ref else "the work tree's"
    message = f"policy files in the work tree differ from {at}; this scan used {used}: {listed}"
    return (Notification(Level.WARNING, message),)


def unknown_keys(loaded: LoadedConfig, uri: str) -> tuple[Notification, ...]:
    """An error notification for each key of the config the schema does not know: the
    run went on without it, so it did not use the config that was meant (exit code 3
    when nothing else failed), and the hint names the key it most likely misspells."""
    return tuple(
        Notification(
            Level.ERROR,
            f"unknown key {key.path} (the run went on without it)"
            + (f"; {key.hint()}" if key.suggestion else ""),
            uri=uri,
            line=key.line,
        )
        for key in loaded.unknown
    )


# --- shared helpers ----------------------------------------------------------------


def _start(paths: Sequence[str]) -> Path:
    """Where discovery starts: the first scanned path, the working directory for ``-``."""
    return Path.cwd() if not paths or paths[0] == "-" else Path(paths[0])


def _repository(start: Path, option: str) -> Path:
    here = Path(os.path.abspath(start))
    for candidate in (here, *here.parents):
        if os.path.lexists(candidate / ".git"):
            return candidate
    raise UsageError(
        f"{option}: {start} is not inside a git repository",
        hint="run poolgate in the checkout whose commit holds the policy",
    )


def _uri_root() -> Path:
    """The directory report URIs are relative to (``pipeline.scan_paths``)."""
    from scanner.sources.files import find_repo_root

    return find_repo_root(Path.cwd())


def _shown(path: Path | str, root: Path) -> str:
    """A policy file as reports name it: repository-relative, else absolute."""
    inside = relative(path, root)
    return inside if inside is not None else Path(os.path.abspath(path)).as_posix()


def _existing(directories: Iterable[Path]) -> list[Path]:
    return [directory for directory in directories if directory.is_dir()]


def _digests(paths: Iterable[Path], root: Path) -> Iterable[PolicyFile]:
    """The SHA-256 of each regular rule file no larger than a rule file may be (the
    loader reports the others)."""
    for path in paths:
        try:
            if not path.is_file() or path.stat().st_size > MAX_RULE_FILE_SIZE:
                continue
            data = path.read_bytes()
        except OSError:
            continue
        yield PolicyFile(_shown(path, root), _sha256(data), provenance.FILE)


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
