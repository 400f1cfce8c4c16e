"""The scale simulator (acco/harness/simulation) against what the CPU testbed measured: results/sim/validation.

For every completed run of fig7, fig8, fig9, fig11 and beyond_diloco in <root>/cpu, the simulator
predicts its time per committed step over the window `acco.harness.bench.measure.steady_rate` measures (the
first and last committed steps left out; the same prologue, DPU warmup and DiLoCo periods), in two ways:

- **from sequential primitives** — one micro-batch and one sync as the setting's DDP run of the same
  seed measured them (its trace's medians, `Run.span_times`): DDP's sync does not overlap anything,
  so these are the pieces' times alone, what a GPU cluster would give every method. Where the DDP
  runs of a setting kept no trace (beyond_diloco's shaped links), the micro-batch is the unshaped
  DDP run's and the sync is the link model `acco.analytic.costmodel.calibrate` fitted to every DDP
  sync measured on a shaped link here. In a heterogeneous setting a fast rank's sync span includes
  its wait for the slow one: there the sync is each step's shortest span over ranks (the slow rank
  arrives last), from the setting's DDP trace.
- **from the run's own primitives** — its own median micro-batch and sync, measured beside each
  other: it checks the schedule's arithmetic alone, given how long each piece really took.
- **from sequential primitives with the testbed's contention term** — the simulator's `contention`
  (compute 1 + κ times slower beside a running sync, the sync 1 + κ_s times longer beside compute),
  with one κ and one κ_s for the whole testbed: the medians, over every traced overlapped run, of its
  own micro-batch and sync over the sequential ones (`contention_terms`). Not fitted per row.

The error is 100 (predicted − measured) / measured per run, paired by seed, with its mean and 95 %
interval (analysis/stats.py paired_gap). Where the two predictions part, the testbed is not
faithful to a GPU: on 2 shared cores an overlapped sync takes CPU from the compute (its micro-batches
run slower and the sync itself longer than alone), 4 ranks share 2 cores, and a slowed rank's sleep
is sized by its own (contended) busy time.
"""

from __future__ import annotations

import math
import os
import re
import statistics

import numpy as np
import pandas as pd

from acco.analytic.costmodel import calibrate
from acco.analytic.overlap import Buckets
from acco.harness.bench.measure import steady_rate
from acco.harness.simulation import schedules
from analysis.load import BASELINE, Run, discover_runs, method_label, reads, run_length_of, spec_of
from analysis.render import to_markdown
from analysis.sim_published import published_markdown, published_table
from analysis.sim_published_after import ADDED_SOURCES, added_table
from analysis.stats import paired_gap

EXPERIMENTS = ("fig7", "fig8", "fig9", "fig11", "beyond_diloco")


def _cfg(run: Run, dotted: str, default=None):
    d = run.config
    for k in dotted.split("."):
        if not isinstance(d, dict) or k not in d:
            return default
        d = d[k]
    return d


def overlapped(method: str) -> bool:
    """Rounds that compute beside a sync (DPU, WP, ACCO): deterministic or adaptive (acco.methods)."""
    spec = spec_of(method)
    return spec is not None and spec.overlapped


def measurement_point(run: Run) -> tuple:
    link = run.summary.link or {}
    return (run.exp, run.info["layout"], float(link.get("rate_mbit") or 0.0), run.info["hetero"])


def family(run: Run) -> str:
    """The run's name without its seed: the runs of one family differ only by seed."""
    return re.sub(r"_?seed=\d+", "", run.name)


def hetero_primitives(trace_path: str, slow_rank: int) -> tuple[float, float] | None:
    """(fast ranks' median micro-batch, slow rank's median micro-batch) from a trace: under
    contention the slow rank's own fwd+bwd, which sizes its sleep, is not the fast ranks'."""
    from acco.engine.trace import load_spans

    spans = load_spans(trace_path, cat="compute")
    fast = [e["dur"] / 1e6 for e in spans if e["pid"] != slow_rank]
    slow = [e["dur"] / 1e6 for e in spans if e["pid"] == slow_rank]
    return (statistics.median(fast), statistics.median(slow)) if fast and slow else None


