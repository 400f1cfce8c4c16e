"""The paper's figures, from a results folder alone (matplotlib, Agg backend).

One function per figure id — `fig4(root, scale)`, `fig5(...)`, … `fig11(...)` — each returns the
matplotlib Figure and (with `save=True`) writes `<root>/<exp>/<scale>/figures/<id>.png` and `.pdf`;
the paths written are in `fig.saved_paths`. A figure whose runs are missing raises `MissingRuns`.
`timeline(trace_path)` draws the compute / communication lanes of one run's trace.json.

Conventions: one line per run group, labelled "DDP", "ACCO", "WP", "DPU", "DPU warmup=<w>" (Fig. 5),
"DPU accum=<a>" (Fig. 10); a group of several seeds is drawn as the per-step mean with a min–max
band (`fill_between`). Training losses are smoothed by a trailing rolling mean when a curve has
more than 100 points (window n/50), as long-run loss curves are in the paper.
"""

from __future__ import annotations

import os
import re

import numpy as np
import pandas as pd
from matplotlib.patches import Patch

from acco.config.experiments import experiment_block, experiment_dir, run_specs
from acco.engine.trace import load_spans, summarize_overlap
from analysis import beyond_diloco as bd
from analysis import lr_sweep as sweep_of_lr
from analysis import outer_sweep as sweep_of_outer
from analysis.ladder import budget_of, rungs
from analysis.load import ACCO, BASELINE, DPU, Run, discover_runs, load_experiment, method_label
from analysis.render import MissingRuns, figures_dir, finish_figure, plt, save_figure, saved_paths, set_saved_paths

COLORS = {"ddp": "C0", "ddp_overlap": "C9", "acco": "C3", "dpu": "C2", "wp": "C1"}
METHOD_ORDER = ["ddp", "ddp_overlap", "dpu", "wp", "acco"]
FIGURE_IDS = ["fig4", "fig5", "fig6", "fig7", "fig8", "fig9", "fig10", "fig11"]
TIME_LABEL = "wall-clock time"


def _load(root: str, exp: str, scale: str) -> pd.DataFrame:
    df = load_experiment(root, exp, scale)
    if df.empty:
        raise MissingRuns(f"no completed runs under {experiment_dir(root, scale, exp)}")
    return df


def _time_unit(seconds: float) -> tuple[float, str]:
    if seconds > 3 * 3600:
        return 3600.0, "h"
    if seconds > 300:
        return 60.0, "min"
    return 1.0, "s"


