"""The Markdown subset rule documentation is rendered with (scanner/reporters/markdown.py)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from cli_run import ROOT

from scanner.reporters.markdown import inline, render


def test_paragraphs_join_their_lines_and_blank_lines_split_them() -> None:
    assert render("One line\nand the next.\n\n\nSecond.") == (
        "<p>One line\nand the next.</p>\n<p>Second.</p>\n"
    )


def test_inline_markup() -> None:
    assert inline("set `runtimeClassName: nvidia` **now**, *not* _later_") == (
        "set <code>runtimeClassName: nvidia</code> <strong>now</strong>, <em>not</em> "
        "<em>later</em>"
    )
    # Markup characters inside words and code stay as they are.
    assert inline("snake_case_name 2*3*4 `a*b*c`") == "snake_case_name 2*3*4 <code>a*b*c</code>"
    assert inline("** not bold **") == "** not bold **"


def test_lists_ordered_or_not_with_continuation_lines() -> None:
    source = "Checks:\n- the `pool` label\n  on every node\n- the taint\n\n1. first\n2) second"
    assert render(source) == (
        "<p>Checks:</p>\n<ul>\n<li>the <code>pool</code> label\non every node</li>\n"
        "<li>the taint</li>\n</ul>\n<ol>\n<li>first</li>\n<li>second</li>\n</ol>\n"
    )


def test_fenced_code_is_kept_verbatim_and_escaped() -> None:
    source = "Example:\n```yaml\nspec:\n  runtimeClassName: <nvidia> **x**\n```\nAfter."
    assert render(source) == (
        "<p>Example:</p>\n<pre><code>spec:\n  runtimeClassName: &lt;nvidia&gt; **x**"
        "</code></pre>\n<p>After.</p>\n"
    )
    # An unclosed fence runs to the end.
    assert render("```\na") == "<pre><code>a</code></pre>\n"


def test_links_only_to_plain_http_urls() -> None:
    assert inline("[docs](https://example.com/a_b?x=1&y=2)") == (
        '<a href="https://example.com/a_b?x=1&amp;y=2" rel="noopener noreferrer">docs</a>'
    )
    assert inline("[`PG301`](http://e.com)") == (
        '<a href="http://e.com" rel="noopener noreferrer"><code>PG301</code></a>'
    )


@pytest.mark.parametrize(
    "url",
    [
        "javascript:alert(1)",
        "JaVaScRiPt:alert(1)",
        "data:text/html;base64,PHNjcmlwdD4=",
        "vbscript:x",
        "//evil.example/x",
        "file:///etc/passwd",
        "https://e.com/\u202egnp.exe",  # hides its end behind a bidi override
        "https://e.com/a\x00b",
    ],
)
def test_any_other_link_stays_text(url: str) -> None:
    out = inline(f"[click]({url})")
    assert "<a" not in out and "href" not in out
    assert out.startswith("[click](")


def test_everything_is_escaped_first() -> None:
    hostile = '<script>alert(1)</script> <img src=x onerror="alert(2)"> & \u202e \x1b'
    out = render(hostile)
    assert out == (
        "<p>&lt;script&gt;alert(1)&lt;/script&gt; &lt;img src=x onerror=&quot;alert(2)&quot;&gt; "
        "&amp; \\u202e \\x1b</p>\n"
    )
    # A link's text and URL cannot break out of the attribute or the element either.
    out = inline('[a"><b>](https://e.com/"onmouseover="x)')
    assert out == (
        '<a href="https://e.com/&quot;onmouseover=&quot;x" rel="noopener noreferrer">'
        "a&quot;&gt;&lt;b&gt;</a>"
    )


def test_pathological_lines_cost_linear_time() -> None:
    """Every pattern looks only as far as the next delimiter of its own kind: a megabyte
    of unclosed markup renders at once (a backtracking pattern took minutes)."""
    probe = (
        "from scanner.reporters.markdown import render\n"
        "for unit in ('*a', '**a', '_a ', '[a', '[a](', '`a', '[a](http://x ', '* '):\n"
        "    render(unit * (1_000_000 // len(unit)))\n"
        "print('done')\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert result.stdout == "done\n"
