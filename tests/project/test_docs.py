"""The docs a newcomer reads: a short README that links one page per topic, links
that lead somewhere, and no citation of a file outside the repository.

* README.md stays at most 300 lines and links every page of ``docs/``;
* every relative link in README.md, ``docs/*.md`` and ``benchmarks/README.md`` names
  a file of the checkout, and a ``#anchor`` into a Markdown file names one of its
  headings (GitHub's slugs);
* no doc, rule file or code comment/docstring cites a file outside the repository
  (the project's design notes, another checkout, the machine it was written on):
  a plain clone has to carry every fact its docs and comments rely on.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Iterator
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
MAX_README_LINES = 300

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")

# Citations of files that live outside the repository. Written so that this file's
# own text does not match them.
OUTSIDE_ANYWHERE = re.compile(
    r"\.\./shared\b|\bshared/[A-Z]|\b(DESIGN|RULES|STYLE)\.md\b|real[w]orld"
)
"""Wrong in any text of the checked files: code, strings, comments, docs."""
OUTSIDE_IN_PROSE = re.compile(r"/wor[k]/")
"""Wrong in docs, comments and docstrings (tests use such paths as data)."""
CHECKED_SUFFIXES = frozenset({".py", ".yaml", ".yml", ".md", ".json"})


def doc_pages() -> list[Path]:
    pages = [README, ROOT / "benchmarks" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    return [p for p in pages if p.exists()]


def _outside_fences(text: str) -> Iterator[str]:
    fenced = False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield line


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to ``-``."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text only
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


@cache
def anchors(path: Path) -> frozenset[str]:
    seen: dict[str, int] = {}
    found = set()
    for line in _outside_fences(path.read_text(encoding="utf-8")):
        match = HEADING.match(line)
        if not match:
            continue
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return frozenset(found)


def broken_links(page: Path, root: Path = ROOT) -> list[str]:
    """``file:line: target (why)`` for each relative link of ``page`` that leads nowhere."""
    problems = []
    text = page.read_text(encoding="utf-8")
    fenced = False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if fenced:
            continue
        for target in LINK.findall(re.sub(r"`[^`]*`", "", line)):
            if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
                continue
            file_part, _, anchor = target.partition("#")
            resolved = (page.parent / file_part).resolve() if file_part else page
            where = f"{page.relative_to(root)}:{number}: {target}"
            if not resolved.exists():
                problems.append(f"{where} (no such file)")
            elif not resolved.is_relative_to(root):
                problems.append(f"{where} (outside the repository)")
            elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
                problems.append(f"{where} (no heading with that anchor)")
    return problems


def _prose_of_python(path: Path) -> Iterator[tuple[int, str]]:
    """Comments and docstrings of a Python file, with their line numbers."""
    source = path.read_text(encoding="utf-8")
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string
    for node in ast.walk(ast.parse(source)):
        body = getattr(node, "body", None)
        if isinstance(body, list):
            # A string statement anywhere in a body: docstrings and attribute docs.
            for stmt in body:
                value = stmt.value if isinstance(stmt, ast.Expr) else None
                if isinstance(value, ast.Constant) and isinstance(value.value, str):
                    yield stmt.lineno, value.value


def _checked_files() -> Iterator[Path]:
    yield from doc_pages()
    for folder in ("scanner", "tests", "benchmarks", "fuzz", "rules", "deploy", "examples"):
        for path in sorted((ROOT / folder).rglob("*")):
            vendored = "data" in path.relative_to(ROOT).parts[:2]  # tests/data: upstream files
            if path.is_file() and not vendored and path.suffix in CHECKED_SUFFIXES:
                yield path
    for name in ("action.yml", "pyproject.toml", ".pre-commit-hooks.yaml", ".ci/run"):
        if (ROOT / name).exists():
            yield ROOT / name


def outside_references(path: Path, root: Path = ROOT) -> list[str]:
    text = path.read_text(encoding="utf-8")
    where = path.relative_to(root)
    found = [
        f"{where}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)}"
        for m in OUTSIDE_ANYWHERE.finditer(text)
    ]
    if not OUTSIDE_IN_PROSE.search(text):
        return found
    if path.suffix == ".py":
        prose: list[tuple[int, str]] = list(_prose_of_python(path))
    else:
        prose = [(n, line) for n, line in enumerate(text.splitlines(), 1)]
    found += [f"{where}:{n}: {m.group(0)}" for n, s in prose for m in OUTSIDE_IN_PROSE.finditer(s)]
    return found


def test_readme_is_a_front_page() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_README_LINES, f"README.md has {len(lines)} lines"


def test_readme_links_every_docs_page() -> None:
    linked = {
        (README.parent / target.partition("#")[0]).resolve()
        for target in LINK.findall(README.read_text(encoding="utf-8"))
    }
    orphans = [p.name for p in sorted((ROOT / "docs").glob("*.md")) if p.resolve() not in linked]
    assert not orphans, f"docs pages the README does not link: {orphans}"


def test_every_relative_link_resolves() -> None:
    problems = [problem for page in doc_pages() for problem in broken_links(page)]
    assert not problems, "\n".join(problems)


def test_nothing_cites_a_file_outside_the_repository() -> None:
    problems = [problem for path in _checked_files() for problem in outside_references(path)]
    assert not problems, "\n".join(problems)


def test_the_checks_catch_what_they_are_for(tmp_path: Path) -> None:
    """The checkers above find a missing file, a missing anchor, a link out of the
    repository and citations of outside files; each alone would pass an empty list."""
    root = tmp_path / "repo"
    (root / "docs").mkdir(parents=True)
    (tmp_path / "outside.md").write_text("# Outside\n")
    (root / "docs" / "a.md").write_text("# A page\n\n## Scope: what a scan can see\n")
    page = root / "docs" / "b.md"
    page.write_text(
        "See [a](a.md#scope-what-a-scan-can-see), [top](#b), [web](https://x.io/y.md).\n"
        "```\n[in a code block](nowhere.md)\n```\n"
        "# B\n"
        "[gone](missing.md) [anchor](a.md#scope) [out](../../outside.md) `[code](x.md)`\n"
    )
    problems = broken_links(page, root)
    assert [p.split(" (")[1] for p in problems] == [
        "no such file)",
        "no heading with that anchor)",
        "outside the repository)",
    ]
    assert all(p.startswith("docs/b.md:6: ") for p in problems)

    module = tmp_path / "m.py"
    module.write_text(
        '"""Budget from the design notes (' + "DESIGN" + '.md)."""\n'
        'ROOT = "/' + 'work/repo"  # data, not a citation\n'
        "# see ../" + "shared/" + "RULES" + ".md\n"
        "def f() -> None:\n"
        '    """Measured on /' + 'work/x."""\n'
    )
    found = outside_references(module, tmp_path)
    assert [f.split(": ", 1)[0] for f in found] == ["m.py:1", "m.py:3", "m.py:3", "m.py:5"]