def sync_alone_s(trace_path: str) -> float | None:
    """Median over steps of the shortest sync span over ranks (the last rank to arrive waits for
    nobody)."""
    from acco.engine.trace import load_spans

    by_step: dict = {}
    spans = sorted(
        (e for e in load_spans(trace_path, cat="communication") if e["name"].startswith("sync")), key=lambda e: e["ts"]
    )
    for e in spans:
        ranks = by_step.setdefault(e.get("args", {}).get("step"), {})
        ranks[e["pid"]] = ranks.get(e["pid"], 0.0) + e["dur"] / 1e6
    full = [min(v.values()) for v in by_step.values() if len(v) == max(len(x) for x in by_step.values())]
    return statistics.median(full[1:] or full) if full else None


def link_fit(runs: list[Run]):
    """costmodel.calibrate on every traced DDP sync over a shaped link (the sync as one all-reduce's
    bytes: reduce-scatter + all-gather of the communication buffer)."""
    samples = []
    for r in runs:
        link = r.summary.link or {}
        if r.method != BASELINE or link.get("mode") != "netns" or not link.get("rate_mbit"):
            continue
        t = r.span_times()
        nbytes = max((p.get("comm_buffer_bytes") or 0) for p in r.summary.ranks() or [{}])
        if t.get("t_sync_s") and nbytes:
            samples.append(
                {
                    "kind": "all_reduce",
                    "nbytes": nbytes,
                    "workers": r.info["world_size"],
                    "rate_mbit": float(link["rate_mbit"]),
                    "seconds": t["t_sync_s"],
                }
            )
    return calibrate(samples), samples


def predict(
    run: Run, mu: float, m: float, slow_mu: float | None = None, contention: tuple[float, float] = (0.0, 0.0)
) -> tuple[float, float]:
    """(seconds per committed step, samples per committed step) over steady_rate's window;
    `slow_mu`: the slowed rank's own fwd+bwd where measured (else mu); `contention`: (κ, κ_s) for the
    overlapped rounds (compute and sync slowdowns beside each other)."""
    info = run.info
    N, A, T = int(info["world_size"]), int(info["accum"]), int(run.summary.steps_completed or info["steps"])
    adaptive = not bool(info["deterministic"])

    def factors(rounds):
        out = np.ones((rounds, 1, N))
        slow, k = _cfg(run, "hetero.slow_rank"), float(_cfg(run, "hetero.factor", 1.0) or 1.0)
        if slow is not None and k != 1.0:  # it sleeps (k − 1)x its own fwd+bwd after each one
            out[..., int(slow)] = k * (slow_mu or mu) / mu
        return out

    mu_a, m_a = np.array([mu]), np.array([m])
    kappa, kappa_s = contention
    m_over = m_a * (1 + kappa_s)  # an overlapped round's sync, beside compute
    spec = spec_of(run.method)
    if spec is None:
        raise ValueError(f"{run.path}: no method {run.method!r} in the registry (acco.methods) to simulate")
    if not (spec.overlapped or spec.local):  # sequential: DDP, its reduction maybe in the last backward
        step = (run.summary.clock or {}).get("ddp_step")  # a backward-overlapped step's model
        overlap = None
        if step:
            buckets = Buckets(tuple(step["ready"]), tuple(step["entries"]))
            reduce_s = [np.array([r]) for r in step["reduce_s"]]
            overlap = schedules.Overlap(buckets, reduce_s, np.array([step["tail_s"]]), step["backward_share"])
        t = schedules.ddp(mu_a, factors(T), m_a, A, overlap)
        commits = t.commit_s[:, 0]
    elif spec.overlapped and reads(spec, "warmup_steps"):  # DPU, WP: sequential steps first
        W = min(int(_cfg(run, "method.warmup_steps", 0) or 0), T)
        seq = schedules.ddp(mu_a, factors(max(W, 1)), m_a, A).commit_s[:W, 0]
        t = schedules.overlapped(mu_a, factors(T - W + 2), m_over, A, 1, adaptive=adaptive, contention=kappa)
        commits = np.concatenate([seq, (seq[-1] if W else 0.0) + t.commit_s[: T - W, 0]])
    elif spec.overlapped:  # ACCO: its rounds per committed step
        r = spec.rounds_per_step
        t = schedules.overlapped(mu_a, factors(r * T + 2), m_over, A, r, adaptive=adaptive, contention=kappa)
        commits = t.commit_s[:T, 0]
    else:
        H = int(_cfg(run, "method.sync_every"))
        F, tau = (
            (int(_cfg(run, "method.fragments")), int(_cfg(run, "method.overlap_steps")))
            if spec.fragmented
            else (1, 0)  # DiLoCo: the whole model at once, waited for
        )
        rounds = max(2, math.ceil(T / H)) * H
        t = schedules.local(mu_a, factors(rounds), m_a / F, A, H, F, tau)
        commits = t.commit_s[:T, 0]
    mbs = int(_cfg(run, "data.micro_batch_size", 1))
    return (commits[T - 2] - commits[0]) / (T - 2), float(t.micro_batches[0]) * mbs


