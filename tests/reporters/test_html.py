"""The HTML report, read back as an element tree (``htmlpage``).

Hostile input is tested in tests/e2e/security/test_html_report.py, the page in a real
browser in test_html_browser.py.
"""

from __future__ import annotations

import dataclasses
import datetime
import io
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from cli_run import ROOT, poolgate

from scanner.findings import drift
from scanner.findings.records import Finding, Level, Location, Notification
from scanner.findings.report import Report, RunStats, Scanned
from scanner.inventory import ObjectRef
from scanner.reporters import FORMATS, Display
from scanner.reporters import drift as drift_report
from scanner.reporters.html import OPEN_ROWS, TOP_BARS
from scanner.reporters.htmlassets import SCRIPT, STYLE
from scanner.reporters.json import to_document
from scanner.ruleset.docs import RuleDoc

from .conftest import FLEET, POLICY, RULES
from .htmlpage import ALLOWED, Element, csp_hash, groups, parse, tiles

Render = Callable[..., str]
SHOWN = Display(show_suppressed=True)
NIGHT = datetime.datetime(2026, 11, 30, 2, 17, 5, tzinfo=datetime.UTC)


def test_page_is_self_contained_and_well_formed(report: Report, render: Render) -> None:
    page = parse(render(report, "html"))
    tags = {element.tag for element in page.iter()} - {"#document"}
    assert tags <= ALLOWED
    for element in page.iter():
        # Nothing loads: no src, no external href, no inline handlers, no style attribute.
        assert "src" not in element.attrs
        assert "style" not in element.attrs
        assert not any(name.startswith("on") for name in element.attrs)
        assert element.attrs.get("href", "#").startswith(("#", "https://github.com/poolgate/"))
    # One style sheet and one script, each admitted by its hash and nothing else.
    [style], [script] = page.all("style"), page.all("script")
    assert style.text() == STYLE and script.text() == SCRIPT
    csp = page.one("meta", **{"http-equiv": "Content-Security-Policy"}).attrs["content"]
    directives = dict(part.strip().split(" ", 1) for part in csp.split(";"))
    assert directives == {
        "default-src": "'none'",
        "style-src": csp_hash(STYLE),
        "script-src": csp_hash(SCRIPT),
        "base-uri": "'none'",
        "form-action": "'none'",
    }
    assert page.one("meta", charset="utf-8")
    assert "poolgate0.1.0" in page.one("header").text()
    main = page.one("main")
    assert [s.attrs["id"] for s in main.kids("section")] == [
        "summary",
        "fleet",
        "notifications",
        "findings",
        "rules",
    ]
    toc = [a.attrs["href"] for a in page.one("nav").all("a")]
    assert toc == ["#summary", "#fleet", "#notifications", "#findings", "#rules"]


def _meta(page: Element) -> dict[str, str]:
    meta = page.one("dl", class_="meta")
    return {item.one("dt").text(): item.one("dd").text() for item in meta.kids("div")}


def test_header_says_when_what_and_under_which_config(
    make_report: Callable[..., Report], render: Render
) -> None:
    scanned = Scanned(paths=("k8s", "charts/gpu"), context_paths=("snapshots/prod.json",))
    report = make_report(policy=POLICY, scanned=scanned, generated_at=NIGHT)
    page = parse(render(report, "html"))
    assert _meta(page) == {
        "Generated": "2026-11-30 02:17 UTC",
        "Scanned": "k8s, charts/gpu",
        "Context (not reported on)": "snapshots/prod.json",
        "Config": f".poolgate.yaml from origin/main (commit {'c' * 12}), sha256 {'a' * 64}; "
        f"1 rule file; baseline poolgate-baseline.json, sha256 {'d' * 64}; 1 policy file "
        f"differs from origin/main (commit {'c' * 12}) in the work tree",
        "Rules": "4 rules in this run, 3 with findings",  # PG204's is suppressed
        "poolgate": "0.1.0",
    }
    assert page.one("time").attrs["datetime"] == "2026-11-30T02:17:05Z"
    verdict = page.one("p", class_="verdict").text()
    assert verdict.startswith("3 findings (2 errors, 1 note) in 4 files, 12 objects")


