"""Text from the input, made safe for the HTML report: the one place it is escaped.

Every string from a manifest, a cluster object, a rule file or an earlier report goes
through ``text``: control characters and bidi overrides become visible escapes
exactly as in the text report, then the result is HTML-escaped, quotes included, so
it is inert in element content and in quoted attribute values alike. Class names and
anchors are made from such strings by ``anchor_part``, which keeps only letters,
digits and ``-``. A link's target is either an anchor in the page or a plain
http(s) URL (``plain_web_url``); nothing else becomes a link.
"""

from __future__ import annotations

import html
import os
import re
from collections.abc import Sequence
from pathlib import PurePosixPath
from typing import Final
from urllib.parse import urlsplit

from scanner.reporters.text import safe

_ANCHOR_UNSAFE: Final = re.compile("[^A-Za-z0-9-]")


def text(value: str) -> str:
    """Untrusted text as HTML: control characters and bidi overrides as visible escapes
    (as the text report shows them), then ``&<>"'`` as entities."""
    return html.escape(safe(value), quote=True)


def anchor_part(value: str) -> str:
    """Letters, digits and ``-`` as they are; anything else as ``_<hex>_`` (so ``_`` too:
    two different strings never share an anchor or a class name)."""
    return _ANCHOR_UNSAFE.sub(lambda match: f"_{ord(match.group()):x}_", value)


def badge(label: str, suppressed: bool = False) -> str:
    """A level badge (``error``, ``rule-error``, ...): its class made from the label by
    ``anchor_part``, its text escaped; grey when the finding is suppressed."""
    css = "suppressed" if suppressed else anchor_part(label)
    return f'<span class="level level-{css}">{text(label)}</span>'


def rule_anchor(rule_id: str) -> str:
    """The id of a rule's entry in the page."""
    return f"rule-{anchor_part(rule_id)}"


def plain_web_url(uri: str) -> bool:
    """Whether ``uri`` may be a link: http(s), with nothing the text report would escape."""
    if not uri or safe(uri) != uri or any(char.isspace() for char in uri):
        return False
    try:
        return urlsplit(uri).scheme in ("http", "https")
    except ValueError:
        return False


class LocalPaths:
    """Paths of the machine that ran poolgate, shown without it.

    A report is an artifact other people open: ``/home/alice/src/...`` or
    ``/tmp/tmpx1/...`` says nothing to them and tells them about the runner. Inside
    the repository a path is shown relative to it; under an absolute path the run was
    given (``poolgate scan /srv/manifests``) relative to that path's parent; anywhere
    else by its last ``keep`` components after ``…/``.
    """

    def __init__(self, repo_root: str, scanned: Sequence[str] = ()) -> None:
        self.root = repo_root.rstrip("/") if repo_root else ""
        self.given = sorted(
            (path.rstrip("/") for path in scanned if _absolute(path) and path != "/"),
            key=len,
            reverse=True,
        )

    def path(self, value: str, keep: int = 1) -> str:
        """``value`` if it is not an absolute local path, else shortened as above."""
        if not _absolute(value):
            return value
        if self.root and value.startswith(self.root + "/"):
            return value[len(self.root) + 1 :]
        if self.root and value == self.root:
            return "."
        for given in self.given:
            if value == given or value.startswith(given + "/"):
                parent = os.path.dirname(given)
                return value[len(parent) :].lstrip("/")
        parts = PurePosixPath(value.replace("\\", "/")).parts[1:]
        return "…/" + "/".join(parts[-keep:]) if parts else value

    def message(self, value: str) -> str:
        """A message with the repository root left out of the paths it quotes."""
        if self.root and self.root != "/":
            return value.replace(self.root + "/", "")
        return value


def _absolute(path: str) -> bool:
    return path.startswith("/") or bool(re.match(r"[A-Za-z]:[\\/]", path))
