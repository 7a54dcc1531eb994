"""The HTML report of hostile input: nothing from the input becomes markup, a link
to anything but http(s), or a script that runs.

A pull request chooses object names, messages (through the fields rules quote), file
names and, when the policy is read from the work tree, user rule files with their
documentation. Each is written into the page; the page must show it as text. Checked
on the element tree (``reporters.htmlpage``: a string that broke out of its element
breaks the nesting) and, when Chromium is installed, in the browser: no image loads,
no script but the page's own runs, no CSP violation is even attempted.
"""

from __future__ import annotations

import dataclasses
import io
import re
from pathlib import Path

from browser_run import browser
from cli_run import poolgate
from reporters.htmlpage import ALLOWED, Element, parse

from scanner.findings.records import Finding, Level, Location, Notification, Suppression
from scanner.findings.report import Report, Scanned
from scanner.inventory import ObjectRef
from scanner.reporters import Display, html
from scanner.reporters.htmlassets import SCRIPT
from scanner.ruleset.docs import RuleDoc

BREAKOUT = "</script><img src=x onerror=alert(1)>"
HOSTILE = '</td><script>alert(1)</script>" onmouseover="x\' & \u202eevil\x1b[2J\nfake'
SHOWN = HOSTILE.replace("\u202e", "\\u202e").replace("\x1b", "\\x1b").replace("\n", "\\n")
"""``HOSTILE`` as the page shows it: markup as characters, controls as escapes."""


def _inert(page: Element) -> None:
    """No element, attribute or link the page itself did not make."""
    assert {element.tag for element in page.iter()} - {"#document"} <= ALLOWED
    [script] = page.all("script")
    assert script.text() == SCRIPT
    for element in page.iter():
        assert not any(name.startswith("on") for name in element.attrs)
        assert "src" not in element.attrs and "style" not in element.attrs
        href = element.attrs.get("href")
        assert href is None or href.startswith(("#", "https://github.com/poolgate/")), href
        if "id" in element.attrs:
            assert re.fullmatch(r"[A-Za-z0-9_-]+", element.attrs["id"])
        for name in ("class", "data-l"):  # made here, never from the input
            assert re.fullmatch(r"[A-Za-z0-9_ -]*", element.attrs.get(name, "")), element


def test_untrusted_text_is_escaped_and_cannot_disguise_itself() -> None:
    rule = RuleDoc(
        id='PG9"><script>',
        name=HOSTILE,
        level=Level.ERROR,
        summary=HOSTILE,
        description=HOSTILE + "\n\n[x](javascript:alert(1)) [y](https://e.com/\u202egnp.exe)",
        remediation=HOSTILE,
        subject="workload",
        source=HOSTILE,
        tags=(HOSTILE,),
        help_uri="javascript:alert(1)",
    )
    finding = Finding(
        rule_id=rule.id,
        level=Level.ERROR,
        message=HOSTILE,
        location=Location(f"k8s/{HOSTILE}.yaml", 4, 2, f"spec.{HOSTILE}"),
        ref=ObjectRef(HOSTILE, HOSTILE, HOSTILE, HOSTILE),
        suppression=Suppression(HOSTILE, HOSTILE),
    )
    # An http(s) URL that hides its end behind a bidi override is not a link either.
    spoofed = dataclasses.replace(rule, id="PG998", help_uri="https://example.com/\u202egnp.exe")
    report = Report(
        findings=(finding,),
        notifications=(
            Notification(Level.ERROR, HOSTILE, uri=HOSTILE, rule_id=rule.id),
            Notification(Level.NOTE, "see", rule_id="PG998"),
        ),
        rules=(rule, spoofed),
        tool_version=HOSTILE,
        repo_root="/work/repo",
        scanned=Scanned(paths=(HOSTILE,), cluster="", snapshot=HOSTILE),
    )
    stream = io.StringIO()
    html.write(report, stream, display=Display(show_suppressed=True))
    output = stream.getvalue()
    for raw in ("<script>alert", "\u202e", "\x1b", 'onmouseover="', "' &", 'javascript:alert(1)"'):
        assert raw not in output
    page = parse(output)  # nesting intact: nothing broke out of its element
    _inert(page)
    group = page.one("details", class_="obj")
    cells = [td.text() for td in group.one("tbody").one("tr").kids("td")]
    assert cells[2].startswith(SHOWN + "suppressed (" + SHOWN + "): " + SHOWN)
    assert cells[3] == f"4:2spec.{SHOWN}"
    assert group.one("summary").text().startswith(f"error {SHOWN} {SHOWN}/{SHOWN}")
    assert SHOWN in page.one("section", id="notifications").text()
    assert SHOWN in page.one("dl", class_="meta").text()
    # The rule's anchor is made safe and the finding still links to it.
    anchor = page.all("section", class_="rule")[0].attrs["id"]
    assert group.one("tbody").one("a").attrs["href"] == f"#{anchor}"
    # Markdown links to anything but plain http(s) stay text.
    docs = page.one("section", id="rules").text()
    assert "[x](javascript:alert(1))" in docs
    assert "[y](https://e.com/\\u202egnp.exe)" in docs