def test_an_audit_names_the_cluster_and_when_it_was_read(
    make_report: Callable[..., Report], render: Render
) -> None:
    read = NIGHT - datetime.timedelta(minutes=3)
    scanned = Scanned(cluster="gpu-prod", read_at=read, snapshot="/var/lib/audit/prod.json")
    page = parse(render(make_report(scanned=scanned, generated_at=NIGHT), "html"))
    meta = _meta(page)
    assert meta["Cluster"] == (
        "context gpu-prod, read 2026-11-30 02:14 UTC, from snapshot prod.json"
    )
    assert meta["Config"] == "not recorded"
    assert "Scanned" not in meta


def test_without_a_time_the_page_has_none(report: Report, render: Render) -> None:
    """Library callers that set no ``generated_at`` get the same bytes every time."""
    first = render(report, "html")
    assert not re.search(r"\d{4}-\d\d-\d\d|\d\d:\d\d:\d\d", first)
    assert parse(first).all("time") == []


def test_summary_counts_levels_outcomes_and_scope(
    make_report: Callable[..., Report], render: Render
) -> None:
    stats = RunStats(files=4, objects=12, skipped_documents=2, subjects=10, baselined=5)
    page = parse(render(make_report(stats=stats), "html"))
    assert tiles(page) == {
        "Errors": 2,
        "Warnings": 0,
        "Notes": 1,
        "Rule errors": 1,
        "Suppressed": 1,
        "Baselined": 5,
        "Notifications": 2,
        "Objects scanned": 12,
        "Files scanned": 4,
        "Non-Kubernetes documents skipped": 2,
    }
    text = page.one("header").text()
    assert "3 findings (2 errors, 1 note) in 4 files, 12 objects" in text
    assert "5 findings in the baseline hidden" in text
    banner = page.one("p", class_="banner").text()
    assert banner.startswith("Results incomplete: 1 rule error.")


def test_charts_count_findings_by_level_rule_namespace_and_trust_domain(
    make_report: Callable[..., Report], render: Render
) -> None:
    page = parse(render(make_report(fleet=FLEET), "html"))
    figures = page.one("section", id="summary").all("figure", class_="chart")
    assert [f.attrs["id"] for f in figures] == [
        "chart-level",
        "chart-rule",
        "chart-namespace",
        "chart-team",
    ]
    level = figures[0]
    assert level.one("svg").attrs["role"] == "img"
    assert level.one("text", class_="big").text() == "4"  # 2 errors, 1 note, 1 rule error
    assert [li.text() for li in level.all("li")] == [
        "2 error",
        "0 warning",
        "1 note",
        "1 rule-error",
    ]
    # The ring's segments, error first, share the circle in proportion.
    rings = level.all("circle")
    assert [c.attrs["class"] for c in rings] == ["s-track", "s-error", "s-note", "s-rule-error"]
    assert [c.attrs["stroke-dasharray"].split()[0] for c in rings[1:]] == [
        "50.000",
        "25.000",
        "25.000",
    ]

    def bars(figure: Element) -> dict[str, tuple[str, ...]]:
        return {
            g.all("text")[0].text(): tuple(r.attrs["class"] for r in g.all("rect")[1:])
            for g in figure.all("g")
        }

    assert bars(figures[1]) == {
        "PG001": ("f-error",),  # not a rule of the run: its id alone
        "PG103 gpu-runtime-class": ("f-rule-error",),
        "PG301 privileged-outside-op…": ("f-error",),
        "PG401 node-pool-label": ("f-note",),
    }
    assert bars(figures[2]) == {
        "ml": ("f-error", "f-rule-error"),
        "(cluster-scoped)": ("f-note",),
        "(no object)": ("f-error",),
    }
    # The team is the namespace's trust domain, when its Namespace was in scope.
    assert bars(figures[3]) == {
        "research": ("f-error", "f-rule-error"),
        "(cluster-scoped)": ("f-note",),
        "(no object)": ("f-error",),
    }
    ml = figures[2].all("g")[0]
    assert ml.one("title").text() == "ml: 1 error, 1 rule-error"
    assert ml.all("text")[1].text() == "2"


