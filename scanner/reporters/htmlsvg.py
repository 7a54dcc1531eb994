"""Hand-written inline SVG for the HTML report: a donut, bar charts, a pool's members.

No library and nothing loaded: each chart is a few ``<rect>``, ``<circle>`` and
``<text>`` elements, coloured by class from the page's one style sheet (no ``style``
attribute, which the page's CSP forbids). Labels come from the input and are escaped
(``htmltext.text``); every number is computed here. Each chart carries a ``<title>``
and its figures are also written as text beside or inside it, so a screen reader
and a text search see them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final, NamedTuple

from scanner.reporters.htmltext import text

LEVELS: Final = ("error", "warning", "note", "rule-error")
"""Outcome labels in order of severity, as charts stack them."""
LABEL_CHARS: Final = 28
MEMBERS_SHOWN: Final = 240
"""Members a pool's map draws; the rest are counted in words."""


class Bar(NamedTuple):
    """One row of a bar chart."""

    label: str
    counts: Mapping[str, int]
    """Level label -> count."""


def donut(counts: Mapping[str, int], caption: str) -> str:
    """A ring of the ``counts`` by level, the total in its middle, and a legend."""
    total = sum(counts.get(level, 0) for level in LEVELS)
    parts = [
        f'<div class="ring"><svg viewBox="0 0 42 42" width="150" height="150" role="img" '
        f'aria-label="{text(caption)}"><title>{text(caption)}</title>',
        '<circle class="s-track" cx="21" cy="21" r="15.915" fill="none" stroke-width="5"/>',
    ]
    start = 0.0
    for level in LEVELS:
        count = counts.get(level, 0)
        if not count or not total:
            continue
        share = 100.0 * count / total
        parts.append(
            f'<circle class="s-{level}" cx="21" cy="21" r="15.915" fill="none" '
            f'stroke-width="5" stroke-dasharray="{share:.3f} {100 - share:.3f}" '
            f'stroke-dashoffset="{25 - start:.3f}"><title>{count:,} {level}</title></circle>'
        )
        start += share
    size = "big" if total < 10_000 else "mid"  # five digits and a comma fill the hole
    parts.append(
        f'<text class="{size}" x="21" y="22.5" text-anchor="middle">{total:,}</text>'
        '<text class="small" x="21" y="27" text-anchor="middle">findings</text></svg>'
    )
    legend = "".join(
        f'<li><span class="key k-{level}"></span>{counts.get(level, 0):,} {level}</li>'
        for level in LEVELS
    )
    return "".join(parts) + f'<ul class="legend">{legend}</ul></div>'


def bars(rows: Sequence[Bar], caption: str, more: int = 0) -> str:
    """Horizontal bars, one per row, stacked by level; ``more`` rows left out."""
    label_width, bar_width, height = 180, 220, 22
    top = max((sum(row.counts.values()) for row in rows), default=0) or 1
    chart_height = height * len(rows) + 4
    parts = [
        f'<svg viewBox="0 0 {label_width + bar_width + 60} {chart_height}" role="img" '
        f'aria-label="{text(caption)}"><title>{text(caption)}</title>'
    ]
    for index, row in enumerate(rows):
        y = index * height + 2
        total = sum(row.counts.values())
        detail = ", ".join(f"{row.counts[lv]:,} {lv}" for lv in LEVELS if row.counts.get(lv))
        parts.append(
            f"<g><title>{text(row.label)}: {detail}</title>"
            f'<text x="0" y="{y + 15}">{text(_short(row.label))}</text>'
            f'<rect class="f-track" x="{label_width}" y="{y + 3}" width="{bar_width}" '
            f'height="{height - 7}"/>'
        )
        x = float(label_width)
        for level in LEVELS:
            count = row.counts.get(level, 0)
            if count:
                width = bar_width * count / top
                parts.append(
                    f'<rect class="f-{level}" x="{x:.1f}" y="{y + 3}" width="{width:.1f}" '
                    f'height="{height - 7}"/>'
                )
                x += width
        parts.append(f'<text class="c" x="{x + 6:.1f}" y="{y + 15}">{total:,}</text></g>')
    parts.append("</svg>")
    if more > 0:
        parts.append(f'<p class="muted">and {more:,} more</p>')
    return "".join(parts)


def members(states: Sequence[str], caption: str) -> str:
    """One square per pool member, coloured by its worst finding (``clean`` for none)."""
    shown = states[:MEMBERS_SHOWN]
    per_row, size, gap = 24, 10, 3
    rows = (len(shown) + per_row - 1) // per_row or 1
    width = min(len(shown), per_row) * (size + gap) or size
    parts = [
        f'<svg viewBox="0 0 {width} {rows * (size + gap)}" width="{width}" '
        f'height="{rows * (size + gap)}" role="img" aria-label="{text(caption)}">'
        f"<title>{text(caption)}</title>"
    ]
    for index, state in enumerate(shown):
        x, y = (index % per_row) * (size + gap), (index // per_row) * (size + gap)
        parts.append(
            f'<rect class="f-{state}" x="{x}" y="{y}" width="{size}" height="{size}" rx="2"/>'
        )
    parts.append("</svg>")
    if len(states) > len(shown):
        parts.append(f'<p class="muted">{len(states) - len(shown):,} more not drawn</p>')
    return "".join(parts)


def _short(label: str) -> str:
    return label if len(label) <= LABEL_CHARS else label[: LABEL_CHARS - 1] + "…"