HOSTILE_RULE = """\
id: EVIL001
name: evil-docs
level: error
summary: "<script>alert(1)</script> **bold** <img src=x onerror=alert(2)>"
description: |
  Read [this](javascript:alert(3)) or [that](data:text/html,<script>alert(4)</script>).

  - <iframe src="https://example.com"></iframe>
  - `</code><script>alert(5)</script>`
remediation: "[fix](JaVaScRiPt:alert(6))."
helpUri: "javascript:alert(7)"
subject: object
match:
  kinds: [ConfigMap]
violations: '[{"message": "config map " + object.metadata.name + " is evil"}]'
"""

MANIFEST = f"""\
apiVersion: v1
kind: ConfigMap
metadata:
  name: '{BREAKOUT}'
  namespace: '"><svg onload=alert(8)>'
data:
  k: v
"""


def _hostile_report(tmp_path: Path) -> Path:
    """A pull request's repository: a hostile object and a user rule with hostile
    documentation, scanned with ``--format html``."""
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "rules").mkdir()
    (repo / "rules" / "EVIL001-evil-docs.yaml").write_text(HOSTILE_RULE)
    (repo / "k8s").mkdir()
    (repo / "k8s" / f"{BREAKOUT.replace('/', '_')}.yaml").write_text(MANIFEST)
    out = tmp_path / "report.html"
    result = poolgate(
        "scan", "k8s", "--rules", "rules", "--enable", "EVIL001", "--format", "html",
        "-o", str(out), cwd=repo,
    )  # fmt: skip
    assert result.returncode == 1, result.stderr
    return out


def test_a_pull_request_cannot_put_markup_or_script_on_the_page(tmp_path: Path) -> None:
    """Object names, namespaces and a user rule's documentation, through the CLI."""
    output = _hostile_report(tmp_path).read_text(encoding="utf-8")
    page = parse(output)
    _inert(page)
    for raw in ("<img", "<iframe", "<svg onload", "<script>alert", '="javascript:'):
        assert raw.lower() not in output.lower()  # as text (escaped), never as markup
    assert str(tmp_path) not in output  # no path of the machine that ran it
    group = next(g for g in page.all("details", class_="obj") if BREAKOUT in g.text())
    assert f'"><svg onload=alert(8)>/{BREAKOUT}' in group.one("summary").text()
    doc = page.one("section", id="rule-EVIL001")
    assert doc.all("strong")[0].text() == "bold"  # Markdown still works around the text
    assert "<script>alert(1)</script>" in doc.text()
    assert "Defined in rules/EVIL001-evil-docs.yaml" in doc.text()
    assert doc.all("a") == []  # no link: neither Markdown's nor helpUri


def test_the_hostile_page_runs_nothing_in_a_browser(tmp_path: Path) -> None:
    report = _hostile_report(tmp_path)
    with browser() as chromium:
        loaded = chromium.open(report)
        assert loaded.console == [] and loaded.exceptions == []
        assert chromium.csp_violations() == []  # nothing even tried to run or load
        state = chromium.evaluate(
            "[document.images.length, document.scripts.length, "
            "document.querySelectorAll('iframe, svg[onload], [onerror]').length, "
            "document.documentElement.getAttribute('data-filters')]"
        )
        assert state == [0, 1, 0, "ready"]
