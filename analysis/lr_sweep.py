"""The learning-rate sweep (experiment lr_sweep): ACCO's paired gap to DDP at equal samples, per rate,
and the rate DDP does best at, which fig6 runs at (conf/experiment_info/fig6.yaml lr_choice).

`rows(root, scale)` gives one row per learning rate (DDP's final loss over seeds and its seed spread,
ACCO's mean paired gap with its interval at the fixed n of DESIGN, the final loss's margin and the
verdict of analysis/stats.py); `ddp_best_lr(...)` applies fig6's rule; `figure(...)` draws both
panels: the final losses against the rate, and the gap with its interval against each rate's margin."""

from __future__ import annotations

import numpy as np

from analysis.comparisons import Group, compare_look
from analysis.load import ACCO, BASELINE, Run, discover_runs
from analysis.measures import final_loss
from analysis.render import MissingRuns, finish_figure, plt
from analysis.stats import Design

EXP = "lr_sweep"
DESIGN = Design((3,))  # a fixed n of 3 paired seeds per rate, stated in conf/experiment/lr_sweep/cpu.yaml


def lr_of(run: Run) -> float:
    return float(run.config["optim"]["lr"])


def spread_pct(group: Group) -> float:
    """DDP's seed-to-seed spread of final loss: (max - min) / mean, in percent."""
    v = group.values(final_loss)
    return 100.0 * float(np.nanmax(v) - np.nanmin(v)) / float(np.nanmean(v)) if len(v) > 1 else float("nan")


def rows(root: str, scale: str = "cpu") -> list[dict]:
    runs = discover_runs(root, EXP, scale)
    if not runs:
        raise MissingRuns(f"no completed {EXP} runs at scale {scale}")
    out = []
    for lr in sorted({lr_of(r) for r in runs}):
        at = [r for r in runs if lr_of(r) == lr]
        ddp = Group("DDP", [r for r in at if r.method == BASELINE])
        acco = Group("ACCO", [r for r in at if r.method == ACCO])
        if not ddp.runs or not acco.runs:
            continue
        look = compare_look(acco, ddp, "final_loss", DESIGN)
        verdict, gap = look.verdict, look.gap
        out.append(
            {
                "lr": lr,
                "ddp_final": ddp.mean(final_loss),
                "ddp_spread_pct": spread_pct(ddp),
                "acco_final": acco.mean(final_loss),
                "gap": gap,
                "margin_pct": look.margin_pct,
                "look": look,
                "verdict": verdict,
            }
        )
    if not out:
        raise MissingRuns(f"no learning rate with both DDP and ACCO runs in {EXP}")
    return out


def ddp_means(root: str, scale: str = "cpu") -> dict[float, tuple[float, int]]:
    """rate -> (DDP's mean final training loss, its number of seeds) over the sweep's DDP runs."""
    runs = [r for r in discover_runs(root, EXP, scale) if r.method == BASELINE]
    out = {}
    for lr in sorted({lr_of(r) for r in runs}):
        g = Group("DDP", [r for r in runs if lr_of(r) == lr])
        out[lr] = (g.mean(final_loss), len(g.runs))
    return out


def ddp_best_lr(root: str, scale: str = "cpu") -> float:
    """fig6's rule (conf/experiment_info/fig6.yaml lr_choice): the rate with DDP's lowest mean final
    training loss among the sweep's DDP runs; nan without any."""
    means = {lr: m for lr, (m, _) in ddp_means(root, scale).items() if m == m}
    return min(means, key=means.__getitem__) if means else float("nan")


def figure(root: str, scale: str = "cpu", save: bool = True):
    data = rows(root, scale)
    lrs = np.array([r["lr"] for r in data])
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    runs = discover_runs(root, EXP, scale)
    for method, color, label, key in (
        (BASELINE, "C0", "DDP (accum 2)", "ddp_final"),
        (ACCO, "C3", "ACCO (accum 1)", "acco_final"),
    ):
        pts = [(lr_of(r), final_loss(r)) for r in runs if r.method == method]
        left.scatter([p[0] for p in pts], [p[1] for p in pts], s=12, color=color, alpha=0.5)
        left.plot(lrs, [r[key] for r in data], "-o", color=color, label=label)
    left.set_xscale("log")
    left.set_xlabel("peak learning rate")
    left.set_ylabel("final training loss (last 10 % of the samples)")
    left.set_title("final loss per seed (dots) and mean")
    left.legend()
    mean = np.array([r["gap"].mean_pct for r in data])
    lo = np.array([r["gap"].lo_pct for r in data])
    hi = np.array([r["gap"].hi_pct for r in data])
    margin = np.array([r["margin_pct"] for r in data])
    right.fill_between(lrs, -margin, margin, color="0.85", label="±m: one sd of DDP's seed spread")
    right.axhline(0, color="0.5", lw=0.8)
    right.errorbar(
        lrs,
        mean,
        yerr=[mean - lo, hi - mean],
        fmt="o-",
        color="C3",
        capsize=4,
        label=f"ACCO vs DDP, {DESIGN.confidence:.0%} CI (fixed n = {DESIGN.looks[0]})",
    )
    for lr, r in zip(lrs, data):
        right.annotate(f"n={r['gap'].n}", (lr, r["gap"].hi_pct), textcoords="offset points", xytext=(0, 4), ha="center")
    right.set_xscale("log")
    right.set_xlabel("peak learning rate")
    right.set_ylabel("ACCO's final loss vs DDP's, paired by seed (%)")
    right.set_title("dynamics at equal samples: ACCO's gap to DDP")
    right.legend()
    for ax in (left, right):  # the swept rates themselves, not log-scale minor ticks over each other
        ax.set_xticks(lrs)
        ax.set_xticklabels([f"{lr:g}" for lr in lrs])
        ax.minorticks_off()
    fig.suptitle("Learning-rate sweep — ACCO vs DDP at equal samples (question: dynamics)")
    fig.tight_layout()
    return finish_figure(fig, root, EXP, scale, save)