def test_a_chart_shows_the_largest_rows_and_counts_the_rest(
    make_report: Callable[..., Report], render: Render
) -> None:
    ref = ObjectRef("v1", "Pod", "ml", "p")
    findings = [
        Finding(f"X{n:03}", Level.WARNING, "m", Location("a.yaml", n, 1), ref)
        for n in range(TOP_BARS + 5)
        for _ in range(n + 1)
    ]
    page = parse(render(make_report(findings=findings, rules=()), "html"))
    rule = page.one("figure", id="chart-rule")
    labels = [g.all("text")[0].text() for g in rule.all("g")]
    assert labels == [f"X{n:03}" for n in range(TOP_BARS + 4, 4, -1)]  # most first
    assert rule.one("p").text() == "and 5 more"


def test_no_findings_no_charts(make_report: Callable[..., Report], render: Render) -> None:
    page = parse(render(make_report(findings=()), "html"))
    assert page.all("figure") == []
    assert "No findings to chart." in page.one("section", id="summary").text()


def test_fleet_map_draws_every_pool_its_members_and_tenants(
    make_report: Callable[..., Report], render: Render
) -> None:
    page = parse(render(make_report(fleet=FLEET), "html"))
    fleet = page.one("section", id="fleet")
    assert (
        fleet.all("p")[0]
        .text()
        .startswith(
            "2 pools: 2 GPU nodes (16 GPUs), 1 node-pool declaration; sharing: mig 1, time-slicing 1."
        )
    )
    cards = fleet.all("article", class_="pool")
    # The pool with a finding on a member first.
    assert [card.one("h3").text() for card in cards] == ["h100-shared", "a100-mig"]
    shared, mig = cards

    def facts(card: Element) -> dict[str, str]:
        dl = card.one("dl")
        names, values = dl.kids("dt"), dl.kids("dd")
        return dict(zip([n.text() for n in names], [v.text() for v in values], strict=True))

    assert facts(shared) == {
        "SKU": "h100 (NVIDIA-H100-80GB-HBM3)",
        "MIG strategy": "no MIG",
        "Members": "2 nodes (16 GPUs)",
        "Tenants": "researchml (2 workloads)servingserve (1 workload)",
        "Findings": "1 note",
    }
    assert shared.one("span", class_="mode").text() == "time-slicing"
    assert "shared" in shared.one("span", class_="mode").attrs["class"].split()
    assert "p-note" in shared.attrs["class"].split()
    # One square per member, coloured by its worst finding: PG401 on gpu-node-1.
    assert [r.attrs["class"] for r in shared.all("rect")] == ["f-note", "f-clean"]
    assert shared.one("title").text() == "members of pool h100-shared: 1 note"
    assert shared.one("p", class_="alert").text() == (
        "GPUs shared across 2 trust domains: research, serving."
    )
    assert facts(mig) == {
        "SKU": "a100",
        "MIG strategy": "single",
        "Members": "0 nodes, 1 declaration",
        "Tenants": "none",
        "Findings": "none on its members",
    }
    assert mig.all("p", class_="alert") == []


def test_fleet_map_without_pools_or_without_a_record(
    make_report: Callable[..., Report], render: Render
) -> None:
    from scanner.findings.fleet import Fleet

    empty = parse(render(make_report(fleet=Fleet()), "html")).one("section", id="fleet")
    assert "No GPU pools" in empty.text()
    missing = parse(render(make_report(), "html")).one("section", id="fleet")
    assert "Not recorded in this report." in missing.text()


def test_findings_are_grouped_by_object_most_severe_first(report: Report, render: Render) -> None:
    page = parse(render(report, "html"))
    assert groups(page) == {
        "error Deployment ml/train apps/v1 · k8s/train.yaml2 findings": [
            ["error", "PG301privileged-outside-operator", 'container "cuda" runs privileged',
             "12:9spec.template.spec.containers[0].securityContext"],
            ["rule-error", "PG103gpu-runtime-class", "no such key: runtimeClassName",
             "5:3spec.template.spec"],
        ],
        "error file bad dir/broken#1.yaml1 finding": [
            ["error", "PG001", "mapping values are not allowed here", "3:14"]
        ],
        # A cluster object: no fake position, no URI that repeats its name.
        "note Node gpu-node-1 v11 finding": [
            ["note", "PG401node-pool-label", "node has no pool label", "metadata.labels"]
        ],
    }  # fmt: skip
    findings = page.one("section", id="findings")
    details = findings.all("details", class_="obj")
    assert [d.attrs["data-ns"] for d in details] == ["ml", "(no object)", "(cluster-scoped)"]
    assert all("open" in d.attrs for d in details)
    rows = [tr.attrs for d in details for tr in d.one("tbody").kids("tr")]
    assert [(row["data-l"], row["data-r"]) for row in rows] == [
        ("error", "PG301"),
        ("rule-error", "PG103"),
        ("error", "PG001"),
        ("note", "PG401"),
    ]
    assert [p.text() for p in findings.all("p", class_="muted")] == [
        "1 suppressed finding not listed (run with --show-suppressed to list them).",
        "3 findings, 1 rule error on 3 objects, most severe first.",
    ]


