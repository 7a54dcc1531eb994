"""How a renderer runs: a private PATH and home, a short list of variables, no network.

The static checks (``kustomization.py``, ``helmcheck.py``) are the guard: they refuse
everything that would make Kustomize or Helm run a command or fetch something before
the tool starts. This module is defence in depth, for what a check might miss:

* PATH is one private directory holding a link to the tool and nothing else, so
  Kustomize finds no ``git`` to clone with (a remote base runs ``git fetch``, and
  ``?ref=--upload-pack=...`` made git run a shell command) and no plugin binaries;
* the environment is built from an allowlist (``KEPT``) plus what the caller sets:
  no ``GIT_*``, proxy, credential, cloud or kubeconfig variable reaches the tool;
* HOME, the XDG directories and TMPDIR are empty directories of this render, and
  ``KUBECONFIG`` names a file that does not exist;
* on Linux the tool runs in a fresh network namespace (``unshare --net
  --map-root-user``), which has no interface but loopback. Whether the platform
  allows one (unprivileged user namespaces may be off, or confined by AppArmor as
  on recent Ubuntu) is probed once per run; where it does not, the tool runs without
  one, silently: the static refusal is what keeps the network out.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final

from scanner.sources.rendered import RenderFailed

KEPT: Final = ("LANG", "LC_ALL", "LC_CTYPE", "LC_MESSAGES", "TZ", "SYSTEMROOT", "WINDIR")
"""Variables passed on from poolgate's environment: locale and time zone (messages and
dates), and what a Windows process needs to start. Nothing else is."""
_PRIVATE_DIRS: Final = {
    "HOME": "home",
    "XDG_CONFIG_HOME": "config",
    "XDG_CACHE_HOME": "cache",
    "XDG_DATA_HOME": "data",
    "XDG_STATE_HOME": "state",
    "TMPDIR": "tmp",
    "TMP": "tmp",
    "TEMP": "tmp",
}
_PROBE_TIMEOUT: Final = 10.0


def prepare(
    tool: str, args: Sequence[str], scratch: Path, extra_env: Mapping[str, str] | None = None
) -> tuple[list[str], dict[str, str]]:
    """The command line and environment that run ``tool args`` inside ``scratch``.

    ``tool`` is the absolute path found on the user's PATH; ``scratch`` an empty
    directory of this render, which receives ``bin/`` (the link), the home and
    temporary directories. ``extra_env`` adds the tool's own settings (plugin homes).
    ``RenderFailed`` when the directories cannot be made.
    """
    link = scratch / "bin" / Path(tool).name  # the same name: multi-call binaries read argv[0]
    env = {key: os.environ[key] for key in KEPT if key in os.environ}
    try:
        link.parent.mkdir()
        _link(tool, link)
        for variable, name in _PRIVATE_DIRS.items():
            directory = scratch / name
            directory.mkdir(exist_ok=True)
            env[variable] = str(directory)
    except OSError as error:
        raise RenderFailed(f"cannot prepare the renderer's directory: {error}") from None
    env["PATH"] = str(link.parent)
    env["KUBECONFIG"] = str(scratch / "no-kubeconfig")
    env.update(extra_env or {})
    return [*network_isolation(), str(link), *args], env


def _link(tool: str, link: Path) -> None:
    """``link`` runs ``tool``: a symbolic link, else (Windows without the privilege) a
    hard link, else a copy."""
    try:
        os.symlink(tool, link)
    except OSError:
        try:
            os.link(tool, link)
        except OSError:
            import shutil

            shutil.copy2(tool, link)


def network_isolation() -> tuple[str, ...]:
    """The command prefix that runs a program without network, or ``()`` where the
    platform does not allow it. Probed once per run (``_probe``)."""
    if not sys.platform.startswith("linux"):
        return ()
    import shutil

    unshare = shutil.which("unshare")
    return _probe(os.path.realpath(unshare)) if unshare else ()


@functools.cache
def _probe(unshare: str) -> tuple[str, ...]:
    """``unshare --net --map-root-user --`` if running a program through it works here.

    The probe runs ``unshare`` itself (``--version``) inside the new namespaces: the one
    program known to exist. Any failure (no user namespaces, a seccomp or AppArmor
    refusal, a timeout) means no prefix.
    """
    import subprocess

    prefix = (unshare, "--net", "--map-root-user", "--")
    try:
        done = subprocess.run(
            [*prefix, unshare, "--version"],
            env={},
            capture_output=True,
            timeout=_PROBE_TIMEOUT,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.SubprocessError):
        return ()
    return prefix if done.returncode == 0 else ()
