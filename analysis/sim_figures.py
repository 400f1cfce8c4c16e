"""The scale simulator's figure set (results/sim) and its report section.

`write_figures(out)` simulates three grids with acco/harness/simulation and draws them (matplotlib, Agg;
saved by analysis/render.py save_figure, so the same inputs give the same bytes):

    sim_speedup_model_bandwidth  each method's samples/s over DDP+ZeRO-1's, model size x inter-node
                                 bandwidth, 8 nodes x 8 A100 (N = 64), no stragglers
    sim_speedup_workers_stragglers  the same over N (8..1024) x straggler spread (log-normal σ, rare
                                 slow rounds p, one slow node), GPT-Neo 2.7B at 100 Gbit/s per node
    sim_frontier                 where ACCO stops paying (its sync longer than half a step's compute)
                                 and the H DiLoCo would need to keep its sync under 10 % of the time

with the numbers behind them in sim_*.csv. `simulation_section(results_root)` is the report's
section, read from <results_root>/sim alone. Everything is modelled time, not measured, and says so;
the simulation predicts no loss.
"""

from __future__ import annotations

import math
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from acco.harness.simulation.models import MODELS
from acco.harness.simulation.stragglers import Stragglers
from acco.harness.simulation.sweep import LABELS, primitives, run, scenario
from acco.harness.simulation.topology import SIM_PRESETS, topology
from acco.harness.simulation.variants import modelled
from analysis.render import save_figure, to_markdown

# the simulator's variants its figures name (acco/harness/simulation/variants.py VARIANTS: its CSVs'
# `method` keys): every speed-up is over the blocking DDP; the DDP at its best overlaps its
# reduction with the last backward; ACCO deterministic and adaptive (looked up: a key the table lost
# fails at import, not in a figure)
DDP, OVERLAPPED_DDP, ACCO, ACCO_ADAPTIVE, DPU, DILOCO, STREAMING_DILOCO = (
    modelled(k).key for k in ("ddp", "ddp_overlap", "acco", "acco_adaptive", "dpu", "diloco", "streaming_diloco")
)
OTHERS = (DPU, modelled("wp").key, ACCO, ACCO_ADAPTIVE, DILOCO, STREAMING_DILOCO)  # the panels beside DDP
BANDWIDTHS = (12.5, 25, 50, 100, 200, 400, 800, 1600)  # Gbit/s per node
WORKERS = (8, 16, 32, 64, 128, 256, 512, 1024)
STRAGGLER_ROWS = {
    "log-normal σ": [Stragglers("lognormal", sigma=s) for s in (0.0, 0.05, 0.1, 0.2, 0.3)],
    "slow rounds p (3x)": [Stragglers("tail", p=p, factor=3.0) for p in (0.0, 0.001, 0.003, 0.01, 0.03)],
    "one slow node (x)": [Stragglers("slow_node", factor=k) for k in (1.0, 1.25, 1.5, 2.0, 3.0)],
}
STRAGGLER_MODEL, STRAGGLER_GBPS = "2.7b", 100.0
DILOCO_OVERHEAD = 0.10  # the sync share of time the frontier's H keeps DiLoCo under
NOT_LOSS = "Modelled time, not measured; the simulation predicts no loss."
FIGURE_MODELS = ("125m", "1.3b", "2.7b", "7b", "13b", "70b")  # the paper's GPT-Neo and Llama-2 shapes
A100 = SIM_PRESETS["A100"]


def _spread_value(s: Stragglers) -> float:
    return {"lognormal": s.sigma, "tail": s.p, "slow_node": s.factor, "none": 0.0}[s.kind]


def grid_model_bandwidth() -> pd.DataFrame:
    scs = [scenario(m, topology(8, 8, g)) for m in FIGURE_MODELS for g in BANDWIDTHS]
    df = pd.DataFrame(run(scs))
    df["model_key"] = np.repeat(
        [m for m in FIGURE_MODELS for _ in BANDWIDTHS], len(df) // (len(FIGURE_MODELS) * len(BANDWIDTHS))
    )
    return df


