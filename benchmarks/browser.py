"""Headless Chromium through the DevTools protocol on a pipe, for the HTML report.

The benchmarks time how long a large report takes to load, and the test suite opens
reports in a real browser (tests/reporters/test_html_browser.py); both need the same
few things: load a local file, read what the page did (console messages, uncaught
exceptions, Content-Security-Policy violations), evaluate an expression, take a
screenshot. Chromium speaks its DevTools protocol over two file descriptors with
``--remote-debugging-pipe`` (3 to read, 4 to write; messages are JSON ending in a NUL
byte), so no port, no WebSocket library and no Selenium or Playwright are needed.

Chromium starts headless, with its own throw-away profile, no sandbox (the tests run
as root in CI containers), no GPU, and no background networking, component updates,
sync or first-run work, so it makes no request of its own.
"""

from __future__ import annotations

import base64
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
    "--no-first-run",
    "--no-default-browser-check",
    "--mute-audio",
    "--remote-debugging-pipe",
)
WATCH = """
window.__poolgateCsp = [];
document.addEventListener("securitypolicyviolation", function (event) {
  window.__poolgateCsp.push(event.violatedDirective + " " + event.blockedURI);
});
"""
"""Runs before the page's own script (Page.addScriptToEvaluateOnNewDocument, which the
page's CSP does not govern): records every CSP violation the page causes."""


def find_chromium() -> str | None:
    """``POOLGATE_CHROMIUM``, else the first Chromium or Chrome on ``PATH``."""
    chosen = os.environ.get("POOLGATE_CHROMIUM")
    if chosen:
        return chosen if os.path.exists(chosen) else shutil.which(chosen)
    for name in CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    return None


class BrowserError(RuntimeError):
    """Chromium exited, timed out or answered a command with an error."""


@dataclass
class Loaded:
    """What a page did while it loaded."""

    console: list[str] = field(default_factory=list)
    """Console messages and log entries of level warning or error, as ``level: text``."""
    exceptions: list[str] = field(default_factory=list)
    """Uncaught script exceptions."""
    seconds: float = 0.0
    """From the navigation command to the page's load event, as seen from here."""


