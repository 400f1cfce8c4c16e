"""Scenarios -> each method's simulated outputs (one dict per method and scenario).

A scenario is a model, a topology, the micro-batches per committed step per worker (`accum`, A),
a straggler distribution and the local methods' (H, F, τ). The methods process the same samples
per committed step: DDP, DPU and WP compute A micro-batches per round, ACCO A/2 per round (two
rounds per committed step, the paper's "ACCO 1 vs DDP 2"), DiLoCo and Streaming DiLoCo A per inner
step. Every method of one scenario sees the same straggler draws (common random numbers), so their
differences are not sampling noise of the draws.

Speed-ups are samples/s over DDP's: the blocking one (the paper's baseline as the suite ran it)
and the one whose reduce-scatter overlaps the last backward (`ddp_overlap`, the baseline as PyTorch's
DDP, ZeRO's overlap_comm and FSDP run it). Memory per GPU is the model state of Table 1's formulas
(acco/analytic/table1.py TABLE1_FORMULAS, K = 12; activations not counted); `fits` says whether it is
below the GPU's memory.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from acco.analytic.table1 import TABLE1_FORMULAS

from . import schedules
from .models import ModelSpec, model
from .stragglers import Stragglers
from .topology import Topology, compute_s, ddp_overlap_parts, inner_step_s, sync_s

METHODS = ("ddp", "ddp_overlap", "dpu", "wp", "acco", "acco_adaptive", "diloco", "streaming_diloco")
LABELS = {
    "ddp": "DDP+ZeRO-1",
    "ddp_overlap": "DDP+ZeRO-1, overlapped backward",
    "dpu": "DPU",
    "wp": "WP",
    "acco": "ACCO (deterministic)",
    "acco_adaptive": "ACCO (adaptive)",
    "diloco": "DiLoCo",
    "streaming_diloco": "Streaming DiLoCo",
}
TABLE1_KEY = {  # acco/analytic/table1.py TABLE1_FORMULAS's row for each method
    "ddp": "zero1",
    "ddp_overlap": "zero1",
    "dpu": "dpu",
    "wp": "wp",
    "acco": "acco",
    "acco_adaptive": "acco",
    "diloco": "diloco",
    "streaming_diloco": "diloco",
}


@dataclass(frozen=True)
class Scenario:
    model: ModelSpec
    topo: Topology
    accum: int = 2  # micro-batches per committed step per worker
    grad_bytes: int = 2
    stragglers: Stragglers = field(default_factory=Stragglers)
    H: int = 32
    F: int = 4
    tau: int = 1
    rounds: int = 200
    seed: int = 0
    ddp_bucket_mb: float = 0.0  # 0: one flat buffer (method.impl=flat); 25: PyTorch DDP's buckets

    def __post_init__(self):
        if self.accum < 2 or self.accum % 2:
            raise ValueError(
                f"accum={self.accum}: micro-batches per committed step must be even (ACCO does half per round)"
            )


def scenario(model_name: str, topo: Topology, **kw) -> Scenario:
    return Scenario(model(model_name), topo, **kw)


def memory_gb(method: str, params: float, workers: int) -> float:
    return TABLE1_FORMULAS[TABLE1_KEY[method]][0](12, workers) * params / 1e9


def primitives(sc: Scenario) -> dict:
    """The micro-batch time and each method's sync time (seconds)."""
    P = sc.model.params
    overlap = ddp_overlap_parts(P, sc.topo, sc.grad_bytes, 2, sc.ddp_bucket_mb or None)
    return {
        "micro_batch_s": compute_s(sc.model.flops_per_micro_batch(), sc.topo),
        "inner_step_s": inner_step_s(P, sc.topo),
        "ddp_overlap": overlap,  # (buckets, each one's reduce-scatter, the tail)
        "sync_s": {
            m: sync_s(m, P, sc.topo, sc.grad_bytes, 2, ddp_bucket_mb=sc.ddp_bucket_mb)
            for m in ("ddp", "dpu", "wp", "acco", "acco_adaptive")
        }
        | {
            "ddp_overlap": sum(overlap[1]) + overlap[2],
            "diloco": sync_s("diloco", P, sc.topo),
            "streaming_diloco": sync_s("streaming_diloco", P, sc.topo, fragments=sc.F),
        },
    }


