"""Which ``.poolgate.yaml`` a scan uses: discovery from the scanned paths, or ``--config``.

Discovery walks up from the first scanned path to the repository root (the
directory holding ``.git``); outside a repository it stops at the working
directory, so a writable ancestor (``/tmp``) cannot set the policy. Scanned paths
that would each discover another file get one warning: the first path's file
applies to all of them. The file found is read by ``scanner.config.file``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from scanner.config.file import CONFIG_FILE_NAME, LoadedConfig, display_path, load
from scanner.config.values import Config
from scanner.errors import ConfigError, UsageError


def search_path(start: Path) -> tuple[list[Path], Path | None]:
    """The directories discovery looks in from ``start``, nearest first, and the one
    it stops at: the repository root (the nearest directory holding ``.git``), else
    the working directory when ``start`` is inside it. Outside both it looks nowhere
    (``[], None``): a directory no one vouches for does not set the policy."""
    here = Path(os.path.abspath(start))
    if not here.is_dir():
        here = here.parent
    chain = [here, *here.parents]
    for index, directory in enumerate(chain):
        if os.path.lexists(directory / ".git"):
            return chain[: index + 1], directory
    cwd = Path(os.path.abspath(Path.cwd()))
    if cwd in chain:
        return chain[: chain.index(cwd) + 1], cwd
    return [], None


def nearest(start: Path) -> tuple[Path | None, Path | None]:
    """(the nearest ``.poolgate.yaml`` file discovery finds from ``start``, the
    directory the walk stops at); no check of where a symbolic link points."""
    chain, boundary = search_path(start)
    for directory in chain:
        candidate = directory / CONFIG_FILE_NAME
        if candidate.is_file():
            return candidate, boundary
    return None, boundary


def discover(start: Path) -> Path | None:
    """The nearest ``.poolgate.yaml`` at or above ``start``, not above the repository root.

    The repository root is the nearest directory holding ``.git``; without one the
    walk stops at the working directory, and finds nothing when ``start`` is outside
    it (``search_path``). A config that is a symbolic link must stay inside the
    directory where the walk stops: the scanned tree may be an untrusted pull request.
    """
    found, boundary = nearest(start)
    if found is not None and boundary is not None and found.is_symlink():
        target = Path(os.path.realpath(found))
        if boundary != target.parent and boundary not in target.parents:
            raise ConfigError(
                f"{display_path(found)}: symbolic link points outside the repository",
                hint="replace it with a file or pass --config",
            )
    return found


def resolve(paths: Sequence[str], explicit: str | Path | None = None) -> LoadedConfig:
    """The configuration of a scan: ``explicit`` if given, else discovered from ``paths[0]``.

    Standard input (``-``) starts the search in the working directory. No file found
    means the built-in defaults (the full security floor).
    """
    if explicit is not None:
        path = Path(explicit)
        if not path.is_file():
            raise UsageError(f"--config {path}: no such file", hint="check the path")
        return load(path)
    start = Path.cwd() if not paths or paths[0] == "-" else Path(paths[0])
    found = discover(start)
    loaded = load(found) if found is not None else LoadedConfig(Config())
    others = _other_configs(paths[1:], found)
    if others:
        named = [display_path(other) if other else "" for other in others]
        warning = mixed_configs(display_path(found) if found is not None else "", named)
        loaded = replace(loaded, warnings=(*loaded.warnings, warning))
    if found is None and search_path(start)[1] is None:
        unused = Path(os.path.abspath(start))
        unused = (unused if unused.is_dir() else unused.parent) / CONFIG_FILE_NAME
        if unused.is_file():
            warning = (
                f"{display_path(unused)} is not used: it is outside a repository and the "
                "working directory, where discovery does not look; pass --config to use it"
            )
            loaded = replace(loaded, warnings=(*loaded.warnings, warning))
    return loaded


def mixed_configs(used: str, others: Sequence[str]) -> str:
    """The warning when scanned paths fall under configs (``""``: none) other than
    ``used`` (``""``: the built-in defaults)."""
    shown = used or "the built-in defaults"
    named = ", ".join(other or "no file" for other in others)
    return (
        f"the paths scanned fall under different configs ({named} besides {shown}): "
        f"{shown} {'applies' if used else 'apply'} to all of them; give --config, "
        "or scan each tree on its own"
    )


def _other_configs(paths: Sequence[str], found: Path | None) -> list[Path | None]:
    """The configs other than ``found`` that ``paths`` would each discover, in order
    (one discovery per directory: pre-commit passes thousands of files)."""
    others: list[Path | None] = []
    seen: dict[Path, Path | None] = {}
    for path in paths:
        start = Path.cwd() if path == "-" else Path(os.path.abspath(path))
        directory = start if start.is_dir() else start.parent
        if directory not in seen:
            seen[directory] = discover(directory)
        config = seen[directory]
        if config != found and config not in others:
            others.append(config)
    return others