def test_the_filter_bar_offers_what_is_listed(
    make_report: Callable[..., Report], render: Render
) -> None:
    page = parse(render(make_report(), "html", SHOWN))
    bar = page.one("div", id="filters")
    assert "hidden" in bar.attrs  # the script shows it; without the script it is useless
    boxes = [(i.attrs["value"], "checked" in i.attrs) for i in bar.all("input", name="level")]
    assert boxes == [("error", True), ("note", True), ("rule-error", True), ("suppressed", True)]
    rules = [o.attrs["value"] for o in bar.one("select", name="rule").all("option")]
    assert rules == ["", "PG001", "PG103", "PG204", "PG301", "PG401"]
    spaces = [o.text() for o in bar.one("select", name="ns").all("option")]
    assert spaces == ["all namespaces", "(cluster-scoped) (1)", "(no object) (1)", "ml (3)"]
    assert bar.all("select", name="drift") == []  # only with --compare
    assert bar.one("output").text() == "Showing 5 of 5 findings"


def test_large_reports_open_only_the_first_groups(
    make_report: Callable[..., Report], render: Render
) -> None:
    findings = [
        Finding("PG301", Level.ERROR, "m", Location("a.yaml", 1, 1), ObjectRef("v1", "Pod", "ml", f"p{n}"))
        for n in range(OPEN_ROWS + 50)
    ]  # fmt: skip
    page = parse(render(make_report(findings=findings), "html"))
    opened = ["open" in d.attrs for d in page.all("details", class_="obj")]
    assert opened == [True] * OPEN_ROWS + [False] * 50


def test_suppressed_findings_hidden_unless_asked(
    make_report: Callable[..., Report], render: Render
) -> None:
    hidden = parse(render(make_report(), "html"))
    rows = [row[1] for rows in groups(hidden).values() for row in rows]
    assert not any(rule.startswith("PG204") for rule in rows)
    assert "pool is untainted during migration" not in hidden.text()

    shown = parse(render(make_report(), "html", SHOWN))
    row = shown.one("tr", class_="suppressed")
    assert row.attrs["data-l"] == "suppressed"
    cells = [td.text() for td in row.kids("td")]
    assert cells == [
        "warning",
        "PG204pool-toleration",
        "no toleration for taint nvidia.com/gpu"
        "suppressed (in-source): pool is untainted during migration",
        "20:7spec.template.spec.tolerations",
    ]
    assert row.one("span", class_="level").attrs["class"] == "level level-suppressed"
    # Last in its group: after the rule error.
    train = next(v for k, v in groups(shown).items() if "ml/train" in k)
    assert [r[0] for r in train] == ["error", "rule-error", "warning"]


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
    # A rule a notification names is documented, and linked.
    assert section.all("li")[2].one("a").attrs["href"] == "#rule-PG204"
    assert page.one("section", id="rule-PG204")
    banner = page.one("p", class_="banner").text()
    assert banner.startswith("Results incomplete: 1 error notification.")