def _smooth(y: pd.Series, window: int | None) -> pd.Series:
    if window is None:
        window = max(1, len(y) // 50) if len(y) > 100 else 1
    return y.rolling(window, min_periods=1).mean() if window > 1 else y


def _method_key(method: str) -> int:
    return METHOD_ORDER.index(method) if method in METHOD_ORDER else len(METHOD_ORDER)


def _plot_group(
    ax,
    df: pd.DataFrame,
    x: str,
    y: str,
    label: str,
    color: str | tuple[float, float, float, float],
    scale_x: float = 1.0,
    smooth: int | None = None,
    marker: str | None = None,
    linestyle: str = "-",
):
    """One run: a line. Several runs (seeds): the per-step mean, with a min–max band."""
    df = df.dropna(subset=[y])
    runs = list(df["run"].unique())
    if len(runs) == 1:
        d = df.sort_values("step")
        (line,) = ax.plot(
            d[x].to_numpy() / scale_x,
            _smooth(d[y], smooth).to_numpy(),
            label=label,
            color=color,
            marker=marker,
            linestyle=linestyle,
        )
        return line
    per_run = {
        r: d.sort_values("step").assign(_y=lambda t: _smooth(t[y], smooth).to_numpy()) for r, d in df.groupby("run")
    }
    stacked = pd.concat(per_run.values())
    agg = stacked.groupby("step").agg(
        x=(x, "mean"), mean=("_y", "mean"), lo=("_y", "min"), hi=("_y", "max"), n=("_y", "size")
    )
    agg = agg[agg["n"] == len(runs)]  # steps every seed reached
    xs = agg["x"].to_numpy() / scale_x
    (line,) = ax.plot(
        xs,
        agg["mean"].to_numpy(),
        label=f"{label} (mean of {len(runs)} seeds)",
        color=color,
        marker=marker,
        linestyle=linestyle,
    )
    ax.fill_between(
        xs, agg["lo"].to_numpy(), agg["hi"].to_numpy(), color=color, alpha=0.2, linewidth=0, label=f"_band {label}"
    )
    return line


def _group_label(method: str, key) -> str:
    return method_label(method) if key is None else f"{method_label(method)} {key}"


def _plot_curves(
    ax,
    df: pd.DataFrame,
    x: str,
    y: str,
    by: str | None = None,
    methods: list[str] | None = None,
    smooth: int | None = None,
    marker=None,
    xlabel: str | None = None,
    ylabel: str = "training loss",
) -> None:
    """One group per method (and per value of `by` within a method that varies it)."""
    if df.empty:
        ax.text(0.5, 0.5, "no runs", ha="center", va="center", transform=ax.transAxes)
        ax.set_xlabel(xlabel or x)
        ax.set_ylabel(ylabel)
        return
    unit, suffix = _time_unit(df["wall_time_s"].max()) if x == "wall_time_s" else (1.0, "")
    styles = ["-", "--", ":", "-."]
    for method in sorted(df["method"].unique(), key=_method_key):
        if methods and method not in methods:
            continue
        dm = df[df["method"] == method]
        keys = [None]
        if by is not None and dm[by].notna().any():
            keys = sorted(dm[by].dropna().unique())
        for i, key in enumerate(keys):
            dk = dm if key is None else dm[dm[by] == key]
            label = _group_label(method, None if key is None else f"{by}={_fmt(key)}")
            color: str | tuple[float, float, float, float] = COLORS.get(method, "k")
            if len(keys) > 1:  # shades of the method's colour
                color = plt.get_cmap({"dpu": "Greens", "wp": "Oranges", "acco": "Reds"}.get(method, "Blues"))(
                    0.45 + 0.5 * i / max(1, len(keys) - 1)
                )
            _plot_group(
                ax,
                dk,
                x,
                y,
                label,
                color,
                scale_x=unit,
                smooth=smooth,
                marker=marker,
                # DPU's warmups: shades of one colour, every line solid
                linestyle=styles[i % len(styles)] if len(keys) > 1 and method != DPU else "-",
            )
    if x == "wall_time_s":
        ax.set_xlabel(f"{TIME_LABEL} ({suffix})")
    else:
        ax.set_xlabel(xlabel or x)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)


def _plot_seeds(ax, df: pd.DataFrame, x: str, methods=(BASELINE, ACCO), smooth: int | None = None) -> None:
    """Every seed's own curve: one colour per seed, one line style per method (the seed spread and the
    per-seed pairing the report's intervals are computed from)."""
    d = df[df["method"].isin(methods)].dropna(subset=["train_loss"])
    if d.empty:
        ax.text(0.5, 0.5, "no runs", ha="center", va="center", transform=ax.transAxes)
    seeds = sorted(d["seed"].dropna().unique())
    cmap = plt.get_cmap("tab10")
    for i, seed in enumerate(seeds):
        for method, style in zip(methods, ["-", "--", ":"]):
            run = d[(d["seed"] == seed) & (d["method"] == method)].sort_values("step")
            if run.empty:
                continue
            label = f"{method_label(method)} seed {_fmt(seed)}" if i < 10 else None
            ax.plot(run[x], _smooth(run["train_loss"], smooth), color=cmap(i % 10), linestyle=style, lw=1, label=label)
    ax.set_xlabel(x)
    ax.set_ylabel("training loss")
    ax.grid(alpha=0.3)
    if seeds:
        ax.legend(fontsize=6, ncol=2)


