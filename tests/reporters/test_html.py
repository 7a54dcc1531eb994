"""The HTML report, read back with the standard library's ``html.parser``.

The page is parsed into a small element tree that insists on well-formed nesting,
so a string that breaks out of its element shows up as a structural failure, not
just as a missing substring.
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

from cli_run import ROOT, poolgate

from scanner.findings import drift
from scanner.findings.records import Finding, Level, Location, Notification, Suppression
from scanner.findings.report import Report, RunStats
from scanner.inventory import ObjectRef
from scanner.reporters import FORMATS, Display
from scanner.reporters import drift as drift_report
from scanner.reporters.json import to_document
from scanner.ruleset.docs import RuleDoc

from .conftest import POLICY

Render = Callable[..., str]
SHOWN = Display(show_suppressed=True)

VOID = {"meta", "br", "link", "img", "input", "hr", "base"}
# Every element the page may contain; anything else came from data.
ALLOWED = {
    "html", "head", "meta", "title", "style", "body", "header", "h1", "h2", "h3", "p",
    "section", "table", "thead", "tbody", "tr", "th", "td", "ul", "li", "nav", "a",
    "code", "span", "strong", "br",
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
        return [
            e
            for e in self.iter()
            if e.tag == tag and all(e.attrs.get(k.rstrip("_")) == v for k, v in attrs.items())
        ]

    def one(self, tag: str, **attrs: str) -> Element:
        found = self.all(tag, **attrs)
        assert len(found) == 1, (tag, attrs, len(found))
        return found[0]

    def kids(self, tag: str) -> list[Element]:
        return [c for c in self.children if isinstance(c, Element) and c.tag == tag]


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


def groups(page: Element) -> dict[str, list[list[str]]]:
    """Findings section: file/URI -> rows -> cell texts."""
    findings = page.one("section", id="findings")
    return {
        section.one("h3").text(): [
            [td.text() for td in tr.kids("td")] for tr in section.one("tbody").kids("tr")
        ]
        for section in findings.all("section", class_="file")
    }


def summary(page: Element) -> dict[str, int]:
    table = page.one("table", class_="counts")
    return {tr.one("th").text(): int(tr.kids("td")[0].text()) for tr in table.all("tr")}


def test_page_is_self_contained_and_well_formed(report: Report, render: Render) -> None:
    page = parse(render(report, "html"))
    tags = {element.tag for element in page.iter()} - {"#document"}
    assert tags <= ALLOWED
    assert len(page.all("style")) == 1
    for element in page.iter():
        # Nothing loads: no src, no external href, no inline handlers.
        assert "src" not in element.attrs
        assert not any(name.startswith("on") for name in element.attrs)
    csp = page.one("meta", **{"http-equiv": "Content-Security-Policy"}).attrs["content"]
    assert "default-src 'none'" in csp
    assert page.one("meta", charset="utf-8")
    assert "poolgate 0.1.0" in page.one("header").text()
    body = page.one("body")
    assert [s.attrs["id"] for s in body.kids("section")] == [
        "summary",
        "notifications",
        "findings",
        "rules",
    ]


def test_findings_are_grouped_by_uri_with_every_column(report: Report, render: Render) -> None:
    page = parse(render(report, "html"))
    assert groups(page) == {
        "bad dir/broken#1.yaml": [
            ["PG001", "error", "mapping values are not allowed here", "3:14", "none"]
        ],
        "cluster://prod@eks/v1/Node/gpu-node-1": [
            ["PG401", "note", "node has no pool label", "metadata.labels", "Node gpu-node-1v1"]
        ],
        "k8s/train.yaml": [
            [
                "PG103",
                "rule-error",
                "no such key: runtimeClassName",
                "5:3spec.template.spec",
                "Deployment ml/trainapps/v1",
            ],
            [
                "PG301",
                "error",
                'container "cuda" runs privileged',
                "12:9spec.template.spec.containers[0].securityContext",
                "Deployment ml/trainapps/v1",
            ],
        ],
    }
    # The file index links to each group.
    nav = page.one("nav")
    targets = [a.attrs["href"] for a in nav.all("a")]
    assert [t[1:] for t in targets] == [s.attrs["id"] for s in page.all("section", class_="file")]


def test_rule_ids_link_to_the_rules_documentation(report: Report, render: Render) -> None:
    page = parse(render(report, "html"))
    ids = {element.attrs["id"] for element in page.iter() if "id" in element.attrs}
    links = [a for a in page.all("a") if a.attrs["href"].startswith("#")]
    assert links and all(a.attrs["href"][1:] in ids for a in links)
    pg301 = page.one("section", id="rule-PG301")
    assert pg301.one("h3").text() == "PG301 privileged-outside-operator"
    text = pg301.text()
    assert "Only the GPU Operator namespace may run privileged containers." in text
    assert "Remediation: Drop privileged: true." in text
    assert "security severity 8" in text
    row = next(tr for tr in page.one("section", id="findings").all("tr") if "PG301" in tr.text())
    assert row.one("a").attrs["href"] == "#rule-PG301"
    # PG001 is not a rule of the run: its id is shown, not linked to nothing.
    broken = next(tr for tr in page.one("section", id="findings").all("tr") if "PG001" in tr.text())
    assert broken.all("a") == []


def test_summary_counts_levels_outcomes_and_scope(
    make_report: Callable[..., Report], render: Render
) -> None:
    stats = RunStats(files=4, objects=12, skipped_documents=2, subjects=10, baselined=5)
    page = parse(render(make_report(stats=stats), "html"))
    assert summary(page) == {
        "Errors": 2,
        "Warnings": 0,
        "Notes": 1,
        "Rule errors": 1,
        "Suppressed": 1,
        "Baselined": 5,
        "Notifications": 2,
        "Files scanned": 4,
        "Objects scanned": 12,
        "Non-Kubernetes documents skipped": 2,
    }
    text = page.one("section", id="summary").text()
    assert "3 findings (2 errors, 1 note) in 4 files, 12 objects" in text
    assert "5 findings in the baseline hidden" in text
    assert "Results incomplete: 1 rule error." in text


def test_summary_names_the_config_the_run_used(
    make_report: Callable[..., Report], render: Render
) -> None:
    page = parse(render(make_report(policy=POLICY), "html"))
    text = page.one("section", id="summary").text()
    assert f"config: .poolgate.yaml from origin/main (commit {'c' * 12}), sha256 {'a' * 64}" in text


def test_suppressed_findings_hidden_unless_asked(
    make_report: Callable[..., Report], render: Render
) -> None:
    hidden = parse(render(make_report(), "html"))
    assert "PG204" not in [row[0] for row in groups(hidden)["k8s/train.yaml"]]
    assert "1 suppressed finding not listed" in hidden.one("section", id="findings").text()
    assert "pool is untainted during migration" not in hidden.text()

    shown = parse(render(make_report(), "html", SHOWN))
    row = shown.one("tr", class_="suppressed")
    cells = [td.text() for td in row.kids("td")]
    assert cells[0] == "PG204"
    assert cells[2] == (
        "no toleration for taint nvidia.com/gpu"
        "suppressed (in-source): pool is untainted during migration"
    )
    assert cells[3] == "20:7spec.template.spec.tolerations"
    assert "not listed" not in shown.one("section", id="findings").text()


def test_notifications_say_what_could_not_be_read(
    make_report: Callable[..., Report], render: Render
) -> None:
    notes = (
        Notification(
            Level.ERROR,
            "cannot list Pods (namespace ml): 403: forbidden; rules that did not run: PG301",
        ),
        Notification(
            Level.WARNING, "cannot read: permission denied", uri="k8s/secret.yaml", line=3
        ),
        Notification(Level.NOTE, "rule disabled by config", rule_id="PG204"),
    )
    page = parse(render(make_report(findings=(), notifications=notes), "html"))
    section = page.one("section", id="notifications")
    assert section.one("h2").text() == "Notifications (3)"
    items = [li.text() for li in section.all("li")]
    assert items == [
        "error cannot list Pods (namespace ml): 403: forbidden; rules that did not run: PG301",
        "warning k8s/secret.yaml:3 cannot read: permission denied",
        "note rule disabled by config (PG204)",
    ]
    assert section.all("li")[2].one("a").attrs["href"] == "#rule-PG204"
    # An error notification makes the run incomplete even with no finding at all.
    banner = page.one("p", class_="banner").text()
    assert banner.startswith("Results incomplete: 1 error notification.")


def test_empty_report(make_report: Callable[..., Report], render: Render) -> None:
    report = make_report(findings=(), notifications=(), rules=(), stats=RunStats())
    page = parse(render(report, "html"))
    assert page.one("section", id="findings").text().strip().endswith("No findings.")
    assert "None: every input was read" in page.one("section", id="notifications").text()
    assert page.all("p", class_="banner") == []
    assert page.all("section", class_="file") == []
    assert page.one("section", id="rules").one("h2").text() == "Rules in this run (0)"
    assert set(summary(page).values()) == {0}


HOSTILE = '</td><script>alert(1)</script>" onmouseover="x\' & \u202eevil\x1b[2J\nfake'


def test_untrusted_text_is_escaped_and_cannot_disguise_itself(
    make_report: Callable[..., Report], render: Render
) -> None:
    rule = RuleDoc(
        id='PG9"><script>',
        name=HOSTILE,
        level=Level.ERROR,
        summary=HOSTILE,
        description=HOSTILE,
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
    report = make_report(
        findings=(finding,),
        notifications=(Notification(Level.ERROR, HOSTILE, uri=HOSTILE, rule_id=rule.id),),
        rules=(rule, spoofed),
        tool_version=HOSTILE,
    )
    output = render(report, "html", SHOWN)
    for raw in ("<script", "\u202e", "\x1b", 'onmouseover="', "' &"):
        assert raw not in output
    page = parse(output)  # nesting intact: nothing broke out of its element
    assert {element.tag for element in page.iter()} - {"#document"} <= ALLOWED
    for element in page.iter():
        assert not any(name.startswith("on") for name in element.attrs)
        href = element.attrs.get("href")
        assert href is None or href.startswith("#")  # javascript: is never a link
        if "id" in element.attrs:
            assert re.fullmatch(r"[A-Za-z0-9_-]+", element.attrs["id"])
    # The text is shown, not dropped: markup as characters, controls as escapes.
    shown = HOSTILE.replace("\u202e", "\\u202e").replace("\x1b", "\\x1b").replace("\n", "\\n")
    row = page.one("section", id="findings").all("tr")[1]
    cells = [td.text() for td in row.kids("td")]
    assert cells[2].startswith(shown + "suppressed (" + shown + "): " + shown)
    assert cells[3] == f"4:2spec.{shown}"
    assert cells[4].startswith(f"{shown} {shown}/{shown}")
    assert page.one("section", class_="file").one("h3").text() == f"k8s/{shown}.yaml"
    assert shown in page.one("section", id="notifications").text()
    # The rule's anchor is made safe and the finding still links to it.
    anchor = page.all("section", class_="rule")[0].attrs["id"]
    assert row.one("a").attrs["href"] == f"#{anchor}"


def test_output_is_deterministic(make_report: Callable[..., Report], render: Render) -> None:
    first = render(make_report(), "html", SHOWN)
    assert render(make_report(), "html", SHOWN) == first
    # A report rebuilt from equal (not identical) records renders the same bytes.
    copies = [dataclasses.replace(f) for f in make_report().findings]
    assert render(make_report(findings=copies), "html", SHOWN) == first
    # Nothing of the moment of rendering: no date, no time of day.
    assert not re.search(r"\d{4}-\d\d-\d\d|\d\d:\d\d:\d\d", first)


def test_compare_adds_what_changed_since_the_last_audit(tmp_path: Path) -> None:
    def finding(name: str, rule: str, message: str = "m") -> Finding:
        ref = ObjectRef("v1", "Pod", "ml", name)
        location = Location(f"cluster://prod/ml/Pod/{name}", 1, 1, "spec")
        return Finding(rule, Level.ERROR, message, location, ref, "cluster")

    def report(*findings: Finding) -> Report:
        return Report(
            findings=findings, notifications=(), rules=(), tool_version="0", repo_root="."
        )

    last = tmp_path / "last.json"
    last.write_text(
        json.dumps(to_document(report(finding("a", "PG603"), finding("gone", "PG301", HOSTILE))))
    )
    now = report(finding("a", "PG603"), finding("fresh", "PG501"))
    changes = drift.compare(
        now, drift.load_previous(str(last)), "last.json", drift.checker({"PG603", "PG301"}, ())
    )
    out = io.StringIO()
    drift_report.wrap("html", lambda r, s: None, changes)(now, out)
    assert "<script" not in out.getvalue()
    page = parse(out.getvalue())
    section = page.one("section", id="drift")
    assert "Compared with last.json: 1 new, 1 unchanged, 1 resolved, 0 unverified." in (
        section.text()
    )
    rows = [[td.text() for td in tr.kids("td")] for tr in section.all("tr")][1:]
    shown = HOSTILE.replace("\u202e", "\\u202e").replace("\x1b", "\\x1b").replace("\n", "\\n")
    assert rows == [
        ["new", "PG501", "error", "cluster://prod/ml/Pod/fresh", "m"],
        ["resolved", "PG301", "error", "cluster://prod/ml/Pod/gone", shown],
    ]
    # Each listed finding carries its state.
    states = {row[0]: row[1] for rows in groups(page).values() for row in rows}
    assert states == {"PG501": "error new", "PG603": "error unchanged"}


def test_html_is_registered_and_imported_only_when_asked() -> None:
    assert "html" in FORMATS
    probe = (
        "import sys, scanner.cli, scanner.reporters as r\n"
        "before = 'scanner.reporters.html' in sys.modules\n"
        "r.writer_for('html')\n"
        "print(before, 'scanner.reporters.html' in sys.modules)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        check=True,
    )
    assert result.stdout.split() == ["False", "True"]


def _expected_demo_findings() -> list[tuple[str, int, str]]:
    """(uri, line, rule id) of every line of fixtures/demo/EXPECTED.md's list."""
    text = (ROOT / "fixtures" / "demo" / "EXPECTED.md").read_text()
    block = text.split("```")[1]
    found = [
        (f"fixtures/demo/{m[1]}", int(m[2]), m[3])
        for m in re.finditer(r"^(\S+):(\d+) (PG\d+) ", block, re.MULTILINE)
    ]
    assert len(found) == 10
    return found


def test_scan_demo_writes_the_html_report(tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    result = poolgate("scan", "fixtures/demo", "--format", "html", "-o", str(out))
    assert result.returncode == 1, result.stderr
    assert result.stdout == ""
    page = parse(out.read_text(encoding="utf-8"))
    listed = {
        (uri, int(row[3].split(":")[0]), row[0])
        for uri, rows in groups(page).items()
        for row in rows
    }
    for expected in _expected_demo_findings():
        assert expected in listed
    # Same input, another process with another hash seed: the same bytes.
    again = tmp_path / "again.html"
    poolgate(
        "scan", "fixtures/demo", "--format", "html", "-o", str(again),
        env={"PYTHONHASHSEED": "12345"},
    )  # fmt: skip
    assert again.read_bytes() == out.read_bytes()