def on_virtual_clock(run: Run) -> bool:
    return run.summary.modelled_time


def virtual_clock_rows(root: str) -> pd.DataFrame:
    """The simulator against the engine's virtual clock (issue 31): runs whose metrics hold modelled
    seconds, simulated from the clock's own costs (summary.json `clock`). Both are models: this
    checks that they model the same schedule, on real runs' counts and stopping rules."""
    rows = []
    for r in (r for e in EXPERIMENTS for r in discover_runs(root, e, "cpu", clock="virtual") if on_virtual_clock(r)):
        clock = r.summary.clock or {}
        costs = clock.get("sync_s") or {}
        if not isinstance(costs, dict) or not clock.get("micro_batch_s") or "commit" not in costs:
            continue
        if float(clock.get("optimizer_step_s") or 0.0) or len({float(v) for v in costs.values()}) > 1:
            continue  # the simulator's rounds share one sync cost and no separate optimizer step
        try:
            meas = steady_rate(os.path.join(r.path, "metrics.csv"))
        except ValueError:
            continue
        pred, spp = predict(r, float(clock["micro_batch_s"]), float(costs["commit"]))
        rows.append(
            {
                "experiment": r.exp,
                "method": r.method,
                "mode": ("deterministic" if r.info["deterministic"] else "adaptive") if overlapped(r.method) else "",
                "workers": r.info["world_size"],
                "hetero": r.info["hetero"],
                "seed": r.info["seed"],
                "virtual s/step": meas["s_per_step"],
                "simulated s/step": pred,
                "error %": 100 * (pred - meas["s_per_step"]) / meas["s_per_step"],
                "virtual samples/step": meas["samples_per_step"],
                "simulated samples/step": spp,
                "run": r.name,
            }
        )
    return pd.DataFrame(rows)


