"""What one benchmark run measured, read back from its run folder (summary.json, metrics.csv,
trace.json) — the same files every training run leaves."""

from __future__ import annotations

import csv
import os
import statistics

from acco.engine.trace import backward_overlap, load_spans, summarize_overlap
from acco.runtime.summary import RunSummary, read_summary


def _median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def steady_rate(metrics_path: str) -> dict:
    """samples/s and seconds per committed step between the first and the last committed steps.
    The first holds the warm-up of the first micro-batches and, for ACCO/DPU/WP, the prologue
    round. The last is left out too: those methods know it in advance and compute nothing beside
    its sync (communicate_only), while the samples it commits were computed
    during the step before; counting it would credit them with compute they did not do in its
    time (with 3 steps, ACCO's samples/s by up to 4/3)."""
    with open(metrics_path) as f:
        rows = list(csv.DictReader(f))
    if len(rows) < 3:
        raise ValueError(f"{metrics_path}: need at least 3 committed steps, got {len(rows)}")
    first, last = rows[0], rows[-2]
    dt = float(last["wall_time_s"]) - float(first["wall_time_s"])
    steps = len(rows) - 2
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
    # the compute thread's own CPU seconds per micro-batch: the same work
    # costs more CPU when it shares caches and memory bandwidth with a sync running beside it
    micro_cpu = [e["args"]["cpu_s"] for e in spans if e.get("cat") == "compute" and "cpu_s" in e.get("args", {})]
    sync_spans = [e for e in spans if e.get("cat") == "communication" and e["name"].startswith("sync")]
    syncs = [e["dur"] / 1e6 for e in sync_spans]
    # CPU seconds a sync cost outside the compute thread (the communication thread and gloo's I/O
    # threads; all of it for a sequential sync): side_cpu_seconds
    side_cpu = [e["args"]["side_cpu_s"] for e in sync_spans if "side_cpu_s" in e.get("args", {})]
    # the whole machine's busy CPU seconds during a sync (every rank records the same machine-wide
    # quantity): in the sequential reference, where nothing computes meanwhile, what the link costs
    machine_cpu = [e["args"]["machine_cpu_s"] for e in sync_spans if "machine_cpu_s" in e.get("args", {})]
    by_name: dict[str, list[float]] = {}
    for e in spans:
        if e.get("cat") == "communication" and e["name"] in ("reduce_scatter", "all_gather", "all_reduce counts"):
            by_name.setdefault(e["name"], []).append(e["dur"] / 1e6)
    rows = summarize_overlap(trace_path)
    eff = [r["overlap_efficiency"] for r in rows if min(r["compute_s"], r["comm_s"]) > 0]
    mb = _median(micro)
    # a DDP whose reduction overlaps its last backward (the flat engine's overlapped ddp, PyTorch's
    # DDP traced per bucket): its buckets' busy seconds per step and the share the backward hid
    buckets = [r for r in backward_overlap(trace_path) if r["step"] > 1]
    return {
        "t_micro_batch_s": mb,
        "t_comp_round_s": mb * accum if mb is not None else None,
        "t_micro_batch_cpu_s": _median(micro_cpu),
        "t_sync_s": _median(syncs[1:] or syncs),  # the first sync also sets up the gloo pairs
        "sync_side_cpu_s": _median(side_cpu[1:] or side_cpu),
        "sync_machine_cpu_s": _median(machine_cpu[1:] or machine_cpu),
        "t_reduce_scatter_s": _median(by_name.get("reduce_scatter", [])[1:]),
        "t_all_gather_s": _median(by_name.get("all_gather", [])[1:]),
        "overlap_efficiency": statistics.mean(eff) if eff else None,
        "overlap_efficiency_min": min(eff) if eff else None,
        "t_bucket_reductions_s": _median([r["reduce_s"] for r in buckets]),
        "backward_hidden_fraction": _median([r["hidden_fraction"] for r in buckets]),
    }


def rank_rates(trace_path: str) -> list[float]:
    """Each rank's own micro-batch rate (1/s) in this run: micro-batches over the time its compute
    lane spent on them (fwd+bwd, and a slow worker's slowdown sleep), so waiting for the others or
    for a sync does not count, while sharing the cores with the other workers' compute and
    communication (the run's own layout) does. The first committed step (warm-up) is left out."""
    spans = load_spans(trace_path)
    later = [e for e in spans if e.get("args", {}).get("step", 1) > 1] or spans
    rates = []
    for rank in sorted({e["pid"] for e in later}):
        own = [e for e in later if e["pid"] == rank]
        n = sum(1 for e in own if e.get("cat") == "compute")
        busy = sum(e["dur"] for e in own if e.get("cat") == "compute" or e["name"] == "slowdown") / 1e6
        if n and busy > 0:
            rates.append(n / busy)
    return rates


def memory(summary: RunSummary) -> dict:
    ranks = summary.ranks()

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


def measure_run(out_dir: str, accum: int, micro_batch_size: int) -> dict:
    summary = read_summary(out_dir)
    if summary is None or not summary.completed:
        status = summary.status if summary else "left no summary.json"
        raise RuntimeError(f"{out_dir}: run {status}: {summary.error if summary else None}")
    out = {"link_mode": (summary.link or {}).get("mode"), "world": summary.world_size}
    out.update(steady_rate(os.path.join(out_dir, "metrics.csv")))
    out.update(trace_times(os.path.join(out_dir, "trace.json"), accum))
    rates = rank_rates(os.path.join(out_dir, "trace.json"))
    if rates:
        # samples/s if every rank computed at its own rate, never waiting (ACCO's limit), and if
        # every rank ran at the slowest one's (a synchronous method's)
        out["rank_samples_per_s"] = ";".join(f"{micro_batch_size * r:.2f}" for r in rates)
        out["sum_rank_samples_per_s"] = micro_batch_size * sum(rates)
        out["n_times_slowest_samples_per_s"] = micro_batch_size * len(rates) * min(rates)
    out.update(memory(summary))
    return out
