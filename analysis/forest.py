"""The picture REPORT.md opens with: every claim's paired interval against its margin (a forest plot).

One row per claim of analysis/claims.py, grouped by what it measures — the loss at equal work, time
measured on this machine, time modelled on the virtual clock — and within that by figure. A row is
the claim's mean relative gap of A against B (%) with its interval at the look the verdict was taken
at, over a grey band of the margin ±m it is held against (none for a difference of two gaps, or a
modelled time: no noise), coloured by the verdict; a filled marker where the verdict is the one the
paper implies, hollow where it is not. The gap axis is linear within ±10 % and logarithmic beyond,
so a +200 % speed-up and a ±0.5 % margin both read. Written with the report (analysis/report.py),
from the same outcomes as its claims table.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from analysis.claims import claim_clock
from analysis.render import save_figure

VERDICT_COLORS = {
    "matches": "#2e7d32",
    "better": "#1565c0",
    "worse": "#c62828",
    "inconclusive": "#757575",
    "needs more seeds": "#ef6c00",
    "not run": "#bdbdbd",
    "inconclusive (Holm)": "#9e9e9e",
    "outside the validated range": "#d7ccc8",
}
BLOCKS = (
    ("dynamics", "loss at equal work"),
    ("measured", "wall-clock, measured on this machine"),
    ("virtual", "wall-clock, modelled (virtual clock)"),
)
LINEAR_WITHIN = 10.0  # % : the gap axis is linear inside ±this, logarithmic beyond


@dataclass(frozen=True)
class Row:
    figure: str
    block: str  # dynamics | measured | virtual
    name: str
    verdict: str  # a Verdict's value, or "not run"
    reproduced: bool | None
    mean: float = math.nan
    lo: float = math.nan
    hi: float = math.nan
    margin: float = math.nan  # ±m in %, nan: none


def row_of(exp: str, claim, outcome) -> Row:
    """A claim (analysis/claims.py Claim) and its ClaimOutcome as one row of the plot."""
    block = "dynamics" if claim.question == "dynamics" else "virtual" if claim_clock(claim) == "virtual" else "measured"
    verdict = "not run" if outcome.verdict is None else outcome.verdict.value
    look = outcome.look
    if look is None or look.gap.n == 0:
        return Row(exp, block, claim.name, verdict, outcome.reproduced)
    gap = look.gap
    margin = look.margin_pct if look.margin_pct == look.margin_pct and look.margin_pct > 0 else math.nan
    lo, hi = (gap.lo_pct, gap.hi_pct) if gap.n > 1 else (gap.mean_pct, gap.mean_pct)
    return Row(exp, block, claim.name, verdict, outcome.reproduced, gap.mean_pct, lo, hi, margin)


def forest_figure(rows: list[Row], caption: str | None = None):
    """The matplotlib figure of the rows (blocks in BLOCKS' order, figures in the rows' order)."""
    ordered: list[tuple[str, Row | None]] = []  # (a heading, or a row)
    for block, title in BLOCKS:
        here = [r for r in rows if r.block == block]
        if not here:
            continue
        ordered.append((title, None))
        ordered += [("", r) for r in here]
    height = 0.6 + 0.24 * len(ordered)
    fig, ax = plt.subplots(figsize=(11, height))
    y = len(ordered)
    ticks, labels = [], []
    last_figure = None
    for heading, row in ordered:
        y -= 1
        if row is None:
            ax.text(
                0.0,
                y,
                heading,
                transform=ax.get_yaxis_transform(),
                ha="right",
                va="center",
                fontsize=9,
                fontweight="bold",
            )
            ax.axhline(y - 0.5, color="0.85", lw=0.6)
            last_figure = None
            continue
        ticks.append(y)
        prefix = f"{row.figure}: " if row.figure != last_figure else ""
        labels.append(f"{prefix}{row.name}")
        last_figure = row.figure
        colour = VERDICT_COLORS.get(row.verdict, "black")
        if row.margin == row.margin:
            ax.fill_betweenx([y - 0.35, y + 0.35], -row.margin, row.margin, color="0.88", lw=0)
        if row.mean == row.mean:
            ax.plot([row.lo, row.hi], [y, y], color=colour, lw=1.6, solid_capstyle="butt")
            ax.plot(
                [row.mean],
                [y],
                marker="o",
                ms=5,
                color=colour,
                markerfacecolor=colour if row.reproduced else "white",
                markeredgewidth=1.3,
            )
        else:
            ax.text(0, y, row.verdict, ha="center", va="center", fontsize=7, color=colour)
    ax.axvline(0, color="0.4", lw=0.8)
    ax.set_xscale("symlog", linthresh=LINEAR_WITHIN, linscale=1.5)
    ends = [abs(v) for r in rows for v in (r.lo, r.hi, r.margin) if v == v] or [LINEAR_WITHIN]
    reach = max(LINEAR_WITHIN, max(ends)) * 1.4
    ax.set_xlim(-reach, reach)
    marks = [m for m in (2, 5, 10, 20, 50, 100, 200, 500, 1000) if m < reach]
    ax.set_xticks([-m for m in reversed(marks)] + [0] + marks)
    ax.set_xticklabels([f"{-m:+d}" for m in reversed(marks)] + ["0"] + [f"{m:+d}" for m in marks])
    ax.set_yticks(ticks)
    ax.set_yticklabels(labels, fontsize=7)
    ax.set_ylim(-0.7, len(ordered) - 0.3)
    ax.set_xlabel(
        "A against B, paired by seed: mean relative gap (%) and its interval at the look "
        "(linear within ±10 %, logarithmic beyond)",
        fontsize=8,
    )
    ax.tick_params(axis="x", labelsize=7)
    ax.grid(axis="x", alpha=0.3)
    handles: list[Any] = [
        plt.Line2D([], [], color=c, marker="o", lw=1.6, label=v)
        for v, c in VERDICT_COLORS.items()
        if any(r.verdict == v for r in rows)
    ]
    handles += [
        plt.Line2D([], [], color="black", marker="o", lw=0, markerfacecolor="black", label="claim reproduced"),
        plt.Line2D([], [], color="black", marker="o", lw=0, markerfacecolor="white", label="not reproduced"),
        plt.Rectangle((0, 0), 1, 1, color="0.88", label="margin ±m"),
    ]
    ax.legend(
        handles=handles, fontsize=7, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=len(handles), frameon=False
    )
    reproduced = sum(r.reproduced is True for r in rows)
    caption = caption or f"{reproduced} of {len(rows)} claims reproduced (verdict as the paper's)"
    ax.set_title(caption, fontsize=10, pad=22)
    return fig


def write_forest(rows: list[Row], directory: str, caption: str | None = None) -> list[str]:
    """claims.png and claims.pdf in `directory` (byte-identical from the same rows); [] without rows."""
    if not rows:
        return []
    fig = forest_figure(rows, caption)
    paths = save_figure(fig, directory, "claims")
    plt.close(fig)
    return paths


def image_line(scale_dir: str, paths: list[str]) -> str:
    """The report's Markdown image of the plot (its path relative to the report's folder)."""
    png = next((p for p in paths if p.endswith(".png")), None)
    return f"![every claim against its margin]({os.path.relpath(png, scale_dir)})" if png else ""
