"""The fleet summary a run carries (scanner/findings/fleet.py): built from the model's pools and
namespaces, written by the JSON report and drawn by the HTML report."""

from __future__ import annotations

import json
from pathlib import Path

from cli_run import poolgate
from reporters.htmlpage import parse

from scanner.findings.fleet import Fleet, PoolSummary, summarize
from scanner.inventory import Inventory
from scanner.model import build_model
from scanner.sources.files import load_paths
from scanner.sources.yaml.document import parse_plain

SCENARIO = "fixtures/scenarios/timeslice-trust"


def test_a_scan_reports_every_pool_with_its_tenants_and_trust_domains() -> None:
    result = poolgate("scan", SCENARIO, "--format", "json")
    fleet = json.loads(result.stdout)["fleet"]
    pools = {pool["name"]: pool for pool in fleet["pools"]}
    assert set(pools) == {"h100-train", "l4-search", "l4-shared"}
    shared = pools["l4-shared"]
    assert shared["sharing"] == "time-slicing"
    assert shared["skus"] == ["l4"]
    assert shared["trustDomains"] == ["alpha", "bravo"]
    assert [(t["namespace"], t["trustDomain"]) for t in shared["tenants"]] == [
        ("team-a", "alpha"),
        ("team-b", "bravo"),
    ]
    assert (shared["nodes"], shared["declarations"]) == (1, 0)
    assert shared["members"] == ["Node/gke-l4-shared-1"]
    assert fleet["trustDomains"]["team-a"] == "alpha"


def test_declarations_count_apart_from_nodes() -> None:
    result = poolgate("scan", "fixtures/scenarios/mig-pools", "--format", "json")
    pools = {pool["name"]: pool for pool in json.loads(result.stdout)["fleet"]["pools"]}
    mixed = pools["a100-mixed"]
    assert (mixed["nodes"], mixed["declarations"], mixed["sharing"]) == (1, 1, "mixed")
    assert mixed["members"] == ["Node/ip-10-0-3-17", "NodePool/a100-mixed"]
    assert pools["a100-mig"]["migStrategies"] == ["mixed"]


def test_the_summary_is_the_models_pools(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[2]
    inventory: Inventory = load_paths([SCENARIO], root)
    model = build_model(inventory, read_yaml=parse_plain)
    fleet = summarize(model.pools, model.namespaces)
    assert isinstance(fleet, Fleet)
    assert [pool.name for pool in fleet.pools] == [p.facts["name"] for p in model.pools]
    for summary, pool in zip(fleet.pools, model.pools, strict=True):
        assert isinstance(summary, PoolSummary)
        assert summary.sharing == pool.facts["sharing"]
        assert list(summary.trust_domains) == pool.facts["trustDomains"]
        assert summary.shared == pool.facts["shared"]


def test_the_html_report_warns_of_gpus_shared_across_trust_domains(tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    poolgate("scan", SCENARIO, "--format", "html", "-o", str(out))
    page = parse(out.read_text(encoding="utf-8"))
    cards = {card.one("h3").text(): card for card in page.all("article", class_="pool")}
    assert set(cards) == {"h100-train", "l4-search", "l4-shared"}
    assert cards["l4-shared"].one("p", class_="alert").text() == (
        "GPUs shared across 2 trust domains: alpha, bravo."
    )
    assert cards["l4-search"].all("p", class_="alert") == []  # one trust domain