def _fmt(v) -> str:
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def _title(fig, df: pd.DataFrame, text: str) -> None:
    workers = sorted(int(w) for w in df["world_size"].dropna().unique()) if not df.empty else []
    extra = f" — {', '.join(map(str, workers))} workers" if workers else ""
    fig.suptitle(text + extra)


# -- the figures -------------------------------------------------------------------------------
def fig5(root: str, scale: str = "cpu", save: bool = True, smooth: int | None = None):
    """TinyStories: DDP vs DPU (each warmup, seeds as mean + min–max band) vs ACCO. Columns: (a) the
    base budget, (b) the 2× budget (the largest `train.steps`); rows: loss vs wall-clock time (the
    paper's panels) and loss vs samples."""
    df = _load(root, "fig5", scale)
    budgets = sorted(int(s) for s in df["steps"].dropna().unique())
    fig, axes = plt.subplots(3, 2, figsize=(12, 12), squeeze=False)
    panels = [("(a)", budgets[0]), ("(b)", budgets[-1] if len(budgets) > 1 else None)]
    for col, (tag, budget) in enumerate(panels):
        d = df[df["steps"] == budget] if budget is not None else df.iloc[0:0]
        for row, x in enumerate(["wall_time_s", "samples"]):
            ax = axes[row][col]
            _plot_curves(ax, d, x, "train_loss", by="warmup", smooth=smooth)
            ax.set_title(f"{tag} budget {budget} steps" if budget is not None else f"{tag} 2× budget: no runs")
        _plot_seeds(axes[2][col], d, "samples", smooth=smooth)
        axes[2][col].set_title(f"{tag} each seed: DDP (solid) and ACCO (dashed), paired by colour")
    _title(fig, df, "Fig. 5 — TinyStories: DDP vs DPU vs ACCO")
    fig.tight_layout()
    return finish_figure(fig, root, "fig5", scale, save)


def _two_panel(root, exp, scale, save, xs, title, by=None, smooth=None, ylabel="training loss", y="train_loss"):
    df = _load(root, exp, scale)
    fig, axes = plt.subplots(1, len(xs), figsize=(6 * len(xs), 4.5), squeeze=False)
    for ax, x in zip(axes[0], xs):
        _plot_curves(
            ax, df, x, y, by=by, smooth=smooth, ylabel=ylabel, xlabel={"step": "step", "samples": "samples"}.get(x, x)
        )
    _title(fig, df, title)
    fig.tight_layout()
    return finish_figure(fig, root, exp, scale, save)


def fig6(root: str, scale: str = "cpu", save: bool = True, smooth: int | None = None):
    """TinyStories: ACCO vs WP vs DDP; loss vs wall-clock time and vs samples."""
    return _two_panel(
        root, "fig6", scale, save, ["wall_time_s", "samples"], "Fig. 6 — TinyStories: ACCO vs WP vs DDP", smooth=smooth
    )


def fig7(root: str, scale: str = "cpu", save: bool = True, smooth: int | None = None):
    """GPT-Neo 125M on OpenWebText (4×8): training loss vs steps and vs wall-clock time."""
    return _two_panel(
        root, "fig7", scale, save, ["step", "wall_time_s"], "Fig. 7 — GPT-Neo pretraining: DDP vs ACCO", smooth=smooth
    )


def fig11(root: str, scale: str = "cpu", save: bool = True, smooth: int | None = None):
    """GPT-Neo 125M on OpenWebText (1×8): training loss vs steps and vs wall-clock time."""
    return _two_panel(
        root,
        "fig11",
        scale,
        save,
        ["step", "wall_time_s"],
        "Fig. 11 — GPT-Neo pretraining on one node: DDP vs ACCO",
        smooth=smooth,
    )


