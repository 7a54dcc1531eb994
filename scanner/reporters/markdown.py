"""A small, safe Markdown subset for rule documentation in the HTML report.

Rule files (bundled, or a user's ``ruleDirs``, which a pull request may edit) write
their summary, description and remediation in Markdown: code spans for field names,
now and then a list, a fenced example or a link. This renders exactly that:

* paragraphs (blank-line separated; lines within one are joined),
* fenced code blocks (```` ``` ````, an info string is ignored),
* lists (``-``, ``*``, ``+`` or ``1.``; one level, continuation lines join the item),
* code spans, ``**strong**``, ``*emphasis*`` and ``_emphasis_``,
* links ``[text](url)`` whose URL is plain http(s); any other link stays text.

Everything is escaped first (``htmltext.text``, per line), and markup is recognised
in the escaped text, so no character of the input can open a tag or an attribute:
raw HTML in a rule file shows as text. The patterns only look ahead to the next
delimiter of their own kind, so a line costs time linear in its length. No library
does this: Markdown libraries render raw HTML unless told otherwise, and take more
code to make safe than these hundred lines.
"""

from __future__ import annotations

import html
import re
from collections.abc import Generator, Iterator
from typing import Final

from scanner.reporters.htmltext import plain_web_url, text

_FENCE: Final = re.compile(r"^\s{0,3}(```+|~~~+)")
_ITEM: Final = re.compile(r"^\s{0,3}([-*+]|\d{1,9}[.)])\s+(.*)$")
_CODE: Final = re.compile(r"`([^`]+)`")
_LINK: Final = re.compile(r"\[([^\[\]]+)\]\(([^()\s]+)\)")
_STRONG: Final = re.compile(r"\*\*(?=\S)([^*]+?)(?<=\S)\*\*")
_EM_STAR: Final = re.compile(r"(?<![*\w])\*(?=\S)([^*]+?)(?<=\S)\*(?![*\w])")
_EM_UNDERSCORE: Final = re.compile(r"(?<![\w])_(?=\S)([^_]+?)(?<=\S)_(?!\w)")
_TOKEN: Final = re.compile("\x00([0-9]+)\x00")
"""Placeholders for finished markup: NUL never survives ``text`` (it becomes ``\\x00``)."""


def render(source: str) -> str:
    """``source`` as HTML block elements (``<p>``, ``<ul>``, ``<ol>``, ``<pre>``)."""
    return "".join(_blocks(source.strip("\n").split("\n")))


def inline(line: str) -> str:
    """One line of text with its inline markup, escaped."""
    tokens: list[str] = []

    def keep(markup: str) -> str:
        tokens.append(_TOKEN.sub(lambda m: tokens[int(m[1])], markup))  # a link's code span
        return f"\x00{len(tokens) - 1}\x00"

    escaped = text(line)
    escaped = _CODE.sub(lambda m: keep(f"<code>{m[1]}</code>"), escaped)
    escaped = _LINK.sub(lambda m: keep(_link(m[1], m[2], m[0])), escaped)
    escaped = _STRONG.sub(r"<strong>\1</strong>", escaped)
    escaped = _EM_STAR.sub(r"<em>\1</em>", escaped)
    escaped = _EM_UNDERSCORE.sub(r"<em>\1</em>", escaped)
    return _TOKEN.sub(lambda m: tokens[int(m[1])], escaped)


def _link(label: str, escaped_url: str, whole: str) -> str:
    """A link when the URL is plain http(s); else the original text, still escaped.
    A backslash is never part of a URL: here it is what a control character or bidi
    override in the input was escaped to, so the URL was hiding something."""
    url = html.unescape(escaped_url)
    if "\\" in url or not plain_web_url(url):
        return whole
    return f'<a href="{escaped_url}" rel="noopener noreferrer">{label}</a>'


def _blocks(lines: list[str]) -> Iterator[str]:
    index = 0
    while index < len(lines):
        line = lines[index]
        fence = _FENCE.match(line)
        if not line.strip():
            index += 1
        elif fence:
            index = yield from _fenced(lines, index + 1, fence[1])
        elif _ITEM.match(line):
            index = yield from _list(lines, index)
        else:
            index = yield from _paragraph(lines, index)


def _fenced(lines: list[str], index: int, fence: str) -> Generator[str, None, int]:
    body: list[str] = []
    while index < len(lines) and not lines[index].strip().startswith(fence):
        body.append(text(lines[index]))
        index += 1
    yield f"<pre><code>{chr(10).join(body)}</code></pre>\n"
    return index + 1


def _list(lines: list[str], index: int) -> Generator[str, None, int]:
    first = _ITEM.match(lines[index])
    assert first is not None
    ordered = first[1][0].isdigit()
    items: list[list[str]] = []
    while index < len(lines) and lines[index].strip() and not _FENCE.match(lines[index]):
        item = _ITEM.match(lines[index])
        if item is not None:
            items.append([item[2]])
        else:
            items[-1].append(lines[index].strip())
        index += 1
    tag = "ol" if ordered else "ul"
    body = "".join(f"<li>{_joined(item)}</li>\n" for item in items)
    yield f"<{tag}>\n{body}</{tag}>\n"
    return index


def _paragraph(lines: list[str], index: int) -> Generator[str, None, int]:
    body: list[str] = []
    while index < len(lines) and lines[index].strip():
        if body and (_FENCE.match(lines[index]) or _ITEM.match(lines[index])):
            break
        body.append(lines[index].strip())
        index += 1
    yield f"<p>{_joined(body)}</p>\n"
    return index


def _joined(lines: list[str]) -> str:
    """Lines of one paragraph or item: each rendered, joined by a newline (whitespace)."""
    return "\n".join(inline(line) for line in lines)