def test_only_rules_that_fired_are_documented(report: Report, render: Render) -> None:
    extra = RuleDoc(
        id="PG999",
        name="quiet-rule",
        level=Level.WARNING,
        summary="Never fires here.",
        description="Long text " * 200,
        remediation="Nothing.",
        subject="workload",
        source="rules/PG999-quiet-rule.yaml",
    )
    report = dataclasses.replace(report, rules=(*RULES, extra), notifications=())
    page = parse(render(report, "html"))
    section = page.one("section", id="rules")
    # PG204's finding is suppressed and not shown: documented only with --show-suppressed
    # (or when a notification names it).
    assert [s.attrs["id"] for s in section.all("section", class_="rule")] == [
        "rule-PG103",
        "rule-PG301",
        "rule-PG401",
    ]
    assert section.one("h2").text() == "Rules (3 with findings or notes)"
    quiet = section.one("p", class_="quiet").text()
    assert quiet == (
        "2 other rules of the run with no findings here (poolgate rules show ID documents "
        "each): PG204 pool-toleration, PG999 quiet-rule."
    )
    assert "Long text" not in page.text()
    pg301 = page.one("section", id="rule-PG301")
    assert pg301.one("h3").text() == "PG301 privileged-outside-operator"
    text = pg301.text()
    assert "Only the GPU Operator namespace may run privileged containers." in text
    assert "Remediation:Drop privileged: true." in text.replace("\n", "")
    assert "security severity 8" in text
    assert "Defined in rules/PG301-privileged-outside-operator.yaml" in text
    # Every in-page link has its target; PG001 (not a rule of the run) is not a link.
    ids = {element.attrs["id"] for element in page.iter() if "id" in element.attrs}
    links = [a for a in page.all("a") if a.attrs["href"].startswith("#")]
    assert links and all(a.attrs["href"][1:] in ids for a in links)
    broken = next(tr for tr in page.all("tr") if tr.attrs.get("data-r") == "PG001")
    assert broken.all("a") == []


def test_rule_documentation_is_markdown_rendered(
    make_report: Callable[..., Report], render: Render
) -> None:
    rule = dataclasses.replace(
        RULES[2],
        description="Sees **every** GPU:\n\n- `privileged: true`\n- `hostPID`\n\n"
        "See [the docs](https://example.com/a?b=1&c=2).",
        remediation="Remove `privileged`.",
    )
    page = parse(render(make_report(rules=(rule,)), "html"))
    doc = page.one("section", id="rule-PG301")
    assert [s.text() for s in doc.all("strong")] == ["every", "Remediation:"]
    assert [li.text() for li in doc.one("ul").all("li")] == ["privileged: true", "hostPID"]
    assert [c.text() for c in doc.all("code")][:3] == ["privileged: true", "hostPID", "privileged"]
    link = next(a for a in doc.all("a") if a.text() == "the docs")
    assert link.attrs["href"] == "https://example.com/a?b=1&c=2"
    assert link.attrs["rel"] == "noopener noreferrer"


def test_bundled_rules_and_local_paths_are_named_without_the_machine(
    make_report: Callable[..., Report], render: Render
) -> None:
    from scanner.ruleset.load import bundled_rules_dir

    bundled = dataclasses.replace(RULES[2], source=str(bundled_rules_dir() / "PG301-x.yaml"))
    mine = dataclasses.replace(RULES[3], source="/home/alice/policies/rules/PG401.yaml")
    inside = dataclasses.replace(RULES[0], source="/work/repo with space/policy/PG103.yaml")
    note = Notification(
        Level.ERROR, "cannot read /work/repo with space/k8s/a.yaml: denied", "/srv/other/b.yaml"
    )
    report = make_report(rules=(inside, bundled, mine), notifications=(note,))
    output = render(report, "html")
    page = parse(output)
    assert "Defined in bundled: PG301-x.yaml" in page.one("section", id="rule-PG301").text()
    assert "Defined in …/rules/PG401.yaml" in page.one("section", id="rule-PG401").text()
    assert "Defined in policy/PG103.yaml" in page.one("section", id="rule-PG103").text()
    item = page.one("section", id="notifications").one("li").text()
    assert item == "error …/b.yaml cannot read k8s/a.yaml: denied"
    for local in ("/home/alice", "/work/repo", str(bundled_rules_dir()), "/srv/other"):
        assert local not in output


def test_output_is_deterministic(make_report: Callable[..., Report], render: Render) -> None:
    first = render(make_report(fleet=FLEET), "html", SHOWN)
    assert render(make_report(fleet=FLEET), "html", SHOWN) == first
    # A report rebuilt from equal (not identical) records renders the same bytes.
    copies = [dataclasses.replace(f) for f in make_report().findings]
    again = make_report(findings=copies, fleet=FLEET)
    assert render(again, "html", SHOWN) == first


def _pod_finding(name: str, rule: str, message: str = "m") -> Finding:
    ref = ObjectRef("v1", "Pod", "ml", name)
    location = Location(f"cluster://prod/ml/Pod/{name}", 1, 1, "spec")
    return Finding(rule, Level.ERROR, message, location, ref, "cluster")