def fig9(root: str, scale: str = "cpu", save: bool = True, smooth: int | None = None):
    """One of 4 workers 4× slower: DDP vs ACCO, loss vs wall-clock time and vs samples."""
    df = _load(root, "fig9", scale)
    het = [
        re.sub(r"rank(\d+)x(.+)", r"rank \1 is \2× slower", h) for h in df["hetero"].dropna().unique() if h != "none"
    ]
    fig = _two_panel(
        root,
        "fig9",
        scale,
        False,
        ["wall_time_s", "samples"],
        "Fig. 9 — heterogeneous workers (" + (", ".join(het) or "none slower") + "): DDP vs ACCO",
        smooth=smooth,
    )
    return finish_figure(fig, root, "fig9", scale, save)


def fig10(root: str, scale: str = "cpu", save: bool = True, smooth: int | None = None):
    """DPU with 1 vs 2 accumulation steps per worker. With a budget ladder (runs sized by
    `train.samples`, analysis/ladder.py): (a) loss vs samples at the largest budget, (b) accum 1's
    paired gap to accum 2 at 25 % of the samples and at the end, against the budget, with the
    intervals the claims use. Without one: loss vs wall-clock time and vs samples."""
    runs = discover_runs(root, "fig10", scale)
    budgets = sorted({b for b in (budget_of(r) for r in runs) if b is not None})
    if len(budgets) < 2:
        return _two_panel(
            root,
            "fig10",
            scale,
            save,
            ["wall_time_s", "samples"],
            "Fig. 10 — DPU with 1 vs 2 accumulation steps",
            by="accum",
            smooth=smooth,
        )
    top = [r for r in runs if budget_of(r) == budgets[-1]]
    df = load_experiment(root, "fig10", scale, runs=top)
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    _plot_curves(left, df, "samples", "train_loss", by="accum", smooth=smooth, xlabel="samples")
    left.set_title(f"(a) the largest budget, {budgets[-1]} samples")
    rows = rungs(root, scale)
    for key, color, label in (("early", "C2", "at 25 % of the samples"), ("final", "C3", "at the end")):
        pts = [(r["samples"], r[key].look.gap) for r in rows if r[key].look is not None and r[key].look.gap.n > 1]
        if not pts:
            continue
        x = np.array([p[0] for p in pts], dtype=float)
        mean = np.array([g.mean_pct for _, g in pts])
        lo, hi = np.array([g.lo_pct for _, g in pts]), np.array([g.hi_pct for _, g in pts])
        right.errorbar(x, mean, yerr=[mean - lo, hi - mean], fmt="o-", color=color, capsize=4, label=label)
    right.axhline(0, color="0.5", lw=0.8)
    right.set_xscale("log", base=2)
    right.set_xticks(budgets)
    right.set_xticklabels([str(b) for b in budgets])
    right.minorticks_off()
    right.set_xlabel("budget (samples; each a cosine over its own budget)")
    right.set_ylabel("accum 1 vs accum 2, paired by seed (%)")
    right.set_title("(b) the gap against the budget (95 % CI, fixed n)")
    right.grid(alpha=0.3)
    right.legend(fontsize=8)
    _title(fig, df, "Fig. 10 — DPU with 1 vs 2 accumulation steps, budget ladder")
    fig.tight_layout()
    return finish_figure(fig, root, "fig10", scale, save)


def _layout_order(runs: list[Run], scale: str) -> list[str]:
    """Layouts in the order the experiment lists them (e.g. 1x8 then 2x4)."""
    order: list[str] = []
    for run in runs:
        for spec in run_specs(experiment_block(run.exp, scale)):
            values = spec.get("layout")
            for v in values if isinstance(values, list) else [values] if values else []:
                if str(v) not in order:
                    order.append(str(v))
        if order:
            break
    return order


