"""Inline SVG chart of the surface × reason-code table: one horizontal stacked bar per
surface, one segment per reason code (colour fixed by the code's registry position),
a ``<title>`` tooltip on every segment and a legend.  Pure string building: no
fonts, no scripts, no external references; the same table gives the same bytes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from xml.sax.saxutils import escape

from shadow import codes

# 24 distinguishable colours (Tableau 20 + 4 dark ones), by position among the chart's codes.
_PALETTE = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#b07aa1", "#edc948", "#76b7b2",
            "#ff9da7", "#9c755f", "#a0cbe8", "#ffbe7d", "#8cd17d", "#b6992d", "#499894",
            "#d37295", "#fabfd2", "#79706e", "#d4a6c8", "#d7b5a6", "#bab0ac", "#393b79",
            "#637939", "#8c6d31", "#843c39")
_INDEX = {c.code: i for i, c in enumerate(codes.codes())}


def colour(code: str, present: list[str] | None = None) -> str:
    """By position among the codes in this chart (distinct up to 24), else the registry."""
    if present and code in present and len(present) <= len(_PALETTE):
        return _PALETTE[present.index(code)]
    return _PALETTE[_INDEX.get(code, len(_PALETTE) - 1) % len(_PALETTE)]


def stacked_bars(table: Mapping[str, Any], *, width: int = 960) -> str:
    """``table`` is :meth:`shadow.reports.views.Tally.matrix`'s output."""
    rows = table["rows"]
    code_list = [c["code"] for c in table["codes"]]
    if not rows:
        return ('<svg role="img" width="320" height="40" '
                'aria-label="no divergences"><text x="8" y="24" font-size="14">'
                'no divergences</text></svg>')
    longest = max(len(r["surface"]) for r in rows)
    label_w = min(440, 16 + 7 * longest)  # ~7 px per character at 12 px
    bar_h, gap, top = 18, 6, 8
    plot_w = width - label_w - 60
    biggest = max(r["total"] for r in rows) or 1
    legend_cols = 3
    legend_rows = (len(code_list) + legend_cols - 1) // legend_cols
    chart_h = top + len(rows) * (bar_h + gap)
    height = chart_h + 16 + legend_rows * 18 + 8
    out = [f'<svg role="img" width="{width}" '
           f'height="{height}" viewBox="0 0 {width} {height}" '
           f'aria-label="unwaived divergences per surface, stacked by reason code" '
           f'font-family="system-ui, sans-serif" font-size="12">']
    for i, r in enumerate(rows):
        y = top + i * (bar_h + gap)
        label = r["surface"] if len(r["surface"]) <= 60 else "…" + r["surface"][-59:]
        out.append(f'<a href="#{r["anchor"]}"><text x="{label_w - 8}" y="{y + 13}" '
                   f'text-anchor="end">{escape(label)}</text></a>')
        x = float(label_w)
        for code, n in zip(code_list, r["counts"], strict=True):
            if not n:
                continue
            w = plot_w * n / biggest
            out.append(f'<rect x="{x:.2f}" y="{y}" width="{w:.2f}" height="{bar_h}" '
                       f'fill="{colour(code, code_list)}"><title>{escape(r["surface"])}: '
                       f'{escape(code)} × {n}</title></rect>')
            x += w
        out.append(f'<text x="{x + 6:.2f}" y="{y + 13}">{r["total"]}</text>')
    for j, code in enumerate(code_list):
        lx = 8 + (j % legend_cols) * (width // legend_cols)
        ly = chart_h + 16 + (j // legend_cols) * 18
        out.append(f'<rect x="{lx}" y="{ly - 10}" width="12" height="12" '
                   f'fill="{colour(code, code_list)}"/><text x="{lx + 18}" y="{ly}">'
                   f'{escape(code)}</text>')
    out.append("</svg>")
    return "\n".join(out)
