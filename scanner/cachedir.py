"""Where poolgate keeps what it learned in earlier runs (validated rules, compiled CEL).

``$POOLGATE_CACHE_DIR``, else ``$XDG_CACHE_HOME/poolgate``, else ``~/.cache/poolgate``.
Everything in it is best effort and keyed by the content it stands for: delete it at
any time.
"""

from __future__ import annotations

import os
from contextlib import suppress
from pathlib import Path


def cache_dir() -> Path:
    configured = os.environ.get("POOLGATE_CACHE_DIR")
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "poolgate"


def write_atomically(name: str, data: bytes) -> None:
    """Replace ``name`` in the cache directory with ``data`` in one step (errors ignored:
    a cache that cannot be written only costs speed)."""
    import tempfile  # only when something new is kept: most runs write nothing

    directory = cache_dir()
    with suppress(OSError):
        directory.mkdir(parents=True, exist_ok=True)
        descriptor, temporary = tempfile.mkstemp(dir=directory, prefix=f".{name}.")
        try:
            with open(descriptor, "wb") as handle:
                handle.write(data)
            os.replace(temporary, directory / name)
        except OSError:
            with suppress(OSError):
                os.unlink(temporary)
            raise
