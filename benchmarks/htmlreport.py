"""A 10,000-finding HTML report: its size, how long it takes to write, and how long
headless Chromium takes to load it and to filter it.

The report is generated, not scanned, so it holds exactly the number of findings
asked for, spread as a nightly audit of a large fleet spreads them: about five
findings per object over 40 namespaces, rules and messages shaped like the bundled
ones (their documentation is the bundled rules' own), a fleet of 20 pools of 50
nodes with a finding on one node in ten. The same seed gives the same report.

Chromium (``benchmarks.browser``) opens the file ``repeats`` times in one browser;
each load is timed from the navigation command to the load event. Then, in the
page, a text query over every finding and a level filter are each timed with
``performance.now()`` around the ``input`` event the filter bar listens to (the
first query also builds the search text of every row).

With ``against`` (``--against CHECKOUT``), the same report is also written by the
other checkout's HTML reporter, in a child process whose ``scanner`` is that
checkout's (``write_with``), and both pages are loaded in the same browser,
alternating. An older checkout's ``Report`` may lack the fields this one added (what
was scanned, the fleet, the time): the report is built with the fields it has.
"""

from __future__ import annotations

import dataclasses
import datetime
import io
import json
import os
import random
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from scanner.findings.records import Finding, Level, Location, Outcome, sort_findings
from scanner.findings.report import Report, RunStats
from scanner.inventory import ObjectRef
from scanner.reporters import html as html_report
from scanner.ruleset.docs import RuleDoc
from scanner.ruleset.load import bundled_rules_dir

FINDINGS = 10_000
NAMESPACES = 40
POOLS, NODES_PER_POOL = 20, 50
WORKLOAD_RULES = ("PG103", "PG104", "PG301", "PG303", "PG401", "PG402", "PG501", "PG502")
NODE_RULES = ("PG101", "PG102", "PG601")
NIGHT = datetime.datetime(2026, 1, 1, 2, 17, tzinfo=datetime.UTC)
FILTER = """(() => {
  const bar = document.getElementById("filters");
  const time = (change) => {
    const start = performance.now();
    change();
    bar.dispatchEvent(new Event("input", {bubbles: true}));
    document.body.offsetHeight;  // the layout the change causes
    return (performance.now() - start) / 1000;
  };
  const search = bar.querySelector("[name=q]");
  const warning = bar.querySelector("input[name=level][value=warning]");
  const query = time(() => { search.value = "team-07"; });
  const level = time(() => { search.value = ""; warning.checked = false; });
  const rows = document.querySelectorAll("#findings tbody tr").length;
  return {query, level, rows};
})()"""


@dataclass
class HtmlResult:
    findings: int
    objects: int
    bytes: int = 0
    write: list[float] = field(default_factory=list)
    """Seconds to write the page (``html.write`` into memory), per repeat."""
    load: list[float] = field(default_factory=list)
    """Seconds from navigation to the load event in headless Chromium, per repeat."""
    query_seconds: float | None = None
    level_seconds: float | None = None
    browser: str | None = None
    """Why Chromium did not measure, when it did not."""
    against: AgainstPage | None = None
    """The same report written by ``--against``'s checkout."""


@dataclass
class AgainstPage:
    """The page of ``--against``'s checkout: where it is, its size, write and load."""

    checkout: str
    bytes: int = 0
    write: list[float] = field(default_factory=list)
    load: list[float] = field(default_factory=list)
    error: str | None = None


def rule_docs() -> list[RuleDoc]:
    """The bundled rules' documentation, read from their files (no CEL compiled)."""
    docs = []
    for path in sorted(bundled_rules_dir().glob("*.yaml")):
        body = yaml.safe_load(path.read_text(encoding="utf-8"))
        docs.append(
            RuleDoc(
                id=body["id"],
                name=body["name"],
                level=Level.parse(body["level"]),
                summary=body["summary"].strip(),
                description=body["description"].strip(),
                remediation=body["remediation"].strip(),
                subject=body["subject"],
                source=str(path),
                security_severity=body.get("securitySeverity"),
                tags=tuple(body.get("tags", ())),
            )
        )
    return docs


