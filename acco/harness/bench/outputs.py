"""The benchmark's outputs under results/bench/: CSVs, targets.{csv,md}, the cost model's files,
and bench.png."""

from __future__ import annotations

import os
import platform

import pandas as pd

from acco.analytic import costmodel as cm
from acco.analytic.table1 import TABLE1_FORMULAS

from . import model_fit, targets
from .variants import spec

K_ADAMW = 12  # bytes of AdamW state per parameter in Table 1 (fp32 master, m, v)


def memory_rows(grid: pd.DataFrame, raw: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per-rank maxima on the unlimited link beside Table 1 at this run's precision (fp32 on CPU:
    4 bytes per parameter, gradient and buffer element)."""
    rows = []
    for _, r in grid[grid["ratio_target"] == 0].iterrows():
        n = int(r["world"])
        b = 2 if pd.notna(r.get("cuda_max_allocated_bytes")) else 4  # bf16 on GPU, fp32 on CPU
        psi = r["param_bytes"] / b
        method = spec(r["method"])
        key = method.table1_row  # every DDP variant: ZeRO-1
        buffers = 1 if method.carries_gradients else 0  # the gradients waiting for the next round's sync
        formula = (b * (2 + buffers) + K_ADAMW / n) * psi
        rows.append(
            {
                "method": r["method"],
                "world": n,
                "params": int(psi),
                "table1": TABLE1_FORMULAS[key][1] + f" at {b} B/elem",
                "table1_bytes": formula,
                "param_bytes": r["param_bytes"],
                "grad_bytes": r["grad_bytes"],
                "comm_buffer_bytes": r["comm_buffer_bytes"],
                "optimizer_state_bytes": r["optimizer_state_bytes"],
                "optimizer_state_formula_bytes": K_ADAMW / n * psi,
                "model_state_bytes": r["model_state_bytes"],
                "measured_over_table1": r["model_state_bytes"] / formula,
                "peak_rss_bytes": r["peak_rss_bytes"],
                "peak_rss_per_rank": _per_rank(raw, r),
                "cuda_max_allocated_bytes": r.get("cuda_max_allocated_bytes"),
            }
        )
    return pd.DataFrame(rows)


def _per_rank(raw, r) -> str | None:
    """Each rank's peak RSS (MB) in the first round's run of this point."""
    if raw is None or "peak_rss_per_rank" not in raw:
        return None
    sel = raw[
        (raw["group"] == "grid")
        & (raw["world"] == r["world"])
        & (raw["ratio_target"] == 0)
        & (raw["method"] == r["method"])
    ]
    if not len(sel):
        return None
    return " ".join(f"{int(x) / 1e6:.0f}" for x in str(sel.iloc[0]["peak_rss_per_rank"]).split(";") if x.isdigit())


def _md(df: pd.DataFrame, floatfmt: str = ".3g") -> str:
    if df.empty:
        return "(none)\n"
    cols = list(df.columns)
    fmt = lambda v: format(v, floatfmt) if isinstance(v, float) else str(v)  # noqa: E731
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(fmt(v) for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join(lines) + "\n"


def plot(out: str, grid: pd.DataFrame, ideal: pd.DataFrame) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    worlds = sorted(grid["world"].unique())
    fig, axes = plt.subplots(2, len(worlds), figsize=(5 * len(worlds), 7), squeeze=False)
    for j, world in enumerate(worlds):
        g = grid[grid["world"] == world]
        ax, ax2 = axes[0][j], axes[1][j]
        for method, m in g.groupby("method"):
            m = m.sort_values("ratio_target")
            ax.plot(m["ratio_target"], m["samples_per_s"], "o-", label=method)
            ax2.plot(m["ratio_target"], m["s_per_step"], "o-", label=method)
        i = ideal[ideal["world"] == world].sort_values("ratio_target")
        if len(i):
            ax.plot(i["ratio_target"], i["ideal_samples_per_s"], "k--", label="ideal overlap")
        ax.set_title(f"{world} workers")
        ax.set_ylabel("samples/s")
        ax2.set_ylabel("s per committed step")
        ax2.set_xlabel("comm/comp ratio (target; measured in grid.csv)")
        for a in (ax, ax2):
            a.set_xscale("symlog", linthresh=0.25)
            a.legend(fontsize=8)
    fig.tight_layout()
    path = os.path.join(out, "bench.png")
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def write_all(
    out: str,
    raw,
    grid,
    hetero,
    calibrations,
    tb,
    other,
    args: dict,
    failures: pd.DataFrame | None = None,
    delay: pd.DataFrame | None = None,
) -> list[str]:
    os.makedirs(out, exist_ok=True)
    paths = []

    def csv(name, df):
        path = os.path.join(out, f"{name}.csv")
        df.to_csv(path, index=False)
        paths.append(path)

    delay = delay if delay is not None else pd.DataFrame(columns=grid.columns)
    both = pd.concat([grid, delay]) if len(delay) else grid
    ideal = targets.ideal_rows(both)
    best = targets.best_ddp_rows(both)
    bounds = targets.own_bound_rows(both)
    hetero_ideal = targets.hetero_rows(hetero)
    tg = targets.evaluate(grid, hetero, delay)
    mem = memory_rows(grid, raw)
    err = model_fit.testbed_errors(grid, tb, other)
    paper = model_fit.paper_predictions()
    csv("runs", raw)
    failures = failures if failures is not None else pd.DataFrame()
    csv("failures", failures)
    csv("grid", grid)
    csv("ideal", ideal)
    csv("hetero", hetero)
    csv("hetero_ideal", hetero_ideal)
    csv("delay", delay)
    csv("bounds", bounds)
    csv("best_ddp", best)
    csv("calibration", pd.DataFrame([c.as_row() for c in calibrations.values()]))
    csv("memory", mem)
    csv("targets", tg)
    csv("costmodel_testbed", err)
    csv(
        "costmodel_fit",
        pd.DataFrame(
            [
                {
                    "alpha_s": tb.alpha_s,
                    "efficiency": tb.efficiency,
                    "loopback_bytes_per_s": tb.loopback_bytes_per_s,
                    **{f"compute_per_micro_batch_s_w{k}": v for k, v in tb.compute_per_micro_batch_s.items()},
                    **{f"sync_other_s_w{k}": v for k, v in other.items()},
                }
            ]
        ),
    )
    for name, df in paper.items():
        csv(name, df)
    paths.append(plot(out, grid, ideal[ideal["group"] == "grid"] if len(ideal) else ideal))
    cols = [
        "method",
        "world",
        "ratio_target",
        "rate_mbit",
        "link_mode",
        "rounds",
        "samples_per_s",
        "s_per_step",
        "samples_per_step",
        "t_comp_round_s",
        "t_sync_s",
        "sync_side_cpu_s",
        "overlap_efficiency",
    ]
    abs_err = err["error_pct"].abs()
    compute_per_micro_batch = ", ".join(f"{k} workers {v:.3f} s" for k, v in tb.compute_per_micro_batch_s.items())
    md = [
        f"# Benchmark ({platform.node()}, {os.cpu_count()} CPUs, no GPU)\n",
        f"Arguments: {args}\n",
        "Every number is a median over rounds (by default ACCO and the reference twice per grid point, "
        "the other runs once); all methods ran interleaved "
        "in one run. Times are wall-clock "
        "on a shared machine: compare ratios, not absolute seconds. `ddp` = PyTorch DDP + "
        "ZeroRedundancyOptimizer with the reduce-scatter + all-gather communication hook in bf16 "
        "(method.comm_hook=reduce_scatter_bf16: the baseline at its best, the gradient bytes ACCO sends; "
        "`ddp_rs_fp32` the same hook in fp32, `ddp_allreduce` PyTorch's default gloo all-reduce; all three "
        "then broadcast ZeroRedundancyOptimizer's fp32 partitions, one flat bucket per rank), `ddp_flat` = "
        "our sequential ZeRO-1 (the reference whose compute "
        "and sync are measured separately), `acco` = ACCO. samples/s and s per committed step exclude the "
        "first committed step (warm-up, prologue) and the last (ACCO, DPU and WP compute nothing beside "
        "its sync, yet it commits samples computed before). An ACCO committed step is two rounds "
        "(2x the samples of a DDP step at equal accum). Link `netns`: the kernel shapes TCP between "
        "network namespaces (its TCP work runs on the same cores as compute); `delay`: the same rate as "
        "an in-process sleep after each collective.\n",
        "Bounds. Perfect overlap: an ACCO round >= max(t_comp, t_sync), from the sequential reference's "
        "separately measured compute and sync. Contention-aware: W workers on C cores, c = CPU seconds a "
        "sync costs outside the compute thread (sync_side_cpu_s, measured in ACCO's run: its communication "
        "thread and gloo's I/O threads): a round needs W (t_comp min(1, C/W) + c) CPU seconds on C cores, "
        "so round >= max(t_sync, t_comp, W (t_comp min(1, C/W) + c) / C) — t_comp + c for 2 workers on 2 "
        "cores, t_comp + 2c for 4. Heterogeneous: the ideal is the sum of each worker's own micro-batch "
        "rate measured in ACCO's run (its compute lane's fwd+bwd and slowdown time per micro-batch), DDP's "
        "limit N x the slowest's.\n",
        "## Targets\n",
        _md(tg[["target", "pass", "value", "threshold", "numbers", "why"]]),
        "## Failed runs (retried once, then left out)\n",
        _md(failures),
        "## Grid\n",
        _md(grid[[c for c in cols if c in grid.columns]].sort_values(["world", "ratio_target", "method"])),
        "## Grid on the in-process delay link\n",
        _md(delay[[c for c in cols if c in delay.columns]].sort_values(["world", "ratio_target", "method"]))
        if len(delay)
        else "(none)\n",
        "## ACCO over the best DDP at each ratio\n",
        "The fastest DDP the grid ran at each point (`ddp*`: PyTorch's with its hooks, `ddp_flat` the "
        "blocking flat ZeRO-1, the paper's baseline as the suite ran it, `ddp_overlap` the same with its "
        "reduce-scatter bucket by bucket in the last backward), ACCO's samples/s over it and over the blocking "
        "one: where acco_over_best_ddp < 1, ACCO's advantage is gone.\n",
        _md(best) if len(best) else "(no grid)\n",
        "## How much of its reduction each DDP's last backward hid\n",
        "From the traces (acco/engine/trace.py backward_overlap, medians over steps after the first): "
        "`ddp_overlap`'s bucket reduce-scatters and, for PyTorch's DDP with its own asynchronous all-reduce "
        "(`ddp_allreduce`; the reduce-scatter hooks run their collectives inside the hook, so the backward "
        "waits for them), its bucket all-reduces; hidden: the share of them that ran while the last "
        "backward did.\n",
        _md(
            grid[grid["backward_hidden_fraction"].notna()][
                ["method", "world", "ratio_target", "t_bucket_reductions_s", "backward_hidden_fraction"]
            ]
        )
        if "backward_hidden_fraction" in grid.columns and grid["backward_hidden_fraction"].notna().any()
        else "(no traced overlapped DDP in this grid)\n",
        "## ACCO vs the perfect-overlap and the contention-aware bounds\n",
        _md(ideal),
        "## Each method's time per round vs its own bound\n",
        "Sequential: t_comp + (its bytes / the flat sync's) x t_sync (PyTorch DDP + ZeroRedundancyOptimizer "
        "moves 1.5x the flat ZeRO-1's bytes: the gradients' 2(N-1)/N and the partitions' broadcast); "
        "overlapping: max(t_comp, t_sync). of_bound = bound / measured.\n",
        _md(bounds),
        "## Heterogeneous workers\n",
        _md(hetero[[c for c in cols if c in hetero.columns]]),
        _md(hetero_ideal),
        "## Memory (per-rank maxima, unlimited link) vs Table 1\n",
        _md(mem),
        "## Cost model\n",
        f"Calibrated on this run: α = {tb.alpha_s * 1e3:.2f} ms per ring step, shaped links deliver "
        f"{tb.efficiency:.2f} x the configured rate, loopback {tb.loopback_bytes_per_s / 1e6:.0f} MB/s; "
        f"compute per micro-batch {compute_per_micro_batch}.\n",
        f"Error vs testbed (s per committed step): median |error| {abs_err.median():.1f} %, "
        f"max {abs_err.max():.1f} % (costmodel_testbed.csv).\n",
        model_fit.fig4_statement(paper["costmodel_fig4"]) + "\n",
        "Table 3 (predicted vs paper reduction of wall-clock; the paper's DDP accumulates 2x ACCO's "
        "micro-batches per round, so pure overlap can reduce the time by at most 33 %):\n",
        _md(
            paper["costmodel_table3"][
                ["row", "workers", "compute_per_round_s", "sync_s", "predicted_reduction_pct", "paper_reduction_pct"]
            ]
        ),
        f"Presets: {cm.A100.name}, {cm.H100.name}; MFU {cm.A100.mfu:g} and α are assumptions "
        f"(costmodel_scaling.csv: 8..1024 workers).\n",
    ]
    path = os.path.join(out, "targets.md")
    with open(path, "w") as f:
        f.write("\n".join(md))
    paths.append(path)
    return paths
