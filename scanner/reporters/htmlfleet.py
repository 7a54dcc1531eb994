"""The GPU fleet map of the HTML report: every pool, its hardware, sharing and tenants.

A card per pool (``Report.fleet``, built from the model by ``scanner.findings.fleet``): its
SKU and GPU product, sharing mode, MIG strategy, its members drawn as squares coloured
by their most severe finding, the counts of those findings, its tenants with their
trust domains, and a warning when tenants of several trust domains share its GPUs
(time-slicing or MPS: no memory isolation between them). Pools with findings on
their members come first.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from scanner.findings.fleet import Fleet, PoolSummary
from scanner.findings.records import Finding, Outcome
from scanner.reporters.htmlsvg import LEVELS, members
from scanner.reporters.htmltext import text
from scanner.reporters.tally import plural

TENANTS_SHOWN = 12


def fleet_section(fleet: Fleet | None, findings: Sequence[Finding]) -> str:
    out = '<section id="fleet">\n<h2>GPU fleet</h2>\n'
    if fleet is None:
        return out + '<p class="muted">Not recorded in this report.</p>\n</section>\n'
    if not fleet.pools:
        return out + (
            "<p>No GPU pools: the run saw no GPU nodes and no node-pool declarations.</p>\n"
            "</section>\n"
        )
    worst = _worst_by_object(findings)
    pools = sorted(
        fleet.pools, key=lambda pool: (min(_rank(worst.get(m)) for m in pool.members), pool.name)
    )
    nodes = sum(pool.nodes for pool in fleet.pools)
    declarations = sum(pool.declarations for pool in fleet.pools)
    gpus = sum(pool.gpus for pool in fleet.pools)
    modes = Counter(pool.sharing for pool in fleet.pools)
    scope = [plural(nodes, "GPU node") + (f" ({gpus:,} GPUs)" if gpus else "")]
    if declarations:
        scope.append(plural(declarations, "node-pool declaration"))
    sharing = ", ".join(f"{text(mode)} {count}" for mode, count in sorted(modes.items()))
    out += (
        f"<p>{plural(len(fleet.pools), 'pool')}: {', '.join(scope)}; sharing: {sharing}. "
        "Each square is a node or declaration, coloured by its most severe finding.</p>\n"
        '<ul class="legend">'
        + "".join(f'<li><span class="key k-{level}"></span>{level}</li>' for level in LEVELS)
        + '<li><span class="key k-clean"></span>no findings</li></ul>\n<div class="pools">\n'
    )
    for number, pool in enumerate(pools, 1):
        out += _card(number, pool, worst)
    return out + "</div>\n</section>\n"


def _card(number: int, pool: PoolSummary, worst: dict[str, str]) -> str:
    states = [worst.get(member, "clean") for member in pool.members]
    counts = Counter(state for state in states if state != "clean")
    top = min(states, key=_rank, default="clean")
    name = text(pool.name) or '<span class="muted">GPU nodes without a pool label</span>'
    mode = f'<span class="mode{" shared" if pool.shared else ""}">{text(pool.sharing)}</span>'
    caption = f"members of pool {pool.name or '(unpooled)'}: " + (
        ", ".join(f"{counts[level]} {level}" for level in LEVELS if counts[level]) or "no findings"
    )
    sku = ", ".join(text(value) for value in pool.skus) or '<span class="muted">no SKU label</span>'
    if pool.products:
        sku += f' <span class="muted">({", ".join(text(p) for p in pool.products)})</span>'
    if pool.mig_strategies:
        mig = ", ".join(text(strategy) for strategy in pool.mig_strategies)
    else:
        mig = '<span class="muted">no MIG</span>'
    size = [plural(pool.nodes, "node") + (f" ({pool.gpus:,} GPUs)" if pool.gpus else "")]
    if pool.declarations:
        size.append(plural(pool.declarations, "declaration"))
    found = (
        " ".join(
            f'<span class="level level-{level}">{counts[level]:,} {level}</span>'
            for level in LEVELS
            if counts[level]
        )
        or '<span class="muted">none on its members</span>'
    )
    out = (
        f'<article class="pool p-{top}" id="pool-{number}">\n'
        f"<div><h3>{name}</h3>{mode}</div>\n{members(states, caption)}\n<dl>"
        f"<dt>SKU</dt><dd>{sku}</dd><dt>MIG strategy</dt><dd>{mig}</dd>"
        f"<dt>Members</dt><dd>{', '.join(size)}</dd>"
        f"<dt>Tenants</dt><dd>{_tenants(pool)}</dd><dt>Findings</dt><dd>{found}</dd></dl>\n"
    )
    if pool.shared and len(pool.trust_domains) > 1:
        out += (
            f'<p class="alert">GPUs shared across {len(pool.trust_domains)} trust domains: '
            f"{', '.join(text(domain) for domain in pool.trust_domains)}.</p>\n"
        )
    return out + "</article>\n"


def _tenants(pool: PoolSummary) -> str:
    if not pool.tenants:
        return '<span class="muted">none</span>'
    shown = [
        f'<span class="td">{text(tenant.trust_domain)}</span>{text(tenant.namespace)} '
        f'<span class="muted">({plural(tenant.workloads, "workload")})</span>'
        for tenant in pool.tenants[:TENANTS_SHOWN]
    ]
    if len(pool.tenants) > TENANTS_SHOWN:
        shown.append(f"and {len(pool.tenants) - TENANTS_SHOWN:,} more")
    return "<br>".join(shown)


def _worst_by_object(findings: Sequence[Finding]) -> dict[str, str]:
    """Object logical name -> the label of its most severe finding (not suppressed)."""
    worst: dict[str, str] = {}
    for finding in findings:
        if finding.ref is None or finding.suppression is not None:
            continue
        label = "rule-error" if finding.outcome is Outcome.ERROR else str(finding.level)
        name = finding.ref.logical_name
        if _rank(label) < _rank(worst.get(name)):
            worst[name] = label
    return worst


def _rank(label: str | None) -> int:
    return LEVELS.index(label) if label in LEVELS else len(LEVELS)