def validation_rows(root: str) -> pd.DataFrame:
    # measured runs only (discover_runs' default): a virtual-clock run's wall_time_s is modelled
    runs = [r for e in EXPERIMENTS for r in discover_runs(root, e, "cpu", clock="real") if not on_virtual_clock(r)]
    fit, samples = link_fit(runs)
    by_setting: dict = {}
    for r in runs:
        by_setting.setdefault(measurement_point(r), []).append(r)
    rows = []
    pending = []  # (row, run, mu, m) for the contention prediction, once the testbed's terms are known
    for key, group in sorted(by_setting.items()):
        exp, layout, rate, hetero = key
        ddp = [r for r in group if r.method == BASELINE and r.span_times()]
        # the sequential primitives: per seed from this setting's DDP runs
        seq = {r.info["seed"]: r.span_times() for r in ddp}
        alone = None
        if hetero != "none":
            traced = [sync_alone_s(r.trace_path) for r in ddp if r.trace_path]
            alone = statistics.median([x for x in traced if x]) if traced else None
        source = "this setting's DDP runs (same seed)"
        fallback = None
        if not seq:  # beyond_diloco's shaped links: the unshaped DDP micro-batch + the fitted link model
            base = [
                r for r in by_setting.get((exp, layout, 0.0, hetero), []) if r.method == BASELINE and r.span_times()
            ]
            if not base:
                continue
            t0 = base[0].span_times()
            nbytes = max((p.get("comm_buffer_bytes") or 0) for p in base[0].summary.ranks() or [{}])
            fallback = {
                "t_micro_batch_s": t0["t_micro_batch_s"],
                "t_sync_s": fit.collective_s("all_reduce", nbytes, base[0].info["world_size"], rate),
            }
            source = "unshaped DDP micro-batch + calibrated link model"
        for r in group:
            try:
                meas = steady_rate(os.path.join(r.path, "metrics.csv"))
            except ValueError:
                continue
            p = seq.get(r.info["seed"]) or (next(iter(seq.values())) if seq else fallback)
            assert p is not None  # a setting without DDP primitives was skipped above
            mu_seq = p["t_micro_batch_s"]
            m_seq = alone if alone is not None else p["t_sync_s"]
            pred_seq, spp_seq = predict(r, mu_seq, m_seq)
            own = r.span_times()
            pred_own = math.nan
            if own.get("t_micro_batch_s") and own.get("t_sync_s"):
                if hetero == "none":
                    pred_own = predict(r, own["t_micro_batch_s"], own["t_sync_s"])[0]
                elif r.trace_path:  # the sync alone and the slow rank's own fwd+bwd need the trace
                    mus = hetero_primitives(r.trace_path, int(_cfg(r, "hetero.slow_rank")))
                    m_own = sync_alone_s(r.trace_path)
                    if mus and m_own:
                        pred_own = predict(r, mus[0], m_own, slow_mu=mus[1])[0]
            rows.append(
                {
                    "experiment": exp,
                    "layout": layout,
                    "link_mbit": rate,
                    "hetero": hetero,
                    "method": r.method,
                    "mode": ("deterministic" if r.info["deterministic"] else "adaptive")
                    if overlapped(r.method)
                    else "",
                    "family": family(r),
                    "budget": run_length_of(r),
                    "H": r.info.get("sync_every"),
                    "seed": r.info["seed"] if r.info["seed"] is not None else 0,
                    "measured_s_per_step": meas["s_per_step"],
                    "predicted_seq_s_per_step": pred_seq,
                    "predicted_own_s_per_step": pred_own,
                    "measured_samples_per_step": meas["samples_per_step"],
                    "predicted_samples_per_step": spp_seq,
                    "micro_batch_seq_s": mu_seq,
                    "sync_seq_s": m_seq,
                    "micro_batch_own_s": own.get("t_micro_batch_s"),
                    "sync_own_s": own.get("t_sync_s"),
                    "primitives": source,
                    "run": r.name,
                }
            )
            pending.append((rows[-1], r, mu_seq, m_seq))
    kappa, kappa_s, n = contention_terms(rows)
    for row, r, mu_seq, m_seq in pending:
        row["predicted_contention_s_per_step"] = predict(r, mu_seq, m_seq, contention=(kappa, kappa_s))[0]
    df = pd.DataFrame(rows)
    df.attrs["link_fit"] = {"alpha_s": fit.alpha_s, "efficiency": fit.efficiency, "samples": len(samples)}
    df.attrs["contention"] = {"compute": kappa, "sync": kappa_s, "runs": n}
    return df


def contention_terms(rows: list[dict]) -> tuple[float, float, int]:
    """The testbed's contention term: medians, over every overlapped run with its own trace (no slowed
    rank), of its micro-batch and its sync over the sequential ones, less 1 (never below 0)."""
    ratios = [
        (r["micro_batch_own_s"] / r["micro_batch_seq_s"], r["sync_own_s"] / r["sync_seq_s"])
        for r in rows
        if overlapped(r["method"])
        and r["hetero"] == "none"
        and r.get("micro_batch_own_s")
        and r.get("sync_own_s")
        and r["micro_batch_seq_s"]
        and r["sync_seq_s"]
    ]
    if not ratios:
        return 0.0, 0.0, 0
    kappa = max(0.0, statistics.median(x for x, _ in ratios) - 1)
    kappa_s = max(0.0, statistics.median(y for _, y in ratios) - 1)
    return kappa, kappa_s, len(ratios)


NOTES = {
    "overlap": "overlapped sync on the 2 shared cores: own micro-batch {mb:+.0f} %, own sync {sync:+.0f} % vs DDP's",
    "four": "4 ranks on 2 cores",
    "hetero": "slow rank sleeps 3x its own busy time (which contention raises)",
    "model": "sync from the link model (no trace kept)",
    "load": "seeds measured under different machine load: slowest {spread:.1f}x the fastest",
}