def fig8(root: str, scale: str = "cpu", save: bool = True):
    """Instruction fine-tuning: one panel per node layout (nodes × workers per node), validation
    loss vs wall-clock time, DDP vs DPU vs ACCO."""
    runs = discover_runs(root, "fig8", scale)
    df = load_experiment(root, "fig8", scale, runs=runs)
    if df.empty:
        raise MissingRuns(f"no completed runs under {experiment_dir(root, scale, 'fig8')}")
    present = [str(v) for v in df["layout"].dropna().unique()]
    order = [lo for lo in _layout_order(runs, scale) if lo in present] + sorted(
        lo for lo in present if lo not in _layout_order(runs, scale)
    )
    fig, axes = plt.subplots(1, len(order), figsize=(6 * len(order), 4.5), squeeze=False, sharey=True)
    for ax, layout in zip(axes[0], order):
        d = df[df["layout"] == layout]
        _plot_curves(ax, d, "wall_time_s", "eval_loss", marker="o", ylabel="validation loss", smooth=1)
        nodes, per = (layout.split("x") + ["?"])[:2]
        ax.set_title(f"{layout}: {nodes} node(s) × {per} worker(s)")
    _title(fig, df, "Fig. 8 — instruction fine-tuning: DDP vs DPU vs ACCO")
    fig.tight_layout()
    return finish_figure(fig, root, "fig8", scale, save)


# -- Fig. 4: communication vs computation per step, from traces ---------------------------------
def step_times(trace_path: str) -> dict:
    """Per-step computation (sum of fwd+bwd spans before each sync) and communication (the sync
    span; its collectives alone as `collectives_s`), medians over steps (the first step is left out
    when there are more than two), averaged over ranks."""
    from acco.engine.trace import load_spans

    spans = load_spans(trace_path)
    per_rank = []
    for rank in sorted({e["pid"] for e in spans}):
        mine = [e for e in spans if e["pid"] == rank]
        syncs = sorted(
            (e for e in mine if e.get("cat") == "communication" and e["name"].startswith(("sync", "bwd + all_reduce"))),
            key=lambda e: e["ts"],
        )
        if not syncs:
            continue
        comp = [e for e in mine if e.get("cat") == "compute"]
        coll = [
            e
            for e in mine
            if e.get("cat") == "communication" and e["name"].startswith(("reduce_scatter", "all_gather", "all_reduce"))
        ]
        starts = np.array([s["ts"] for s in syncs])
        ends = np.array([s["ts"] + s["dur"] for s in syncs])
        comp_per = np.zeros(len(syncs))
        for e in comp:  # a micro-batch belongs to the first sync that starts after it
            i = int(np.searchsorted(starts, e["ts"]))
            if i < len(syncs):
                comp_per[i] += e["dur"]
        coll_per = np.zeros(len(syncs))
        for e in coll:
            i = int(np.searchsorted(starts, e["ts"], side="right")) - 1
            if 0 <= i < len(syncs) and e["ts"] <= ends[i]:
                coll_per[i] += e["dur"]
        comm_per = ends - starts
        keep = slice(1, None) if len(syncs) > 2 else slice(None)
        per_rank.append((np.median(comp_per[keep]), np.median(comm_per[keep]), np.median(coll_per[keep]), len(syncs)))
    if not per_rank:
        raise MissingRuns(f"{trace_path} has no sync spans")
    arr = np.array(per_rank, dtype=float)
    return {
        "compute_s": arr[:, 0].mean() / 1e6,
        "comm_s": arr[:, 1].mean() / 1e6,
        "collectives_s": arr[:, 2].mean() / 1e6,
        "steps": int(arr[:, 3].min()),
        "ranks": len(per_rank),
    }


