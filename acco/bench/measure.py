"""What one benchmark run measured, read back from its run folder (summary.json, metrics.csv,
trace.json) — the same files every training run leaves."""

from __future__ import annotations

import csv
import json
import os
import statistics

from acco.engine.trace import load_spans
from analysis.trace_summary import summarize


def _median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def steady_rate(metrics_path: str) -> dict:
    """samples/s and seconds per committed step after the first committed step (which holds the
    warm-up of the first micro-batches and, for ACCO/DPU, the prologue round)."""
    with open(metrics_path) as f:
        rows = list(csv.DictReader(f))
    if len(rows) < 2:
        raise ValueError(f"{metrics_path}: need at least 2 committed steps, got {len(rows)}")
    first, last = rows[0], rows[-1]
    dt = float(last["wall_time_s"]) - float(first["wall_time_s"])
    steps = len(rows) - 1
    samples = int(last["samples"]) - int(first["samples"])
    return {
        "samples_per_s": samples / dt,
        "s_per_step": dt / steps,
        "samples_per_step": samples / steps,
        "steps_measured": steps,
    }


def trace_times(trace_path: str, accum: int) -> dict:
    """Per-round compute (median micro-batch × accum), the median sync and its collectives, and the
    overlap efficiency (t_comp + t_comm − t_span)/min(t_comp, t_comm) per rank from the trace."""
    spans = load_spans(trace_path)
    micro = [e["dur"] / 1e6 for e in spans if e.get("cat") == "compute"]
    syncs = [e["dur"] / 1e6 for e in spans if e.get("cat") == "communication" and e["name"].startswith("sync")]
    by_name: dict[str, list[float]] = {}
    for e in spans:
        if e.get("cat") == "communication" and e["name"] in ("reduce_scatter", "all_gather", "all_reduce counts"):
            by_name.setdefault(e["name"], []).append(e["dur"] / 1e6)
    rows = summarize(trace_path)
    eff = [r["overlap_efficiency"] for r in rows if min(r["compute_s"], r["comm_s"]) > 0]
    mb = _median(micro)
    return {
        "t_micro_batch_s": mb,
        "t_comp_round_s": mb * accum if mb is not None else None,
        "t_sync_s": _median(syncs[1:] or syncs),  # the first sync also sets up the gloo pairs
        "t_reduce_scatter_s": _median(by_name.get("reduce_scatter", [])[1:]),
        "t_all_gather_s": _median(by_name.get("all_gather", [])[1:]),
        "overlap_efficiency": statistics.mean(eff) if eff else None,
        "overlap_efficiency_min": min(eff) if eff else None,
    }


def memory(summary: dict) -> dict:
    ranks = [r for r in summary.get("per_rank") or [] if r]

    def top(key):
        vals = [r.get(key) for r in ranks if r.get(key) is not None]
        return max(vals) if vals else None

    out = {
        k: top(k)
        for k in (
            "peak_rss_bytes",
            "cuda_max_allocated_bytes",
            "optimizer_state_bytes",
            "param_bytes",
            "grad_bytes",
            "comm_buffer_bytes",
        )
    }
    out["model_state_bytes"] = sum(
        out[k] or 0 for k in ("param_bytes", "grad_bytes", "optimizer_state_bytes", "comm_buffer_bytes")
    )
    out["peak_rss_per_rank"] = ";".join(str(r.get("peak_rss_bytes")) for r in ranks)
    return out


def measure_run(out_dir: str, accum: int) -> dict:
    with open(os.path.join(out_dir, "summary.json")) as f:
        summary = json.load(f)
    if summary.get("status") != "completed":
        raise RuntimeError(f"{out_dir}: run {summary.get('status')}: {summary.get('error')}")
    out = {"link_mode": (summary.get("link") or {}).get("mode"), "world": summary["world_size"]}
    out.update(steady_rate(os.path.join(out_dir, "metrics.csv")))
    out.update(trace_times(os.path.join(out_dir, "trace.json"), accum))
    out.update(memory(summary))
    return out