def synthetic_report(findings: int = FINDINGS, seed: int = 7) -> Report:
    """A report of exactly ``findings`` findings, as a fleet's nightly audit has them."""
    rng = random.Random(seed)
    docs = {doc.id: doc for doc in rule_docs()}
    pools: list[dict[str, Any]] = []
    made: list[Finding] = []
    for number in range(POOLS):
        sku = ("h100", "a100", "l4")[number % 3]
        sharing = ("exclusive", "mig", "time-slicing", "mps")[number % 4]
        nodes = [f"gpu-{sku}-{number:02}-{n:03}" for n in range(NODES_PER_POOL)]
        tenants = tuple(
            (f"team-{t:02}", f"domain-{t % 8}", rng.randint(1, 40))
            for t in sorted(rng.sample(range(NAMESPACES), 3))
        )
        pools.append(
            {
                "name": f"{sku}-pool-{number:02}",
                "skus": (sku,),
                "products": (f"NVIDIA-{sku.upper()}-80GB",),
                "sharing": sharing,
                "mig_strategies": ("single",) if sharing == "mig" else (),
                "trust_domains": tuple(sorted({domain for _, domain, _ in tenants})),
                "tenants": tenants,
                "nodes": NODES_PER_POOL,
                "declarations": 0,
                "gpus": NODES_PER_POOL * 8,
                "members": tuple(f"Node/{name}" for name in nodes),
            }
        )
        for name in nodes[:: NODES_PER_POOL // 5]:
            rule = rng.choice(NODE_RULES)
            made.append(_finding(docs, rule, ObjectRef("v1", "Node", "", name), rng))
    kinds = (("apps/v1", "Deployment"), ("apps/v1", "StatefulSet"), ("batch/v1", "Job"))
    while len(made) < findings:
        api_version, kind = rng.choice(kinds)
        namespace = f"team-{rng.randrange(NAMESPACES):02}"
        ref = ObjectRef(api_version, kind, namespace, f"app-{len(made):05}")
        for rule in rng.sample(WORKLOAD_RULES, rng.randint(2, 8))[: findings - len(made)]:
            made.append(_finding(docs, rule, ref, rng))
    objects = len({f.ref for f in made})
    known = {item.name for item in dataclasses.fields(Report)}
    extra = {key: value for key, value in _recorded(pools).items() if key in known}
    return Report(
        findings=sort_findings(made),
        notifications=(),
        rules=sorted(docs.values(), key=lambda doc: doc.id),
        tool_version="benchmark",
        repo_root="/nonexistent",
        stats=RunStats(objects=objects + POOLS * NODES_PER_POOL, subjects=objects),
        **extra,
    )


def _recorded(pools: list[dict[str, Any]]) -> dict[str, Any]:
    """What was read, the fleet and the time, for a checkout whose ``Report`` has them."""
    try:
        from scanner.findings.fleet import Fleet, PoolSummary, Tenant
        from scanner.findings.report import Scanned
    except ImportError:  # an older checkout (--against): its report has none of them
        return {}
    summaries = tuple(
        PoolSummary(**{**pool, "tenants": tuple(Tenant(*tenant) for tenant in pool["tenants"])})
        for pool in pools
    )
    domains = {f"team-{n:02}": f"domain-{n % 8}" for n in range(NAMESPACES)}
    return {
        "scanned": Scanned(cluster="gpu-prod", read_at=NIGHT),
        "fleet": Fleet(summaries, domains),
        "generated_at": NIGHT + datetime.timedelta(minutes=5),
    }


def _finding(docs: dict[str, RuleDoc], rule: str, ref: ObjectRef, rng: random.Random) -> Finding:
    container = rng.choice(("trainer", "server", "sidecar", "init-weights"))
    path = f"spec.template.spec.containers[{rng.randrange(3)}].securityContext.privileged"
    message = (
        f"container '{container}' of {ref.kind} {ref.name}: {docs[rule].summary.rstrip('.')} "
        f"(namespace {ref.namespace or 'cluster'})"
    )
    uri = f"cluster://gpu-prod/{ref.logical_name}"
    return Finding(
        rule, docs[rule].level, message, Location(uri, 1, 1, path), ref, "cluster", Outcome.FAIL
    )


def measure(
    out: Path,
    repeats: int,
    findings: int = FINDINGS,
    seed: int = 7,
    against: Path | None = None,
    timeout: float = 900,
) -> HtmlResult:
    """Write the report to ``out`` and measure it (Chromium when one is installed);
    with ``against``, that checkout's page too, loaded alternately with this one's."""
    from benchmarks.browser import Browser, BrowserError, find_chromium

    report = synthetic_report(findings, seed)
    result = HtmlResult(findings=len(report.findings), objects=report.stats.subjects)
    result.write = _write(report, out, repeats)
    result.bytes = out.stat().st_size
    other = out.with_name("against.html")
    if against is not None:
        result.against = write_with(against, other, repeats, findings, seed, timeout)
    executable = find_chromium()
    if executable is None:
        result.browser = "not installed"
        return result
    try:
        with Browser(executable, timeout=300) as browser:
            for _ in range(repeats):
                loaded = browser.open(out)
                if loaded.console or loaded.exceptions or browser.csp_violations():
                    result.browser = f"page errors: {loaded.console or loaded.exceptions}"
                    return result
                result.load.append(loaded.seconds)
                if result.against is not None and result.against.error is None:
                    theirs = browser.open(other)
                    if theirs.console or theirs.exceptions or browser.csp_violations():
                        result.against.error = f"page errors: {theirs.console or theirs.exceptions}"
                    result.against.load.append(theirs.seconds)
            if result.against is not None:
                browser.open(out)  # the filters are this page's
            timings: dict[str, Any] = browser.evaluate(FILTER)
            result.query_seconds = float(timings["query"])
            result.level_seconds = float(timings["level"])
    except BrowserError as error:
        result.browser = f"failed: {error}"
    return result


def _write(report: Report, out: Path, repeats: int) -> list[float]:
    """Seconds to write ``report``'s page into memory, per repeat; the page to ``out``."""
    seconds = []
    for _ in range(repeats):
        stream = io.StringIO()
        started = time.perf_counter()
        html_report.write(report, stream)
        seconds.append(time.perf_counter() - started)
    out.write_text(stream.getvalue(), encoding="utf-8")
    return seconds


_CHILD = """
import importlib.util, json, sys
from pathlib import Path
import scanner
if not Path(scanner.__file__).resolve().is_relative_to(Path.cwd().resolve()):
    raise SystemExit(f"scanner imported from {scanner.__file__}, not from {Path.cwd()}")
spec = importlib.util.spec_from_file_location("_poolgate_htmlreport", sys.argv[1])
module = sys.modules[spec.name] = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
out, repeats, findings, seed = Path(sys.argv[2]), *map(int, sys.argv[3:])
report = module.synthetic_report(findings, seed)
print(json.dumps(module._write(report, out, repeats)))
"""


def write_with(
    checkout: Path, out: Path, repeats: int, findings: int, seed: int, timeout: float
) -> AgainstPage:
    """The same report written by ``checkout``'s HTML reporter: this module, run in a
    child process whose ``scanner`` is that checkout's (its root on ``sys.path``)."""
    page = AgainstPage(str(checkout))
    # Nothing written into the other checkout; only the writing itself is timed.
    env = {**os.environ, "PYTHONPATH": str(checkout.resolve()), "PYTHONDONTWRITEBYTECODE": "1"}
    argv = [sys.executable, "-c", _CHILD, __file__, str(out), str(repeats), str(findings)]
    try:
        run = subprocess.run(
            [*argv, str(seed)],
            cwd=checkout,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        page.error = "timed out"
        return page
    if run.returncode != 0:
        page.error = f"exit {run.returncode}: {run.stderr.strip().splitlines()[-1:]}"
        return page
    page.write = [float(seconds) for seconds in json.loads(run.stdout)]
    page.bytes = out.stat().st_size
    return page


def lines(result: HtmlResult | None) -> list[str]:
    """The report's lines about the HTML page."""
    if result is None:
        return ["html report: skipped (--no-html)"]
    write = statistics.median(result.write) if result.write else None
    head = (
        f"html report, {result.findings:,} findings on {result.objects:,} objects: "
        f"{result.bytes / 1e6:.1f} MB, written in " + ("-" if write is None else f"{write:.3f} s")
    )
    found = [head]
    if result.browser is not None:
        found.append(f"  headless Chromium: {result.browser}")
    else:
        load = statistics.median(result.load)
        found.append(
            f"  headless Chromium: loaded in {load:.3f} s (median of {len(result.load)}); "
            f"text filter over every finding {result.query_seconds or 0:.3f} s, "
            f"level filter {result.level_seconds or 0:.3f} s"
        )
    return found + _against_lines(result)


def _against_lines(result: HtmlResult) -> list[str]:
    other = result.against
    if other is None:
        return []
    if not other.write:
        return [f"  against {other.checkout}: FAILED ({other.error})"]
    write = statistics.median(other.write)
    line = f"  against {other.checkout}: {other.bytes / 1e6:.1f} MB, written in {write:.3f} s"
    if other.load:
        load = statistics.median(other.load)
        line += f", loaded in {load:.3f} s (median of {len(other.load)}, alternating)"
        if result.load:
            line += f"; this/against load {statistics.median(result.load) / load:.2f}x"
    if other.error:
        line += f" ({other.error})"
    return [line]