def fig4_data(root: str, scale: str = "cpu") -> pd.DataFrame:
    runs = [r for r in discover_runs(root, "fig4", scale) if r.trace_path and r.method == BASELINE]
    flat = [r for r in runs if r.info.get("impl") == "flat"]
    runs = flat or runs  # the sequential flat sync keeps compute and communication spans apart
    rows = []
    for run in runs:
        assert run.trace_path  # the runs above have one
        try:
            t = step_times(run.trace_path)
        except (MissingRuns, OSError, ValueError, KeyError):
            continue
        rows.append(
            {
                "run": run.name,
                "workers": run.info["world_size"],
                "layout": run.info["layout"],
                "impl": run.info["impl"],
                **t,
                "comm_over_compute": t["comm_s"] / t["compute_s"] if t["compute_s"] > 0 else float("nan"),
            }
        )
    if not rows:
        raise MissingRuns(f"no ddp run with a trace.json under {experiment_dir(root, scale, 'fig4')}")
    return pd.DataFrame(rows).sort_values("workers").reset_index(drop=True)


def fig4(root: str, scale: str = "cpu", save: bool = True):
    """Communication (sync) vs computation (fwd+bwd) time per step against the number of workers,
    measured from the traces of the ddp runs; the numbers go to figures/fig4.csv too."""
    data = fig4_data(root, scale)
    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    w = data["workers"].to_numpy()
    ax.plot(w, data["compute_s"], marker="o", color="C0", label="computation (fwd+bwd)")
    ax.plot(w, data["comm_s"], marker="s", color="C1", label="communication (sync)")
    for x, c, m in zip(w, data["compute_s"], data["comm_s"]):
        ax.annotate(f"×{m / c:.2f}" if c > 0 else "", (x, m), textcoords="offset points", xytext=(4, 6), fontsize=8)
    ax.set_xlabel("number of workers")
    ax.set_ylabel("time per step (s)")
    ax.set_xticks(w)
    ax.grid(alpha=0.3)
    ax.legend()
    ax.set_title("Fig. 4 — communication vs computation per step (DDP + ZeRO-1)")
    fig.tight_layout()
    finish_figure(fig, root, "fig4", scale, save)
    if save:
        path = os.path.join(figures_dir(root, "fig4", scale), "fig4.csv")
        data.to_csv(path, index=False)
        saved_paths(fig).append(path)
    return fig


# -- overlap timeline ----------------------------------------------------------------------------
_TOP_COMM = ("sync", "bwd + all_reduce")