class Browser:
    """One headless Chromium with one tab. Use as a context manager."""

    def __init__(self, executable: str, *, timeout: float = 60.0, width: int = 1400) -> None:
        self.timeout = timeout
        self.width = width
        self._profile = tempfile.mkdtemp(prefix="poolgate-chromium-")
        to_child, self._write = os.pipe()
        self._read, from_child = os.pipe()

        def wire() -> None:  # in the child: the pipe ends on descriptors 3 and 4
            # Through copies: one end may already be 3 or 4, and dup2 onto itself would
            # keep its close-on-exec flag.
            inbound, outbound = os.dup(to_child), os.dup(from_child)
            os.dup2(inbound, 3)
            os.dup2(outbound, 4)

        self._process = subprocess.Popen(
            [executable, *FLAGS, f"--user-data-dir={self._profile}", "about:blank"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=wire,  # only dup2 before exec: safe, the tests start no threads
            # Python's descriptors are not inherited (PEP 446), and closing the others
            # would run after ``wire`` and close 3 and 4 too.
            close_fds=False,
        )
        os.close(to_child)
        os.close(from_child)
        self._buffer = b""
        self._next = 0
        self._events: list[dict[str, Any]] = []
        self._session = ""
        try:
            target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
            attached = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})
            self._session = attached["sessionId"]
            for domain in ("Page", "Runtime", "Log"):
                self.call(f"{domain}.enable")
            self.call("Page.addScriptToEvaluateOnNewDocument", {"source": WATCH})
            self.call(
                "Emulation.setDeviceMetricsOverride",
                {"width": width, "height": 900, "deviceScaleFactor": 1, "mobile": False},
            )
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        if self._process.poll() is None:
            try:
                self._send("Browser.close", {}, session=False)
                self._process.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired, BrowserError):
                self._process.kill()
                self._process.wait()
        for fd in (self._read, self._write):
            with suppress(OSError):
                os.close(fd)
        shutil.rmtree(self._profile, ignore_errors=True)

    # -- the protocol ----------------------------------------------------------------

    def _send(self, method: str, params: dict[str, Any], session: bool = True) -> int:
        self._next += 1
        message: dict[str, Any] = {"id": self._next, "method": method, "params": params}
        if session and self._session:
            message["sessionId"] = self._session
        data = json.dumps(message).encode() + b"\0"
        try:
            while data:
                data = data[os.write(self._write, data) :]
        except BrokenPipeError:
            raise BrowserError("Chromium exited") from None
        return self._next

    def _receive(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._read], [], [], left)[0]:
                raise BrowserError(f"no answer from Chromium in {self.timeout:g} s")
            chunk = os.read(self._read, 1 << 20)
            if not chunk:
                raise BrowserError("Chromium exited")
            self._buffer += chunk
        message, _, self._buffer = self._buffer.partition(b"\0")
        parsed: dict[str, Any] = json.loads(message)
        return parsed

    def call(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """Send a command and wait for its result; events that arrive meanwhile are kept."""
        ident = self._send(method, params or {})
        deadline = time.monotonic() + self.timeout
        while True:
            message = self._receive(deadline)
            if message.get("id") == ident:
                if "error" in message:
                    raise BrowserError(f"{method}: {message['error']}")
                result: dict[str, Any] = message.get("result", {})
                return result
            if "method" in message:
                self._events.append(message)

    def _wait_for(self, event: str) -> None:
        deadline = time.monotonic() + self.timeout
        while not any(e.get("method") == event for e in self._events):
            message = self._receive(deadline)
            if "method" in message:
                self._events.append(message)

    # -- what the tests and benchmarks use -----------------------------------------------

    def open(self, path: Path) -> Loaded:
        """Load a local file and wait for its load event."""
        self._events.clear()
        started = time.perf_counter()
        self.call("Page.navigate", {"url": path.resolve().as_uri()})
        self._wait_for("Page.loadEventFired")
        seconds = time.perf_counter() - started
        self.evaluate("0")  # a round trip: messages logged during the load have arrived
        return Loaded(*self._messages(), seconds=seconds)

    def _messages(self) -> tuple[list[str], list[str]]:
        console, exceptions = [], []
        for event in self._events:
            params = event.get("params", {})
            if event.get("method") == "Runtime.consoleAPICalled":
                if params.get("type") in ("error", "warning", "assert"):
                    words = [
                        str(arg.get("value", arg.get("description", "")))
                        for arg in params.get("args", [])
                    ]
                    console.append(f"{params['type']}: {' '.join(words)}")
            elif event.get("method") == "Log.entryAdded":
                entry = params.get("entry", {})
                if entry.get("level") in ("error", "warning"):
                    console.append(f"{entry['level']}: {entry.get('text', '')}")
            elif event.get("method") == "Runtime.exceptionThrown":
                details = params.get("exceptionDetails", {})
                description = details.get("exception", {}).get("description")
                exceptions.append(str(description or details.get("text", "")))
        return console, exceptions

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (JSON-serialisable)."""
        result = self.call(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
        )
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression}: {result['exceptionDetails']}")
        return result.get("result", {}).get("value")

    def csp_violations(self) -> list[str]:
        return list(self.evaluate("window.__poolgateCsp || []"))

    def screenshot(self, path: Path, max_height: int = 4000) -> None:
        """A PNG of the page from its top, as wide as the window, at most ``max_height``."""
        height = int(self.evaluate("document.documentElement.scrollHeight"))
        clip = {"x": 0, "y": 0, "width": self.width, "height": min(height, max_height), "scale": 1}
        shot = self.call(
            "Page.captureScreenshot",
            {"format": "png", "clip": clip, "captureBeyondViewport": True},
        )
        path.write_bytes(base64.b64decode(shot["data"]))


@contextmanager
def chromium(executable: str | None = None, **options: Any) -> Iterator[Browser]:
    """A ``Browser`` on ``executable`` (default: ``find_chromium``)."""
    found = executable or find_chromium()
    if found is None:
        raise BrowserError("no Chromium found (install the chromium package)")
    browser = Browser(found, **options)
    try:
        yield browser
    finally:
        browser.close()
