"""The HTML report read back with the standard library's ``html.parser``.

The page is parsed into a small element tree that insists on well-formed nesting,
so a string that breaks out of its element shows up as a structural failure, not
just as a missing substring. Shared by the reporter's tests, the browser tests and
the hostile-input tests.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser

VOID = {"meta", "br", "link", "img", "input", "hr", "base"}
# Every element the page may contain; anything else came from data.
ALLOWED = {
    "html", "head", "meta", "title", "style", "script", "body", "header", "main", "nav",
    "h1", "h2", "h3", "p", "section", "article", "div", "figure", "figcaption",
    "table", "thead", "tbody", "tr", "th", "td", "ul", "ol", "li", "dl", "dt", "dd",
    "details", "summary", "a", "code", "pre", "span", "strong", "em", "br", "time",
    "fieldset", "legend", "label", "input", "select", "option", "button", "output",
    "svg", "g", "rect", "circle", "text",
}  # fmt: skip


@dataclass
class Element:
    tag: str
    attrs: dict[str, str]
    children: list[Element | str] = field(default_factory=list)

    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)

    def iter(self) -> Iterator[Element]:
        yield self
        for child in self.children:
            if isinstance(child, Element):
                yield from child.iter()

    def all(self, tag: str, **attrs: str) -> list[Element]:
        """Elements named ``tag`` whose attributes have these values (``class_`` for
        ``class``; a class matches when it is one of the element's classes)."""
        return [e for e in self.iter() if e.tag == tag and _matches(e, attrs)]

    def one(self, tag: str, **attrs: str) -> Element:
        found = self.all(tag, **attrs)
        assert len(found) == 1, (tag, attrs, len(found))
        return found[0]

    def kids(self, tag: str) -> list[Element]:
        return [c for c in self.children if isinstance(c, Element) and c.tag == tag]


def _matches(element: Element, attrs: dict[str, str]) -> bool:
    for key, value in attrs.items():
        name = key.rstrip("_")
        have = element.attrs.get(name)
        if name == "class":
            if have is None or value not in have.split():
                return False
        elif have != value:
            return False
    return True


class _TreeBuilder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Element("#document", {})
        self.stack = [self.root]
        self.doctype = ""

    def handle_decl(self, decl: str) -> None:
        self.doctype = decl

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        element = Element(tag, {k: v or "" for k, v in attrs})
        self.stack[-1].children.append(element)
        if tag not in VOID:
            self.stack.append(element)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        """``<rect .../>``: SVG's self-closing elements."""
        self.stack[-1].children.append(Element(tag, {k: v or "" for k, v in attrs}))

    def handle_endtag(self, tag: str) -> None:
        assert self.stack[-1].tag == tag, f"</{tag}> closes <{self.stack[-1].tag}>"
        self.stack.pop()

    def handle_data(self, data: str) -> None:
        self.stack[-1].children.append(data)


def parse(page: str) -> Element:
    builder = _TreeBuilder()
    builder.feed(page)
    builder.close()
    assert builder.doctype == "DOCTYPE html"
    assert builder.stack == [builder.root], "unclosed elements"
    return builder.root


def csp_hash(source: str) -> str:
    """A CSP source for an inline element's text: ``'sha256-<base64>'``."""
    digest = base64.b64encode(hashlib.sha256(source.encode("utf-8")).digest()).decode()
    return f"'sha256-{digest}'"


def groups(page: Element) -> dict[str, list[list[str]]]:
    """Findings section: group heading -> rows -> cell texts."""
    findings = page.one("section", id="findings")
    return {
        group.one("summary").text(): [
            [td.text() for td in tr.kids("td")] for tr in group.one("tbody").kids("tr")
        ]
        for group in findings.all("details", class_="obj")
    }


def tiles(page: Element) -> dict[str, int]:
    """The summary's counts: name -> number."""
    box = page.one("dl", class_="tiles")
    return {
        item.one("dt").text(): int(item.one("dd").text().replace(",", ""))
        for item in box.kids("div")
    }
