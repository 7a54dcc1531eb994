"""The HTML report in a real browser: headless Chromium (``browser_run``).

The demo scan and an audit of the lab cluster are opened as a user opens them: the
page must load with no console message, no script exception and no
Content-Security-Policy violation, its style sheet and script must be the ones the
CSP admits (the header is styled, the filter bar shown), the charts and the fleet map
must be drawn with a size, and the filters must narrow the findings. A screenshot of
each page is kept (the test prints where).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from browser_run import artifacts, browser
from cli_run import ROOT, poolgate

from benchmarks.browser import Browser

LAB = ROOT / "tests" / "audit" / "lab"
LAB_CONTEXT = "admin@gpu-lab"

STATE = """(() => {
  const box = (el) => { const r = el.getBoundingClientRect(); return [r.width, r.height]; };
  const rows = [...document.querySelectorAll("#findings tbody tr")];
  return {
    filters: document.documentElement.getAttribute("data-filters"),
    barShown: !document.getElementById("filters").hidden,
    header: getComputedStyle(document.querySelector("header.top")).backgroundColor,
    charts: [...document.querySelectorAll("#summary figure.chart svg")].map(box),
    pools: [...document.querySelectorAll("#fleet article.pool")].map((p) => ({
      name: p.querySelector("h3").textContent,
      squares: p.querySelectorAll("svg rect").length,
      size: box(p),
    })),
    rows: rows.length,
    images: document.images.length,
    scripts: document.scripts.length,
  };
})()"""


def _filter(page: Browser, **fields: Any) -> dict[str, Any]:
    """Set filter fields as a user would (then an ``input`` event) and count what shows."""
    script = """((fields) => {
      const bar = document.getElementById("filters");
      for (const [name, value] of Object.entries(fields)) {
        if (name.startsWith("level:")) {
          bar.querySelector(`input[name=level][value="${name.slice(6)}"]`).checked = value;
        } else {
          bar.querySelector(`[name=${name}]`).value = value;
        }
      }
      bar.dispatchEvent(new Event("input", {bubbles: true}));
      const rows = [...document.querySelectorAll("#findings tbody tr")].filter((r) => !r.hidden);
      const groups = [...document.querySelectorAll("#findings details.obj")];
      return {
        levels: [...new Set(rows.map((r) => r.getAttribute("data-l")))].sort(),
        rules: [...new Set(rows.map((r) => r.getAttribute("data-r")))].sort(),
        rows: rows.length,
        groups: groups.filter((g) => !g.hidden).length,
        closedWithMatches: groups.filter((g) => !g.hidden && !g.open).length,
        output: bar.querySelector("output").value,
      };
    })(%s)"""
    result: dict[str, Any] = page.evaluate(script % json.dumps(fields))
    return result


def _open_clean(page: Browser, report: Path, shot: Path) -> dict[str, Any]:
    loaded = page.open(report)
    page.screenshot(shot)
    print(f"screenshot: {shot}")
    assert loaded.console == []
    assert loaded.exceptions == []
    assert page.csp_violations() == []
    state: dict[str, Any] = page.evaluate(STATE)
    assert state["filters"] == "ready"  # the script ran: its hash is in the CSP
    assert state["barShown"]
    assert state["header"] == "rgb(36, 41, 47)"  # the style sheet applies: its hash too
    assert state["images"] == 0 and state["scripts"] == 1
    return state


def test_the_demo_report_in_chromium(tmp_path: Path) -> None:
    report = tmp_path / "demo.html"
    result = poolgate("scan", "fixtures/demo", "--format", "html", "-o", str(report))
    assert result.returncode == 1, result.stderr
    with browser() as page:
        state = _open_clean(page, report, artifacts(tmp_path, "html-report") / "demo.png")
        assert len(state["charts"]) == 4
        assert all(width > 100 and height > 20 for width, height in state["charts"])
        assert state["pools"] == []  # the demo declares no GPU nodes
        assert state["rows"] == 22

        errors = _filter(page, **{"level:warning": False})
        assert errors["levels"] == ["error"] and errors["rows"] == 16
        assert errors["output"] == "Showing 16 of 22 findings"
        both = _filter(page, **{"level:warning": True, "rule": "PG303"})
        assert both["rules"] == ["PG303"] and both["rows"] == 4
        # Text search reads the object's heading too, and opens what it finds.
        text = _filter(page, rule="", q="nightly-eval")
        assert text["groups"] == 1 and text["rows"] == 3 and text["closedWithMatches"] == 0
        none = _filter(page, q="no such text anywhere")
        assert (none["rows"], none["groups"]) == (0, 0)
        assert _filter(page, q="")["rows"] == 22


def _lab_snapshot(path: Path, drop: str = "") -> Path:
    items = [
        body
        for file in sorted(LAB.glob("*.yaml"))
        for body in yaml.safe_load_all(file.read_text())
        if body and body["kind"] != "Secret" and body["metadata"]["name"] != drop
    ]
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    return path


def test_an_audit_report_with_its_fleet_and_drift_in_chromium(tmp_path: Path) -> None:
    args = ("--context", LAB_CONTEXT, "--now", "2026-11-30T02:17:00Z")
    last = tmp_path / "last.json"
    poolgate("audit", "--snapshot", str(_lab_snapshot(tmp_path / "a.json")), *args,
             "--format", "json", "-o", str(last))  # fmt: skip
    tonight = _lab_snapshot(tmp_path / "b.json", drop="debug-shell")
    report = tmp_path / "audit.html"
    result = poolgate(
        "audit", "--snapshot", str(tonight), *args, "--compare", str(last),
        "--format", "html", "-o", str(report),
    )  # fmt: skip
    assert result.returncode == 1, result.stderr
    with browser() as page:
        state = _open_clean(page, report, artifacts(tmp_path, "html-report") / "audit.png")
        assert len(state["charts"]) == 4
        pools = {pool["name"]: pool for pool in state["pools"]}
        assert set(pools) == {"a100-mig", "h100-train"}
        assert all(pool["squares"] == 1 and pool["size"][1] > 100 for pool in pools.values())
        drift = page.evaluate("document.querySelector('#drift').textContent")
        assert "resolved" in drift and "debug-shell" in drift
        assert _filter(page, drift="new")["rows"] == 0
        unchanged = _filter(page, drift="unchanged")
        assert unchanged["rows"] == state["rows"] > 0


@pytest.mark.parametrize("width", [420])
def test_the_page_fits_a_narrow_window(tmp_path: Path, width: int) -> None:
    """A phone-width window: nothing wider than the window; finding tables scroll in place."""
    report = tmp_path / "demo.html"
    poolgate("scan", "fixtures/demo", "--format", "html", "-o", str(report))
    with browser(width=width) as page:
        page.open(report)
        page.screenshot(artifacts(tmp_path, "html-report") / f"demo-{width}px.png", 3000)
        overflow = page.evaluate(
            "[...document.querySelectorAll('header, #summary, #fleet, .filters, #findings')]"
            f".filter((el) => el.getBoundingClientRect().right > {width} + 1).length"
        )
        assert overflow == 0
