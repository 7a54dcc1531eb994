"""The end of the ``poolgate`` process (scanner/runtime/teardown.py): what the stages hand over
is held, never freed, and the process ends with its code once output is flushed."""

from __future__ import annotations

import os
import subprocess
import sys

from cli_run import ROOT

from scanner.runtime import teardown


def _python(code: str, **kwargs: object) -> subprocess.CompletedProcess[str]:
    """``code`` run by Python with standard output buffered, as a user's is (this
    machine sets PYTHONUNBUFFERED, which would hide a missing flush)."""
    environment = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    environment["PYTHONPATH"] = str(ROOT)
    return subprocess.run(
        [sys.executable, "-c", code], text=True, env=environment, timeout=60, **kwargs
    )


def test_keep_holds_nothing_unless_the_console_script_asked() -> None:
    """A library caller's objects are freed as usual: ``keep`` is a no-op for it."""
    before = teardown.kept()
    teardown.keep(object(), [1, 2])
    assert teardown.kept() == before == 0


def test_keep_holds_objects_to_the_end_once_asked() -> None:
    result = _python(
        "import gc, weakref\n"
        "from scanner.runtime import teardown\n"
        "class Big: pass\n"
        "held, dropped = Big(), Big()\n"
        "refs = weakref.ref(held), weakref.ref(dropped)\n"
        "teardown.keep_until_exit()\n"
        "teardown.keep(held)\n"
        "del held, dropped\n"
        "gc.collect()\n"
        "print(refs[0]() is not None, refs[1]() is None, teardown.kept())\n",
        capture_output=True,
    )
    assert result.stdout.split() == ["True", "True", "1"]


def test_the_end_flushes_buffered_output_and_exits_with_the_code() -> None:
    """Standard output to a pipe is block-buffered: ``os._exit`` alone would lose it."""
    result = _python(
        "import sys\n"
        "from scanner.runtime import teardown\n"
        "print('report ' * 10000)\n"
        "sys.stderr.write('note\\n')\n"
        "teardown.end(1)\n"
        "print('not reached')\n",
        capture_output=True,
    )
    assert result.returncode == 1
    assert result.stdout == "report " * 10000 + "\n"
    assert result.stderr == "note\n"


def test_the_end_keeps_its_code_when_the_reader_went_away() -> None:
    """``poolgate scan . | head``: the reader closed the pipe before the last flush.
    The code stands and nothing is said about it (Python's own exit would print an
    "Exception ignored" report and exit 120)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        result = _python(
            "import sys\nfrom scanner.runtime import teardown\nsys.stdout.write('x')\nteardown.end(4)\n",
            stdout=write_end,
            stderr=subprocess.PIPE,
        )
    finally:
        os.close(write_end)
    assert result.returncode == 4
    assert result.stderr == ""
