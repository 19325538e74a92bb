"""Inline SVG charts for the HTML report: drawn here, so the report needs no script, no CDN
and no server to show them (and a CI artifact viewer that blocks scripts still shows them)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

ROW_H = 22
LABEL_W = 190
BAR_W = 320
VALUE_W = 110
PASS_COLOUR = "#2e9d5b"
FAIL_COLOUR = "#d2483f"
BASE_COLOUR = "#8a96a8"
CAND_COLOUR = "#3c6fd1"


@dataclass(frozen=True)
class Bar:
    label: str
    value: float  # 0..1 for rates, else an amount scaled against the largest
    text: str
    colour: str = PASS_COLOUR


def _clip(label: str, limit: int = 28) -> str:
    return label if len(label) <= limit else label[: limit - 1] + "…"


def hbar_chart(title: str, bars: Sequence[Bar], *, scale: float | None = None) -> str:
    """Horizontal bars, one row per item, the value printed at the end of each bar."""
    top = 26
    height = top + ROW_H * max(1, len(bars)) + 8
    width = LABEL_W + BAR_W + VALUE_W
    biggest = scale if scale is not None else max((b.value for b in bars), default=0.0) or 1.0
    parts = [
        f'<svg class="chart" role="img" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" xmlns="http://www.w3.org/2000/svg">',
        f"<title>{escape(title)}</title>",
        f'<text x="0" y="16" class="chart-title">{escape(title)}</text>',
    ]
    for i, bar in enumerate(bars):
        y = top + i * ROW_H
        w = 0.0 if biggest <= 0 else max(0.0, min(1.0, bar.value / biggest)) * BAR_W
        parts.append(
            f'<g class="bar" data-label="{escape(bar.label)}">'
            f'<text x="{LABEL_W - 6}" y="{y + 15}" text-anchor="end" class="bar-label">'
            f"{escape(_clip(bar.label))}</text>"
            f'<rect x="{LABEL_W}" y="{y + 3}" width="{BAR_W}" height="{ROW_H - 6}" '
            f'fill="#eef0f3"/>'
            f'<rect x="{LABEL_W}" y="{y + 3}" width="{w:.1f}" height="{ROW_H - 6}" '
            f'fill="{bar.colour}"/>'
            f'<text x="{LABEL_W + BAR_W + 6}" y="{y + 15}" class="bar-value">'
            f"{escape(bar.text)}</text></g>"
        )
    parts.append("</svg>")
    return "".join(parts)


def paired_chart(title: str, rows: Sequence[tuple[str, float, float, str, str]]) -> str:
    """Baseline vs candidate: two thin bars per row (value in 0..1), grey then blue."""
    top = 40
    pair_h = 28
    height = top + pair_h * max(1, len(rows)) + 8
    width = LABEL_W + BAR_W + 2 * VALUE_W
    parts = [
        f'<svg class="chart" role="img" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" xmlns="http://www.w3.org/2000/svg">',
        f"<title>{escape(title)}</title>",
        f'<text x="0" y="16" class="chart-title">{escape(title)}</text>',
        f'<rect x="{LABEL_W}" y="24" width="10" height="10" fill="{BASE_COLOUR}"/>'
        f'<text x="{LABEL_W + 14}" y="33" class="legend">baseline</text>'
        f'<rect x="{LABEL_W + 90}" y="24" width="10" height="10" fill="{CAND_COLOUR}"/>'
        f'<text x="{LABEL_W + 104}" y="33" class="legend">candidate</text>',
    ]
    for i, (label, base, cand, base_text, cand_text) in enumerate(rows):
        y = top + i * pair_h
        parts.append(
            f'<g class="pair" data-label="{escape(label)}">'
            f'<text x="{LABEL_W - 6}" y="{y + 16}" text-anchor="end" class="bar-label">'
            f"{escape(_clip(label))}</text>"
            f'<rect x="{LABEL_W}" y="{y + 2}" width="{max(0.0, min(1.0, base)) * BAR_W:.1f}" '
            f'height="10" fill="{BASE_COLOUR}"/>'
            f'<rect x="{LABEL_W}" y="{y + 13}" width="{max(0.0, min(1.0, cand)) * BAR_W:.1f}" '
            f'height="10" fill="{CAND_COLOUR}"/>'
            f'<text x="{LABEL_W + BAR_W + 6}" y="{y + 16}" class="bar-value">'
            f"{escape(base_text)} → {escape(cand_text)}</text></g>"
        )
    parts.append("</svg>")
    return "".join(parts)


def histogram(title: str, values: Sequence[float], *, unit: str, bins: int = 10) -> str:
    """Counts of values in equal-width bins, with the range printed under the axis."""
    width, height = LABEL_W + BAR_W + VALUE_W, 170
    left, bottom, plot_h = 40, height - 34, 100
    plot_w = width - left - 10
    parts = [
        f'<svg class="chart" role="img" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" xmlns="http://www.w3.org/2000/svg">',
        f"<title>{escape(title)}</title>",
        f'<text x="0" y="16" class="chart-title">{escape(title)}</text>',
    ]
    if not values:
        parts.append('<text x="40" y="80" class="bar-label">no completed samples</text></svg>')
        return "".join(parts)
    lo, hi = min(values), max(values)
    span = hi - lo
    n_bins = 1 if span == 0 else bins
    counts = [0] * n_bins
    for v in values:
        i = 0 if span == 0 else min(n_bins - 1, math.floor((v - lo) / span * n_bins))
        counts[i] += 1
    most = max(counts)
    bw = plot_w / n_bins
    for i, count in enumerate(counts):
        h = plot_h * count / most
        x = left + i * bw
        parts.append(
            f'<rect class="bin" x="{x + 1:.1f}" y="{bottom - h:.1f}" width="{bw - 2:.1f}" '
            f'height="{h:.1f}" fill="{CAND_COLOUR}"><title>{count}</title></rect>'
        )
        if count:
            parts.append(
                f'<text x="{x + bw / 2:.1f}" y="{bottom - h - 3:.1f}" text-anchor="middle" '
                f'class="bin-count">{count}</text>'
            )
    parts.append(
        f'<line x1="{left}" y1="{bottom}" x2="{left + plot_w}" y2="{bottom}" stroke="#999"/>'
        f'<text x="{left}" y="{bottom + 16}" class="axis">{escape(_amount(lo, unit))}</text>'
        f'<text x="{left + plot_w}" y="{bottom + 16}" text-anchor="end" class="axis">'
        f"{escape(_amount(hi, unit))}</text>"
        f'<text x="{left + plot_w / 2:.1f}" y="{bottom + 30}" text-anchor="middle" '
        f'class="axis">{len(values)} sample(s)</text>'
    )
    parts.append("</svg>")
    return "".join(parts)


def _amount(value: float, unit: str) -> str:
    if unit == "USD":
        return f"${value:.6f}"
    return f"{value:,.1f} {unit}"
