"""Timing primitives: a child process with its own peak RSS, and the floors.

Peak memory of a child comes from ``os.wait4``: the kernel's rusage for
exactly that child (its ``ru_maxrss``), returned when it is reaped. That is
more robust than the alternatives:

* ``resource.getrusage(RUSAGE_CHILDREN)`` reports the maximum over *all*
  children ever reaped, so deltas cannot isolate one run;
* ``/usr/bin/time -v`` is GNU-only (macOS ``time`` takes ``-l`` and prints
  bytes), missing on slim images, and its output mixes with the child's stderr;
* a ``python -c`` wrapper that runs the scanner via ``runpy`` changes how the
  program starts (``sys.argv[0]``, ``__main__``, ``atexit``/``os._exit``
  paths) and adds its own imports to what is measured.

``os.wait4`` runs the real command line unchanged and works on Linux and
macOS; on platforms without it the RSS is reported as unknown.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

# ru_maxrss is KiB on Linux and bytes on macOS.
_RSS_UNIT = 1 if sys.platform == "darwin" else 1024


@dataclass(frozen=True)
class ChildRun:
    """One finished child process."""

    seconds: float
    returncode: int
    peak_rss: int | None  # bytes
    stdout: str
    stderr: str
    timed_out: bool = False

    def stderr_tail(self, lines: int = 8) -> str:
        return "\n".join(self.stderr.strip().splitlines()[-lines:])


def run_child(
    argv: list[str], *, cwd: Path, timeout: float, env: dict[str, str] | None = None
) -> ChildRun:
    """Run ``argv`` to completion; wall time from spawn to reap, and its peak RSS."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(
            argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err
        )
        killed = threading.Event()

        def kill() -> None:
            killed.set()
            proc.kill()

        timer = threading.Timer(timeout, kill)
        timer.start()
        try:
            peak: int | None = None
            if hasattr(os, "wait4"):
                _, status, usage = os.wait4(proc.pid, 0)
                proc.returncode = os.waitstatus_to_exitcode(status)
                peak = usage.ru_maxrss * _RSS_UNIT
            else:  # pragma: no cover - Windows
                proc.wait()
        finally:
            timer.cancel()
        seconds = time.perf_counter() - start
        out.seek(0)
        err.seek(0)
        return ChildRun(
            seconds=seconds,
            returncode=proc.returncode,
            peak_rss=peak,
            stdout=out.read().decode("utf-8", "replace"),
            stderr=err.read().decode("utf-8", "replace"),
            timed_out=killed.is_set(),
        )


def peak_tree_pss(
    argv: list[str],
    *,
    cwd: Path,
    timeout: float,
    env: dict[str, str] | None = None,
    interval: float = 0.05,
) -> int | None:
    """Run ``argv`` to completion and return the peak, over samples every ``interval``
    seconds, of the proportional set size summed over it and its descendants (bytes):
    what a command that forks a helper holds in all, each shared page counted once.
    None where ``/proc/PID/smaps_rollup`` is not there (not Linux). Sampling reads the
    kernel's page tables and costs CPU, so this run is never the one timed."""
    if not Path(f"/proc/{os.getpid()}/smaps_rollup").exists():
        return None
    proc = subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + timeout
    peak = 0
    try:
        while proc.poll() is None:
            if time.monotonic() > deadline:
                proc.kill()
                break
            peak = max(peak, sum(_pss(pid) for pid in _tree(proc.pid)))
            time.sleep(interval)
    finally:
        proc.wait()
    return peak or None


def _tree(pid: int) -> list[int]:
    """``pid`` and its descendants, as /proc lists them now."""
    found = [pid]
    for parent in found:  # grows while it is walked
        try:
            children = Path(f"/proc/{parent}/task/{parent}/children").read_text()
        except OSError:
            continue
        found += [int(child) for child in children.split()]
    return found


def _pss(pid: int) -> int:
    """The proportional set size of ``pid`` in bytes (0 once it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return 0
    return 0


def yaml_files(root: Path) -> list[Path]:
    """The YAML files under ``root``, in a stable order."""
    return sorted(p for p in root.rglob("*") if p.suffix in (".yaml", ".yml") and p.is_file())


def read_floor(root: Path) -> float:
    """Seconds to read every YAML file's bytes (in this process; page cache warm)."""
    files = yaml_files(root)
    start = time.perf_counter()
    total = 0
    for path in files:
        total += len(path.read_bytes())
    return time.perf_counter() - start


# Runs in a fresh interpreter with the garbage collector at its defaults.
# Files are read first; only composing is timed (reading is the read floor).
_LIBYAML_FLOOR = """
import json, sys, time
from pathlib import Path
import yaml
root = Path(sys.argv[1])
paths = sorted(p for p in root.rglob("*") if p.suffix in (".yaml", ".yml") and p.is_file())
texts = [p.read_text(encoding="utf-8") for p in paths]
start = time.perf_counter()
documents = 0
for text in texts:
    for _node in yaml.compose_all(text, Loader=yaml.CSafeLoader):
        documents += 1
print(json.dumps({"seconds": time.perf_counter() - start, "documents": documents}))
"""


@dataclass(frozen=True)
class FloorRun:
    seconds: float
    documents: int
    peak_rss: int | None


def libyaml_floor(root: Path, *, timeout: float, env: dict[str, str] | None = None) -> FloorRun:
    """``yaml.compose_all(..., Loader=CSafeLoader)`` over every document under ``root``."""
    argv = [sys.executable, "-c", _LIBYAML_FLOOR, str(root)]
    run = run_child(argv, cwd=root, timeout=timeout, env=env)
    if run.returncode != 0:
        raise RuntimeError(f"libyaml floor failed (exit {run.returncode}):\n{run.stderr_tail()}")
    result = json.loads(run.stdout.strip().splitlines()[-1])
    return FloorRun(float(result["seconds"]), int(result["documents"]), run.peak_rss)


def has_libyaml() -> bool:
    import yaml

    return bool(getattr(yaml, "__with_libyaml__", False)) and hasattr(yaml, "CSafeLoader")