def timings(method: str, mu, f, m, sc: Scenario, inner=0.0) -> schedules.Timing:
    """One method over B scenarios that share (accum, H, F, τ): mu, m, inner (the local methods'
    inner optimizer step) of shape (B,)."""
    A = sc.accum
    if method == "ddp":
        return schedules.ddp(mu, f, m, A)
    if method == "ddp_overlap":
        raise ValueError("ddp_overlap is simulated one scenario at a time (overlap_timing: its own buckets)")
    if method in ("dpu", "wp"):
        return schedules.overlapped(mu, f, m, A, 1)
    if method in ("acco", "acco_adaptive"):
        return schedules.overlapped(mu, f, m, A // 2, 2, adaptive=method == "acco_adaptive")
    if method == "diloco":
        return schedules.local(mu, f, m, A, sc.H, 1, 0, inner)
    if method == "streaming_diloco":
        return schedules.local(mu, f, m, A, sc.H, sc.F, sc.tau, inner)
    raise ValueError(f"unknown method {method!r}: use one of {', '.join(METHODS)}")


def overlap_timing(prim: dict, f, sc: Scenario) -> schedules.Timing:
    """The overlapped ddp of one scenario (B = 1): its own buckets."""
    buckets, reduce_s, tail_s = prim["ddp_overlap"]
    mu = np.array([prim["micro_batch_s"]])
    overlap = schedules.Overlap(buckets, [np.array([r]) for r in reduce_s], np.array([tail_s]))
    return schedules.ddp(mu, f, np.array([sum(reduce_s) + tail_s]), sc.accum, overlap)


def _stack(parts: list[schedules.Timing]) -> schedules.Timing:
    fields = schedules.Timing.__dataclass_fields__
    return schedules.Timing(*(np.concatenate([getattr(t, k) for t in parts], axis=-1) for k in fields))


def beside(method: str, sc: Scenario) -> float:
    """Micro-batches per worker between two syncs (what a sync hides under, or is amortised over)."""
    if method.startswith("acco"):
        return sc.accum // 2
    if method == "diloco":
        return sc.accum * sc.H
    if method == "streaming_diloco":
        return sc.accum * sc.H // sc.F
    return sc.accum


def _group_key(sc: Scenario):
    return (sc.topo.workers, sc.topo.gpus_per_node, sc.accum, sc.H, sc.F, sc.tau, sc.rounds)


def run(scenarios: list[Scenario], methods=METHODS) -> list[dict]:
    """Every method on every scenario; scenarios that share workers and schedule parameters are
    simulated together (one numpy batch). Each scenario's straggler factors come from its own seed,
    so scenarios that differ only in a straggler parameter share the underlying random draws."""
    groups: dict = {}
    for i, sc in enumerate(scenarios):
        groups.setdefault(_group_key(sc), []).append(i)
    rows: list[dict | None] = [None] * (len(scenarios) * len(methods))
    for idx in groups.values():
        first = scenarios[idx[0]]
        N, g = first.topo.workers, first.topo.gpus_per_node
        R = max(first.rounds, 4 * first.H)
        f = np.concatenate(
            [scenarios[i].stragglers.factors(np.random.default_rng(scenarios[i].seed), R, 1, N, g) for i in idx], axis=1
        )
        prims = [primitives(scenarios[i]) for i in idx]
        mu = np.array([p["micro_batch_s"] for p in prims])
        inner = np.array([p["inner_step_s"] for p in prims])
        per_method = {}
        for method in methods:
            m = np.array([p["sync_s"][method] for p in prims])
            if method == "ddp_overlap":
                parts = [overlap_timing(p, f[:, j : j + 1], scenarios[i]) for j, (i, p) in enumerate(zip(idx, prims))]
                per_method[method] = (_stack(parts), m)
                continue
            per_method[method] = (timings(method, mu, f, m, first, inner), m)
        for j, i in enumerate(idx):
            sc = scenarios[i]
            rates = {
                method: per_method[method][0].micro_batches[j] * sc.model.micro_batch / per_method[method][0].step_s[j]
                for method in methods
            }
            ddp_rate, overlap_rate = rates.get("ddp"), rates.get("ddp_overlap")
            for k, method in enumerate(methods):
                t, m = per_method[method]
                seqs = t.micro_batches[j] * sc.model.micro_batch
                rate = seqs / t.step_s[j]
                mem = memory_gb(method, sc.model.params, N)
                rows[i * len(methods) + k] = {
                    "method": method,
                    "label": LABELS[method],
                    "model": sc.model.name,
                    "params": sc.model.params,
                    "workers": N,
                    "gpus_per_node": g,
                    "nodes": sc.topo.nodes,
                    "inter_gbps": sc.topo.inter_bytes_per_s * 8 / 1e9,
                    "stragglers": sc.stragglers.describe(),
                    "micro_batch_s": mu[j],
                    "sync_s": m[j],
                    "sync_over_compute": m[j] / (mu[j] * beside(method, sc)),
                    "step_s": t.step_s[j],
                    "samples_per_s": rate,
                    "speedup_vs_ddp": rate / ddp_rate if ddp_rate else float("nan"),
                    # against the DDP that hides what its last backward can (the baseline at its best)
                    "speedup_vs_ddp_overlap": rate / overlap_rate if overlap_rate else float("nan"),
                    "idle_fraction": t.idle[j],
                    "batch_per_step": seqs,
                    "batch_p5": t.micro_batches_p5[j] * sc.model.micro_batch,
                    "batch_p95": t.micro_batches_p95[j] * sc.model.micro_batch,
                    "memory_gb": mem,
                    "fits": mem <= sc.topo.memory_gb,
                }
    return [r for r in rows if r is not None]


def with_topology(sc: Scenario, **changes) -> Scenario:
    return replace(sc, topo=replace(sc.topo, **changes))