def grid_workers_stragglers() -> pd.DataFrame:
    frames = []
    for family, specs in STRAGGLER_ROWS.items():
        scs = [
            scenario(STRAGGLER_MODEL, topology(8, n // 8, STRAGGLER_GBPS), stragglers=s) for n in WORKERS for s in specs
        ]
        df = pd.DataFrame(run(scs))
        df["family"] = family
        df["spread"] = [_spread_value(s) for s in (sc.stragglers for sc in scs) for _ in range(len(df) // len(scs))]
        frames.append(df)
    return pd.concat(frames, ignore_index=True)


def grid_frontier() -> pd.DataFrame:
    """ACCO's sync over its round's compute and DiLoCo's needed H, from the primitives (no
    stragglers: the schedules' closed forms hold exactly, tests/unit/test_simulation.py)."""
    rows = []
    gbps = np.geomspace(5, 3200, 28)
    for panel, cases in (
        ("model", [(m, 64, g) for m in FIGURE_MODELS for g in gbps]),
        ("workers", [("7b", n, g) for n in WORKERS for g in gbps]),
    ):
        for key, n, g in cases:
            sc = scenario(key, topology(8, n // 8, float(g)))
            p = primitives(sc)
            c_round = p["micro_batch_s"] * sc.accum / 2
            ratio = p["sync_s"][ACCO] / c_round
            step_c = p["micro_batch_s"] * sc.accum
            # DiLoCo waits its whole sync every H inner steps: m / (H c + m) <= overhead
            h_needed = p["sync_s"][DILOCO] * (1 - DILOCO_OVERHEAD) / (DILOCO_OVERHEAD * step_c)
            rows.append(
                {
                    "panel": panel,
                    "model_key": key,
                    "model": MODELS[key].name,
                    "workers": n,
                    "inter_gbps": float(g),
                    "acco_sync_over_compute": ratio,
                    "acco_speedup_deterministic": (step_c + p["sync_s"][DDP]) / (2 * max(c_round, p["sync_s"][ACCO])),
                    "diloco_H_needed": max(1.0, h_needed),
                }
            )
    return pd.DataFrame(rows)


def _heat(ax, data: np.ndarray, xlabels, ylabels, vmin=1.0, vmax=2.0, marks=None, fmt="{:.2f}", batch=None):
    """A heat map with each cell's value written in it; † where `marks`; under it "b×k" where the
    batch per step is k times DDP's (`batch`, adaptive methods)."""
    im = ax.imshow(data, origin="lower", aspect="auto", cmap="viridis", vmin=vmin, vmax=vmax)
    ax.set_xticks(range(len(xlabels)), [str(x) for x in xlabels], fontsize=7, rotation=45)
    ax.set_yticks(range(len(ylabels)), [str(y) for y in ylabels], fontsize=7)
    for i in range(data.shape[0]):
        for j in range(data.shape[1]):
            v = data[i, j]
            text = fmt.format(v) + ("†" if marks is not None and marks[i, j] else "")
            if batch is not None and batch[i, j] > 1.005:
                text += f"\nb×{batch[i, j]:.1f}"
            ax.text(
                j, i, text, ha="center", va="center", fontsize=5.5, color="white" if v < (vmin + vmax) / 2 else "black"
            )
    return im


def fig_speedup_model_bandwidth(df: pd.DataFrame):
    fig, axes = plt.subplots(2, 3, figsize=(13, 7.5), sharex=True, sharey=True)
    models = list(FIGURE_MODELS)
    for ax, method in zip(axes.flat, OTHERS):
        d = df[df["method"] == method]
        pivot = d.pivot_table(index="model_key", columns="inter_gbps", values="speedup_vs_ddp").loc[models]
        fits = d.pivot_table(index="model_key", columns="inter_gbps", values="fits").loc[models]
        base = df[df["method"] == DDP].pivot_table(index="model_key", columns="inter_gbps", values="batch_per_step")
        batch = d.pivot_table(index="model_key", columns="inter_gbps", values="batch_per_step").loc[models]
        ratio = (batch / base.loc[models]).to_numpy()
        im = _heat(
            ax,
            pivot.to_numpy(),
            [f"{g:g}" for g in pivot.columns],
            [MODELS[m].name for m in models],
            marks=~fits.to_numpy().astype(bool),
            batch=ratio,
        )
        ax.set_title(LABELS[method], fontsize=9)
    for ax in axes[-1]:
        ax.set_xlabel("inter-node bandwidth, Gbit/s per node", fontsize=8)
    fig.colorbar(im, ax=axes, shrink=0.8, label="samples/s over DDP+ZeRO-1")
    fig.suptitle(
        "Simulated speed-up over DDP+ZeRO-1 at N = 64 (8 nodes x 8 A100, "
        f"NVLink {A100.intra_bytes_per_s / 1e9:g} GB/s, MFU by micro-batch tokens (A100 table), 2 micro-batches "
        "per step per GPU, no stragglers)\n† Table 1's model state exceeds one 80 GB GPU (activations not counted). "
        "b×k: a committed step holds k times DDP's samples (adaptive ACCO). " + NOT_LOSS,
        fontsize=9,
    )
    return fig


def fig_against_overlapped_ddp(df: pd.DataFrame):
    """The baseline at its best (issue 40): the DDP whose reduce-scatter overlaps its last backward
    over the blocking one, and ACCO (deterministic, adaptive) over that overlapped DDP."""
    models = list(FIGURE_MODELS)
    panels = (
        (OVERLAPPED_DDP, "speedup_vs_ddp", "overlapped DDP over blocking DDP"),
        (ACCO, "speedup_vs_ddp_overlap", "ACCO (deterministic) over the overlapped DDP"),
        (ACCO_ADAPTIVE, "speedup_vs_ddp_overlap", "ACCO (adaptive) over the overlapped DDP"),
    )
    fig, axes = plt.subplots(1, 3, figsize=(13, 4.6), sharey=True)
    ims = []
    for ax, (method, column, title) in zip(axes, panels):
        d = df[df["method"] == method]
        pivot = d.pivot_table(index="model_key", columns="inter_gbps", values=column).loc[models]
        ims.append(
            _heat(ax, pivot.to_numpy(), [f"{g:g}" for g in pivot.columns], [MODELS[m].name for m in models], 0.8, 2.0)
        )
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("inter-node bandwidth, Gbit/s per node", fontsize=8)
    fig.colorbar(ims[-1], ax=axes, shrink=0.8, label="samples/s ratio")
    fig.suptitle(
        "Against the DDP at its best: N = 64 (8x8 A100, MFU by micro-batch tokens), 2 micro-batches per step per GPU, "
        "DDP's buckets "
        "(1 MiB, then 25 MiB)\nreduce-scattered in the last backward; the parameters' all-gather after the step hides "
        "nothing. " + NOT_LOSS,
        fontsize=9,
        y=1.06,
    )
    return fig


def fig_speedup_workers_stragglers(df: pd.DataFrame):
    methods = (DPU, ACCO, ACCO_ADAPTIVE, STREAMING_DILOCO)
    fig, axes = plt.subplots(len(STRAGGLER_ROWS), len(methods), figsize=(13, 9.5), sharex=True, sharey="row")
    for r, (family, specs) in enumerate(STRAGGLER_ROWS.items()):
        spreads = [_spread_value(s) for s in specs]
        for c, method in enumerate(methods):
            ax = axes[r, c]
            d = df[(df["family"] == family) & (df["method"] == method)]
            pivot = d.pivot_table(index="spread", columns="workers", values="speedup_vs_ddp").loc[spreads]
            batch = d.pivot_table(index="spread", columns="workers", values="batch_per_step").loc[spreads]
            base = df[(df["family"] == family) & (df["method"] == DDP)]
            base_b = base.pivot_table(index="spread", columns="workers", values="batch_per_step").loc[spreads]
            im = _heat(
                ax,
                pivot.to_numpy(),
                list(pivot.columns),
                [f"{s:g}" for s in spreads],
                vmin=1.0,
                vmax=2.5,
                batch=(batch / base_b).to_numpy(),
            )
            if r == 0:
                ax.set_title(LABELS[method], fontsize=9)
            if c == 0:
                ax.set_ylabel(family, fontsize=8)
            if r == len(STRAGGLER_ROWS) - 1:
                ax.set_xlabel("GPUs (8 per node)", fontsize=8)
    fig.colorbar(im, ax=axes, shrink=0.8, label="samples/s over DDP+ZeRO-1 (same straggler draws)")
    fig.suptitle(
        f"Simulated speed-up over DDP+ZeRO-1 with stragglers: {MODELS[STRAGGLER_MODEL].name}, "
        f"{STRAGGLER_GBPS:g} Gbit/s per node, A100, 2 micro-batches per step per GPU\n"
        "b×k: ACCO (adaptive) commits k times DDP's samples per step (its batch grows where workers differ). "
        + NOT_LOSS,
        fontsize=9,
        y=1.0,
    )
    return fig


def fig_frontier(df: pd.DataFrame):
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.8))
    for ax, panel, ykey, ylabels in (
        (axes[0], "model", "model_key", list(FIGURE_MODELS)),
        (axes[1], "workers", "workers", list(WORKERS)),
    ):
        d = df[df["panel"] == panel]
        ratio = d.pivot_table(index=ykey, columns="inter_gbps", values="acco_sync_over_compute").loc[ylabels]
        hneed = d.pivot_table(index=ykey, columns="inter_gbps", values="diloco_H_needed").loc[ylabels]
        x = np.log10(ratio.columns.to_numpy())
        y = np.arange(len(ylabels))
        im = ax.pcolormesh(x, y, np.log2(ratio.to_numpy()), cmap="coolwarm", vmin=-4, vmax=4, shading="nearest")
        cs = ax.contour(x, y, ratio.to_numpy(), levels=[1.0], colors="black", linewidths=2)
        ax.clabel(cs, fmt={1.0: "ACCO: sync = compute"}, fontsize=7)
        hs = ax.contour(x, y, hneed.to_numpy(), levels=[8, 32, 128, 512], colors="white", linestyles="--", linewidths=1)
        ax.clabel(hs, fmt=lambda v: f"DiLoCo H≥{v:g}", fontsize=6)
        ticks = [5, 10, 25, 50, 100, 200, 400, 800, 1600, 3200]
        ax.set_xticks(np.log10(ticks), [str(t) for t in ticks], fontsize=7)
        ax.set_yticks(
            y, [MODELS[str(m)].name for m in ylabels] if panel == "model" else [str(n) for n in ylabels], fontsize=7
        )
        ax.set_xlabel("inter-node bandwidth, Gbit/s per node", fontsize=8)
        ax.set_title(
            "model size at N = 64 (8x8 A100)" if panel == "model" else "GPUs (8 per node), Llama-2 7B", fontsize=9
        )
    fig.colorbar(im, ax=axes, label="log2(ACCO's sync / its round's compute)")
    fig.suptitle(
        "Where ACCO stops paying: right of the black line its sync hides under compute (up to 2x over DDP); "
        "left of it ACCO's rounds wait for the sync.\nWhite: the H (inner steps per sync) DiLoCo needs to keep its "
        f"sync under {DILOCO_OVERHEAD:.0%} of the time. " + NOT_LOSS,
        fontsize=9,
        y=1.04,
    )
    return fig


def write_figures(out: str) -> list[str]:
    os.makedirs(out, exist_ok=True)
    paths = []
    model_bandwidth = grid_model_bandwidth()
    for name, grid, draw in (
        ("sim_speedup_model_bandwidth", lambda: model_bandwidth, fig_speedup_model_bandwidth),
        ("sim_against_overlapped_ddp", lambda: model_bandwidth, fig_against_overlapped_ddp),
        ("sim_speedup_workers_stragglers", grid_workers_stragglers, fig_speedup_workers_stragglers),
        ("sim_frontier", grid_frontier, fig_frontier),
    ):
        df = grid()
        if name != "sim_against_overlapped_ddp":  # its numbers are the model x bandwidth grid's
            csv = os.path.join(out, f"{name}.csv")
            df.to_csv(csv, index=False, float_format="%.6g")
            paths.append(csv)
        fig = draw(df)
        paths += save_figure(fig, out, name)
        plt.close(fig)
    return paths


def _read(path: str) -> pd.DataFrame | None:
    try:
        return pd.read_csv(path)
    except (OSError, pd.errors.EmptyDataError):
        return None


def simulation_section(results_root: str) -> str:
    """The report's section on the scale simulator, from <results_root>/sim alone (markdown)."""
    sim = os.path.join(results_root, "sim")
    lines = [
        "## Beyond this machine: the schedules simulated at 8–1024 GPUs (modelled time)",
        "",
        "`experiments/simulate.py` (acco/harness/simulation) runs each method's rounds as discrete events on a "
        "hierarchical topology (ring collectives inside and across nodes), with Table 1's bytes, 6·Ψ·tokens "
        "of compute at a stated MFU and per-worker slowdowns from a straggler distribution. **It predicts "
        "time only — samples/s, GPU idle fraction, time per committed step, adaptive ACCO's batch per step — "
        "not loss.** Details and how to run it for one's own cluster: `results/sim/README.md`.",
        "",
    ]
    grid = _read(os.path.join(sim, "sim_speedup_model_bandwidth.csv"))
    if grid is not None and not grid.empty:
        rows = []
        for key in ("125m", "2.7b", "7b", "70b"):
            for g in (25.0, 100.0, 400.0):
                d = grid[(grid["model_key"] == key) & (grid["inter_gbps"] == g)].set_index("method")
                if d.empty:
                    continue
                rows.append(
                    {
                        "model": d["model"].iloc[0],
                        "Gbit/s per node": f"{g:g}",
                        "ACCO sync / round compute": d.loc[ACCO, "sync_over_compute"],
                        **{LABELS[m]: d.loc[m, "speedup_vs_ddp"] for m in (ACCO, ACCO_ADAPTIVE, DPU, STREAMING_DILOCO)},
                        "adaptive ACCO's batch / DDP's": d.loc[ACCO_ADAPTIVE, "batch_per_step"]
                        / d.loc[DDP, "batch_per_step"],
                        **(
                            {
                                "overlapped DDP / DDP": d.loc[OVERLAPPED_DDP, "speedup_vs_ddp"],
                                "ACCO / overlapped DDP": d.loc[ACCO, "speedup_vs_ddp_overlap"],
                            }
                            if OVERLAPPED_DDP in d.index
                            else {}
                        ),
                        "fits 80 GB (ACCO, Table 1)": "yes" if bool(d.loc[ACCO, "fits"]) else "no",
                    }
                )
        lines += [
            "Speed-up over DDP+ZeRO-1 (samples/s), N = 64 (8x8 A100, MFU by micro-batch tokens), no stragglers. "
            "At a fixed "
            "micro-batch the sync/compute ratio does not depend on the model's size (bytes and FLOPs both grow "
            "with Ψ): Llama-2 7B and 70B (same 4096-token micro-batch) get the same speed-ups, and what moves "
            "the frontier is tokens per micro-batch, bandwidth and N. Adaptive ACCO's larger speed-ups come "
            "with larger steps (its batch column):",
            "",
            to_markdown(pd.DataFrame(rows), ".2f"),
            "",
            "Against the DDP at its best (its reduce-scatter overlapping the last backward, bucket by bucket: "
            "PyTorch DDP's buckets) ACCO's deterministic speed-up is its column over the overlapped DDP's: "
            "whatever the overlapped DDP hides of its reduce-scatter, ACCO no longer gains.",
            "",
            "![speed-up, model x bandwidth](../sim/sim_speedup_model_bandwidth.png)",
            "![against the overlapped DDP](../sim/sim_against_overlapped_ddp.png)",
            "![speed-up, N x stragglers](../sim/sim_speedup_workers_stragglers.png)",
            "![frontier](../sim/sim_frontier.png)",
            "",
        ]
    pub = _read(os.path.join(sim, "validation_published.csv"))
    if pub is not None and not pub.empty:
        ok = int((pub["within 1.5x"] == "yes").sum())
        dp = pub["ours / published, blocking DDP"].notna().sum() if "ours / published, blocking DDP" in pub else 0
        lines += [
            f"**Against published simulations and measurements** (`results/sim/validation.md`): {ok} of "
            f"{len(pub)} rows within 1.5x (the DiLoCo papers' utilization tables, torchtitan's and llm.c's "
            f"throughput, nccl-tests' bus bandwidth, the ACCO paper's Table 3); {dp} of them are data-parallel, "
            "simulated with the DDP that reduces its buckets in the last backward, as the published runs do.",
            "",
        ]
    val = _read(os.path.join(sim, "validation.csv"))
    if val is not None and not val.empty:
        lines += [
            "**Validation against the CPU testbed** (`results/sim/validation.md`): " + validation_verdict(val),
            "",
        ]
    else:
        lines += ["No validation table yet: run `python experiments/simulate.py --validation results/sim`.", ""]
    return "\n".join(lines)


def _pct(text) -> float:
    try:
        return float(str(text).split(" %")[0])
    except ValueError:
        return math.nan


def validation_verdict(val: pd.DataFrame) -> str:
    """One paragraph: the median |error| per method from sequential and from own primitives."""
    v = val.assign(
        base=val["method"].str.split(" H=").str[0],
        seq=val["error % (sequential)"].map(_pct).abs(),
        own=val["error % (own)"].map(_pct).abs(),
    )
    parts = []
    for method, g in v.groupby("base", sort=True):
        own = g["own"].median()
        parts.append(
            f"{method} {g['seq'].median():.0f} % from sequential primitives"
            + ("" if math.isnan(own) else f", {own:.0f} % from its own")
        )
    return (
        "median |error| of the simulated time per committed step over the settings — "
        + "; ".join(parts)
        + ". Where the two differ the testbed is not faithful to a GPU: on 2 shared cores an overlapped sync "
        "takes CPU from the compute (its micro-batches slower, the sync itself longer than alone), so the "
        "schedule is right given the pieces' real times, while a GPU's pieces would not slow each other."
    )