def summary(df: pd.DataFrame) -> pd.DataFrame:
    """One row per setting and method (and mode, H): errors paired by seed, mean [95 % interval]."""
    keys = ["experiment", "layout", "link_mbit", "hetero", "method", "mode", "H", "family"]
    out = []
    for key, g in df.groupby(keys, dropna=False, sort=True):
        meas = dict(zip(g["seed"], g["measured_s_per_step"]))
        gap_seq = paired_gap(dict(zip(g["seed"], g["predicted_seq_s_per_step"])), meas)
        gap_own = paired_gap(dict(zip(g["seed"], g["predicted_own_s_per_step"])), meas)
        gap_con = paired_gap(dict(zip(g["seed"], g["predicted_contention_s_per_step"])), meas)
        exp, layout, rate, hetero, method, mode, H, fam = key
        notes = []
        if overlapped(method) and g["micro_batch_own_s"].notna().any() and hetero == "none":
            mb = 100 * (g["micro_batch_own_s"].median() / g["micro_batch_seq_s"].median() - 1)
            sync = 100 * (g["sync_own_s"].median() / g["sync_seq_s"].median() - 1)
            notes.append(NOTES["overlap"].format(mb=mb, sync=sync))
        if str(layout).endswith("x4") or str(layout).startswith("4x") or str(layout) == "1x4":
            notes.append(NOTES["four"])
        if hetero != "none":
            notes.append(NOTES["hetero"])
        spread = g["measured_s_per_step"].max() / g["measured_s_per_step"].min()
        if len(g) > 1 and spread > 1.5:
            notes.append(NOTES["load"].format(spread=spread))
        if g["primitives"].iloc[0].startswith("unshaped"):
            notes.append(NOTES["model"])
        out.append(
            {
                "experiment": exp,
                "layout": layout,
                "link Mbit/s": "loopback" if not rate else f"{rate:g}",
                "hetero": hetero,
                "method": method_label(method)
                + ("" if H is None or (isinstance(H, float) and math.isnan(H)) else f" H={int(H)}"),
                "mode": mode,
                "run family": fam,
                "budget": g["budget"].iloc[0],
                "n": gap_seq.n,
                "measured s/step": g["measured_s_per_step"].mean(),
                "simulated s/step (sequential primitives)": g["predicted_seq_s_per_step"].mean(),
                "error % (sequential)": gap_seq.describe().replace(" (n = ", " (n=").split(" (n")[0],
                "simulated s/step (own primitives)": g["predicted_own_s_per_step"].mean(),
                "error % (own)": gap_own.describe().split(" (n")[0] if gap_own.n else "no trace",
                "simulated s/step (sequential + contention)": g["predicted_contention_s_per_step"].mean(),
                "error % (sequential + contention)": gap_con.describe().split(" (n")[0],
                "measured samples/step": g["measured_samples_per_step"].mean(),
                "simulated samples/step": g["predicted_samples_per_step"].mean(),
                "where the testbed is not faithful": "; ".join(notes),
                "_err_seq": gap_seq.mean_pct,
                "_err_own": gap_own.mean_pct,
                "_err_con": gap_con.mean_pct,
            }
        )
    return pd.DataFrame(out)


def write_validation(root: str, out: str) -> list[str]:
    df = validation_rows(root)
    table = summary(df)
    os.makedirs(out, exist_ok=True)
    csv_path = os.path.join(out, "validation.csv")
    runs_path = os.path.join(out, "validation_runs.csv")
    md_path = os.path.join(out, "validation.md")
    table.drop(columns=["_err_seq", "_err_own", "_err_con"]).to_csv(csv_path, index=False, float_format="%.4g")
    df.to_csv(runs_path, index=False, float_format="%.4g")
    published = published_table()
    published_path = os.path.join(out, "validation_published.csv")
    published.to_csv(published_path, index=False, float_format="%.4g")
    added = added_table()  # sources added after the simulator was built (issue 51)
    added_path = os.path.join(out, "validation_published_after.csv")
    added.to_csv(added_path, index=False, float_format="%.4g")
    virtual = virtual_clock_rows(root)
    paths = [md_path, published_path, added_path, csv_path, runs_path]
    text = published_markdown(published, added, ADDED_SOURCES) + "\n" + markdown(df, table)
    if not virtual.empty:
        virtual_path = os.path.join(out, "validation_virtual_clock.csv")
        virtual.to_csv(virtual_path, index=False, float_format="%.4g")
        paths.append(virtual_path)
        text += virtual_markdown(virtual)
    with open(md_path, "w") as fh:
        fh.write(text)
    return paths