def timeline(
    trace_path: str,
    seconds: float = 3.0,
    start_s: float = 0.0,
    ranks: list[int] | None = None,
    title: str | None = None,
    out_path: str | None = None,
):
    """Per rank a compute lane (micro-batches; waiting in grey) and a communication lane (each sync,
    its collectives darker, its AdamW step green) over `seconds` from `start_s` after the trace's
    first event. With `out_path` (without extension) the PNG and PDF are written there."""
    spans = load_spans(trace_path)
    if not spans:
        raise MissingRuns(f"{trace_path} has no spans")
    t0 = min(e["ts"] for e in spans) + start_s * 1e6
    t1 = t0 + seconds * 1e6
    all_ranks = sorted({e["pid"] for e in spans})
    ranks = [r for r in (ranks if ranks is not None else all_ranks) if r in all_ranks]
    fig, ax = plt.subplots(figsize=(12, 0.9 * 2 * len(ranks) + 1.5))
    yticks, ylabels = [], []

    def bars(items, y, h, color, **kw):
        segs = [
            ((max(e["ts"], t0) - t0) / 1e6, (min(e["ts"] + e["dur"], t1) - max(e["ts"], t0)) / 1e6)
            for e in items
            if e["ts"] < t1 and e["ts"] + e["dur"] > t0
        ]
        if segs:
            ax.broken_barh(segs, (y - h / 2, h), facecolors=color, **kw)

    for i, rank in enumerate(reversed(ranks)):
        mine = [e for e in spans if e["pid"] == rank]
        y_comp, y_comm = 2 * i + 1, 2 * i
        bars([e for e in mine if e.get("cat") == "compute"], y_comp, 0.8, "C0", edgecolor="white", linewidth=0.3)
        bars([e for e in mine if e.get("cat") == "idle"], y_comp, 0.4, "0.75")
        comm = [e for e in mine if e.get("cat") == "communication"]
        bars(
            [e for e in comm if e["name"].startswith(_TOP_COMM)],
            y_comm,
            0.8,
            "#fdbf6f",
            edgecolor="white",
            linewidth=0.3,
        )
        bars(
            [e for e in comm if e["name"].startswith(("reduce_scatter", "all_gather", "all_reduce"))],
            y_comm,
            0.5,
            "#e6550d",
        )
        bars([e for e in comm if e["name"].startswith("adamw")], y_comm, 0.5, "C2")
        yticks += [y_comm, y_comp]
        ylabels += [f"rank {rank} communication", f"rank {rank} compute"]
    ax.set_yticks(yticks)
    ax.set_yticklabels(ylabels)
    ax.set_xlim(0, seconds)
    ax.set_xlabel(f"time since {'trace start' if not start_s else f'{start_s:g} s after trace start'} (s)")
    ax.legend(
        handles=[
            Patch(color="C0", label="fwd+bwd"),
            Patch(color="0.75", label="waiting / slowdown"),
            Patch(color="#fdbf6f", label="sync"),
            Patch(color="#e6550d", label="collectives"),
            Patch(color="C2", label="AdamW (shard)"),
        ],
        loc="upper center",
        bbox_to_anchor=(0.5, -0.18),
        ncol=5,
        fontsize=8,
    )
    try:
        eff = np.mean([r["overlap_efficiency"] for r in summarize_overlap(trace_path)])
        eff_text = f" — overlap efficiency {eff:.2f}"
    except (ValueError, ZeroDivisionError):
        eff_text = ""
    ax.set_title((title or os.path.basename(os.path.dirname(os.path.abspath(trace_path)))) + eff_text, fontsize=10)
    fig.tight_layout()
    set_saved_paths(fig, [])
    if out_path:
        save_figure(fig, os.path.dirname(out_path) or ".", os.path.basename(out_path))
    return fig


def run_timeline(run: Run, root: str, seconds: float = 3.0, save: bool = True, name: str | None = None):
    """The timeline of one run, saved as figures/<name>.{png,pdf} of its experiment (default
    timeline_<method>; the run's folder name is in the title)."""
    if not run.trace_path:
        raise MissingRuns(f"{run.path} has no trace.json")
    name = name or "timeline_" + re.sub(r"[^A-Za-z0-9=.,_+-]", "-", run.method)
    out = os.path.join(figures_dir(root, run.exp, run.scale), name) if save else None
    return timeline(
        run.trace_path,
        seconds=seconds,
        out_path=out,
        title=f"{run.exp} {run.scale}: {method_label(run.method)} ({run.name})",
    )


def lr_sweep(root: str, scale: str = "cpu", save: bool = True):
    """ACCO's paired gap to DDP against the learning rate (analysis/lr_sweep.py)."""
    return sweep_of_lr.figure(root, scale, save)


def beyond_diloco(root: str, scale: str = "cpu", save: bool = True):
    """ACCO vs DiLoCo and Streaming DiLoCo: loss against samples, time to a target per link, memory
    per rank (analysis/beyond_diloco.py)."""
    return bd.figure(root, scale, save)


def outer_sweep(root: str, scale: str = "cpu", save: bool = True):
    """The local methods' final loss over the outer optimizer's grid (analysis/outer_sweep.py)."""
    return sweep_of_outer.figure(root, scale, save)


FIGURES = {
    "fig4": fig4,
    "fig5": fig5,
    "fig6": fig6,
    "fig7": fig7,
    "fig8": fig8,
    "fig9": fig9,
    "fig10": fig10,
    "fig11": fig11,
    "lr_sweep": lr_sweep,
    "beyond_diloco": beyond_diloco,
    "outer_sweep": outer_sweep,
}