def test_compare_adds_what_changed_since_the_last_audit(tmp_path: Path) -> None:
    def report(*findings: Finding) -> Report:
        return Report(
            findings=findings, notifications=(), rules=(), tool_version="0", repo_root="."
        )

    last = tmp_path / "last.json"
    last.write_text(
        json.dumps(to_document(report(_pod_finding("a", "PG603"), _pod_finding("gone", "PG301"))))
    )
    now = report(_pod_finding("a", "PG603"), _pod_finding("fresh", "PG501"))
    changes = drift.compare(
        now, drift.load_previous(str(last)), "last.json", drift.checker({"PG603", "PG301"}, ())
    )
    out = io.StringIO()
    drift_report.wrap("html", lambda r, s: None, changes)(now, out)
    page = parse(out.getvalue())
    assert [s.attrs["id"] for s in page.one("main").kids("section")][:2] == ["summary", "drift"]
    section = page.one("section", id="drift")
    assert section.one("h2").text() == "Since the last audit"
    assert "Compared with last.json: 1 new, 1 unchanged, 1 resolved, 0 unverified." in (
        section.text()
    )
    rows = [[td.text() for td in tr.kids("td")] for tr in section.all("tr")][1:]
    assert rows == [
        ["new", "PG501", "error", "ml/Pod/fresh", "", "m"],
        ["resolved", "PG301", "error", "ml/Pod/gone", "", "m"],
    ]
    # Each listed finding carries its state, and the filter can pick it.
    states = {
        tr.attrs["data-r"]: tr.attrs["data-d"]
        for tr in page.one("section", id="findings").all("tr")
        if "data-r" in tr.attrs
    }
    assert states == {"PG501": "new", "PG603": "unchanged"}
    drift_filter = page.one("select", name="drift")
    assert [o.attrs["value"] for o in drift_filter.all("option")] == ["", "new", "unchanged"]


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
    epoch = {"SOURCE_DATE_EPOCH": "1764555420"}  # 2025-12-01 02:17 UTC
    result = poolgate("scan", "fixtures/demo", "--format", "html", "-o", str(out), env=epoch)
    assert result.returncode == 1, result.stderr
    assert result.stdout == ""
    page = parse(out.read_text(encoding="utf-8"))
    listed = set()
    for group in page.one("section", id="findings").all("details", class_="obj"):
        uri = group.one("summary").all("code")[-1].text()
        for tr in group.one("tbody").kids("tr"):
            line = int(tr.kids("td")[3].text().split(":")[0])
            listed.add((uri, line, tr.attrs["data-r"]))
    for expected in _expected_demo_findings():
        assert expected in listed
    meta = _meta(page)
    assert meta["Generated"] == "2025-12-01 02:17 UTC"
    assert meta["Scanned"] == "fixtures/demo"
    assert meta["Config"] == "built-in defaults (no .poolgate.yaml found)"
    assert str(ROOT) not in out.read_text(encoding="utf-8")
    # Same input and SOURCE_DATE_EPOCH, another process and hash seed: the same bytes.
    again = tmp_path / "again.html"
    poolgate(
        "scan", "fixtures/demo", "--format", "html", "-o", str(again),
        env={**epoch, "PYTHONHASHSEED": "12345"},
    )  # fmt: skip
    assert again.read_bytes() == out.read_bytes()


def test_without_source_date_epoch_the_page_says_when_it_was_made(tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    before = datetime.datetime.now(datetime.UTC).replace(second=0, microsecond=0)
    poolgate(
        "scan", "fixtures/demo", "--format", "html", "-o", str(out), drop=["SOURCE_DATE_EPOCH"]
    )
    after = datetime.datetime.now(datetime.UTC)
    stamp = parse(out.read_text(encoding="utf-8")).one("time").attrs["datetime"]
    made = datetime.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.UTC)
    assert before <= made <= after


def test_source_date_epoch_fixes_the_time_when_it_is_a_time() -> None:
    from scanner.findings.report import report_time

    assert report_time({"SOURCE_DATE_EPOCH": "1764555420"}) == datetime.datetime(
        2025, 12, 1, 2, 17, tzinfo=datetime.UTC
    )
    before = datetime.datetime.now(datetime.UTC)
    for value in ("", "soon", "-5", "1e9", "9" * 30):
        assert (
            before
            <= report_time({"SOURCE_DATE_EPOCH": value})
            <= datetime.datetime.now(datetime.UTC)
        )