def virtual_markdown(virtual: pd.DataFrame) -> str:
    keys = ["experiment", "method", "mode", "workers", "hetero"]
    agg = (
        virtual.groupby(keys, sort=True)
        .agg(
            runs=("seed", "size"),
            virtual=("virtual s/step", "mean"),
            simulated=("simulated s/step", "mean"),
            worst=("error %", lambda s: round(float(s.abs().max()), 2)),
            virtual_spp=("virtual samples/step", "mean"),
            simulated_spp=("simulated samples/step", "mean"),
        )
        .reset_index()
        .rename(
            columns={
                "virtual": "virtual clock s/step",
                "simulated": "simulated s/step",
                "worst": "largest abs. error %",
                "virtual_spp": "virtual samples/step",
                "simulated_spp": "simulated samples/step",
            }
        )
    )
    return "\n".join(
        [
            "## Against the engine's virtual clock (both modelled, neither measured)",
            "",
            "Runs on `clock.mode=virtual` (issue 31: real training, modelled seconds) simulated from the "
            "clock's own costs (summary.json `clock`): the two models of one schedule, over the same window.",
            "",
            to_markdown(agg, ".4g"),
            "",
        ]
    )


def markdown(df: pd.DataFrame, table: pd.DataFrame) -> str:
    fit = df.attrs.get("link_fit", {})
    con = df.attrs.get("contention", {})
    shown = table.drop(columns=["_err_seq", "_err_own", "_err_con", "run family"])
    by_method = (
        table.assign(m=table["method"].str.split(" H=").str[0])
        .groupby("m")[["_err_seq", "_err_own", "_err_con"]]
        .agg(lambda s: float(np.nanmedian(np.abs(s))) if s.notna().any() else math.nan)
    )
    lines = [
        "# The scale simulator against the CPU testbed's runs",
        "",
        "Generated by `python experiments/simulate.py --validation results/sim` from `results/cpu` "
        "(analysis/sim_validation.py). Each run's time per committed step over the window "
        "`steady_rate` measures, simulated from its setting's **sequential primitives** (the DDP run of "
        "the same seed: one micro-batch and one sync, each alone) and from the run's **own primitives** "
        "(its micro-batch and sync as measured beside each other). Error = (simulated − measured) / "
        "measured, paired by seed: mean [95 % interval]; one run: no interval. "
        "The simulation predicts time, not loss.",
        "",
        f"Link model for the runs without a trace: α = {fit.get('alpha_s', math.nan) * 1e3:.2f} ms per ring step, "
        f"efficiency η = {fit.get('efficiency', math.nan):.2f} of the configured rate "
        f"(costmodel.calibrate on {fit.get('samples', 0)} traced DDP syncs over shaped links).",
        "",
        f"The testbed's contention term (`--contention`, off on a GPU): compute +{con.get('compute', 0):.0%} and "
        f"the sync +{con.get('sync', 0):.0%} when they overlap — the medians over {con.get('runs', 0)} traced "
        "overlapped runs of their own micro-batch and sync over the sequential ones: one pair for the testbed, "
        "not fitted per row (the runs it comes from are also rows below, so it is not an out-of-sample test).",
        "",
        "## Median absolute error per method over settings",
        "",
        to_markdown(
            by_method.rename(
                columns={
                    "_err_seq": "abs. error % (sequential primitives)",
                    "_err_own": "abs. error % (own primitives)",
                    "_err_con": "abs. error % (sequential + contention)",
                }
            )
            .reset_index()
            .rename(columns={"m": "method"}),
            ".1f",
        ),
        "",
        "## Per setting",
        "",
        to_markdown(shown, ".3g"),
        "",
    ]
    return "\n".join(lines)
