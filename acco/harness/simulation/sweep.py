"""Scenarios -> each method's simulated outputs (one dict per method and scenario).

A scenario is a model, a topology, the micro-batches per committed step per GPU (`accum`, A),
a straggler distribution and the local methods' (H, F, τ). The methods process the same samples
per committed step: DDP, DPU and WP compute A micro-batches per round, ACCO A/2 per round (two
rounds per committed step, the paper's "ACCO 1 vs DDP 2": ACCO needs an even A and is left out
otherwise), DiLoCo and Streaming DiLoCo A per inner step on every GPU. Every method of one scenario
sees the same straggler draws (common random numbers), so their differences are not sampling noise
of the draws.

A DiLoCo replica is one GPU (`replica_gpus` = 1, as this repo runs it) or G GPUs that train with
sharded data parallelism every inner step (reduce-scatter, AdamW on the shard, all-gather inside the
replica: the setting of every DiLoCo paper); the outer sync runs between replicas, and a replica's
inner step waits for its slowest GPU. Every method has a payload precision (topology.PRECISION_BYTES;
the outer gradients also a compression ratio), a measured step time can replace 6·Ψ·tokens / MFU
(`step_time_s`: one step's forward + backward on one GPU), and `contention` slows compute beside a
running sync (off by default: a GPU's copy engines and NICs do not take its SMs' time as the CPU
testbed's shared cores do).

Speed-ups are samples/s over DDP's: the blocking one (the paper's baseline as the suite ran it)
and the one whose reduce-scatter overlaps the last backward (`ddp_overlap`, the baseline as PyTorch's
DDP, ZeRO's overlap_comm and FSDP run it). `ddp_allreduce` is data parallelism without ZeRO (PyTorch
DDP's default): each bucket all-reduced in the last backward, every GPU steps the whole model.
Memory per GPU is the model state of Table 1's formulas
(acco/analytic/table1.py TABLE1_FORMULAS, K = 12; activations not counted); `fits` says whether it is
below the GPU's memory.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from functools import partial

import numpy as np

from acco.analytic.overlap import back_to_back_s
from acco.analytic.table1 import TABLE1_FORMULAS

from . import fsdp, schedules
from .compute import forward_share, recompute_factor
from .models import ModelSpec, model
from .stragglers import Stragglers
from .topology import (
    Topology,
    compute_s,
    ddp_overlap_latency_s,
    ddp_overlap_parts,
    inner_step_s,
    replica_groups,
    replica_sync_parts,
    sync_parts,
)
from .wan import Links, mean_s, outer_syncs

METHODS = (
    "ddp",
    "ddp_overlap",
    "ddp_allreduce",
    *fsdp.FSDP_METHODS,
    "dpu",
    "wp",
    "acco",
    "acco_adaptive",
    "diloco",
    "streaming_diloco",
)
LABELS = {
    "ddp": "DDP+ZeRO-1",
    "ddp_overlap": "DDP+ZeRO-1, overlapped backward",
    "ddp_allreduce": "DDP (replicated), all-reduce in the backward",
    "fsdp": "FSDP FULL_SHARD (ZeRO-3), layer by layer",
    "fsdp_grad_op": "FSDP SHARD_GRAD_OP (ZeRO-2), layer by layer",
    "dpu": "DPU",
    "wp": "WP",
    "acco": "ACCO (deterministic)",
    "acco_adaptive": "ACCO (adaptive)",
    "diloco": "DiLoCo",
    "streaming_diloco": "Streaming DiLoCo",
}
# the DDPs whose buckets are reduced in the last backward (acco/analytic/overlap.py's rule)
BUCKETED = ("ddp_overlap", "ddp_allreduce")
TABLE1_KEY = {  # acco/analytic/table1.py TABLE1_FORMULAS's row for each method
    "ddp": "zero1",
    "ddp_overlap": "zero1",
    "ddp_allreduce": "ddp",
    "fsdp": "zero3",  # fsdp.memory_gb: + unsharded gradients under no_sync
    "fsdp_grad_op": "zero2",  # fsdp.memory_gb: ZeRO-1's row under no_sync
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
    accum: int = 2  # micro-batches per committed step per GPU (ACCO: even, half per round)
    grad_bytes: float = 2  # bytes per gradient value reduced (topology.PRECISION_BYTES)
    stragglers: Stragglers = field(default_factory=Stragglers)
    H: int = 32
    F: int = 4
    tau: int = 1
    rounds: int = 200
    seed: int = 0
    ddp_bucket_mb: float = 0.0  # 0: one flat buffer (method.impl=flat); 25: PyTorch DDP's buckets
    param_bytes: float = 2  # bytes per parameter gathered
    outer_bytes: float = 4  # the local methods' outer gradients (fp32, as this repo sends them)
    outer_compression: float = 1.0  # ≥ 1: the outer payload divided by it (value dropping, sparsity)
    replica_gpus: int = 1  # GPUs per DiLoCo replica (sharded data parallel inside it)
    layerwise: bool = False  # local methods: layer-wise fragments (schedules.local)
    strided: bool = False  # layer-wise fragments: layers k, k+F, ... (else consecutive layers)
    prefetch: bool = False  # ddp and the replicas' inner step: the gather prefetched under the forward
    contention: float = 0.0  # compute slowdown beside a running sync (dpu, wp, acco)
    sync_contention: float = 0.0  # sync slowdown beside compute (dpu, wp, acco)
    step_time_s: float = 0.0  # > 0: one step's measured forward + backward on one GPU (replaces FLOPs)
    optimizer: bool = True  # False: optimizer steps take no time (as the DiLoCo papers' simulations)
    # the fsdp methods (fsdp.py): FSDP's forward and backward prefetch, no_sync while accumulating
    forward_prefetch: bool = True
    backward_prefetch: bool = True
    fsdp_no_sync: bool = False
    links: Links = field(default_factory=Links)  # wide-area links (wan.py); default: the uniform network
    recompute: bool = False  # activation recomputation: one more forward per micro-batch (compute.py)

    def __post_init__(self):
        if self.accum < 1:
            raise ValueError(f"accum={self.accum}: at least one micro-batch per committed step")
        if self.outer_compression < 1:
            raise ValueError(f"outer_compression={self.outer_compression}: a ratio >= 1")
        if self.replica_gpus < 1 or self.topo.workers % self.replica_gpus:
            raise ValueError(f"replica_gpus={self.replica_gpus} must divide the {self.topo.workers} GPUs")
        if self.replica_gpus > 1:
            replica_groups(self.topo, self.replica_gpus)  # raises on a replica that splits nodes unevenly
        if self.contention < 0 or self.sync_contention < 0:
            raise ValueError("contention terms are slowdown fractions >= 0")
        self.links.check(self.topo.nodes)

    @property
    def replicas(self) -> int:
        return self.topo.workers // self.replica_gpus


def applicable(method: str, sc: Scenario) -> bool:
    """ACCO splits a step's micro-batches in two halves: it needs an even accum."""
    return not (method.startswith("acco") and sc.accum % 2)


def scenario(model_name: str, topo: Topology, **kw) -> Scenario:
    return Scenario(model(model_name), topo, **kw)


def memory_gb(method: str, params: float, workers: int, replica_gpus: int = 1, fsdp_no_sync: bool = False) -> float:
    if method in fsdp.FSDP_METHODS:
        return fsdp.memory_gb(method, params, workers, fsdp_no_sync)
    if method in ("diloco", "streaming_diloco") and replica_gpus > 1:
        # sharded inside the replica: everything, outer vector included, over its G GPUs
        return TABLE1_FORMULAS["diloco"][0](12, workers) / replica_gpus * params / 1e9
    return TABLE1_FORMULAS[TABLE1_KEY[method]][0](12, workers) * params / 1e9


def micro_batch_s(sc: Scenario) -> float:
    """One micro-batch's forward + backward: the measured step over accum (its recomputation, if any,
    measured with it), or 6·Ψ·tokens at the MFU of its tokens (compute.py), × 4/3 with recomputation."""
    if sc.step_time_s:
        return sc.step_time_s / sc.accum
    flops = sc.model.flops_per_micro_batch()
    return compute_s(flops, sc.topo, sc.model.tokens) * recompute_factor(sc.recompute)


def primitives(sc: Scenario) -> dict:
    """The micro-batch time, the local methods' inner step and each method's sync time (seconds):
    DDP's is what its sync leaves exposed (schedules.exposed_sync), the overlapped methods' the whole
    sync (× 1 + sync_contention), the local methods' one fragment's outer sync."""
    P, topo, L = sc.model.params, sc.links.effective(sc.topo), sc.model.layers  # wan.py: slowest link, TCP cap
    mu = micro_batch_s(sc)
    forward = forward_share(sc.recompute and not sc.step_time_s) * mu
    parts = {
        m: sync_parts(m, P, topo, sc.grad_bytes, sc.param_bytes, ddp_bucket_mb=sc.ddp_bucket_mb, optimizer=sc.optimizer)
        for m in ("ddp", "dpu", "wp", "acco", "acco_adaptive")
    }
    outer = sc.outer_bytes / sc.outer_compression
    per_sync = {}
    for m, F in (("diloco", 1), ("streaming_diloco", sc.F)):
        one = partial(
            sync_parts, m, P, fragments=F, outer_bytes=outer, replica_gpus=sc.replica_gpus, optimizer=sc.optimizer
        )
        parts[m] = one(topo)
        # wide-area links (wan.py): every outer sync of run()'s periods, jittered per sync, CPU quantisation added
        syncs = max(sc.rounds, 4 * sc.H) // sc.H * F
        per_sync[m] = outer_syncs(sc.links, sc.topo, syncs, sc.seed, one, P / F / sc.replica_gpus)
    if sc.replica_gpus > 1:
        inside = replica_sync_parts(P, topo, sc.replica_gpus, sc.grad_bytes, sc.param_bytes)
        inner = float(
            schedules.exposed_sync(
                inside.reduce_s, inside.step_s if sc.optimizer else 0.0, inside.gather_s, forward, L, sc.prefetch
            )
        )
    else:
        inner = inner_step_s(P, topo) if sc.optimizer else 0.0
    d = parts["ddp"]
    sync = {m: parts[m].total * (1 + sc.sync_contention) for m in ("dpu", "wp", "acco", "acco_adaptive")}
    sync["ddp"] = float(schedules.exposed_sync(d.reduce_s, d.step_s, d.gather_s, forward, L, sc.prefetch))
    sync["diloco"], sync["streaming_diloco"] = mean_s(per_sync["diloco"]), mean_s(per_sync["streaming_diloco"])
    # the DDP that reduces its buckets in the last backward (acco/analytic/overlap.py's rule): its
    # buckets, each one's reduce-scatter, the tail (the step and the gather); sync_s: all of it
    overlap = ddp_overlap_parts(P, topo, sc.grad_bytes, sc.param_bytes, sc.ddp_bucket_mb or None, sc.optimizer)
    if sc.prefetch:  # the gather layer by layer under the next step's first forward (fsdp.py)
        overlap = fsdp.prefetched_overlap(overlap, P, L, topo, sc.param_bytes, forward)
    # each bucket's ring latency pipelines behind the bucket before (overlap.queued_s): back to back, one
    latency = {m: ddp_overlap_latency_s(topo, m == "ddp_allreduce") for m in BUCKETED}
    sync["ddp_overlap"] = back_to_back_s(overlap[1], [latency["ddp_overlap"]] * len(overlap[1])) + overlap[2]
    # the same without ZeRO: each bucket all-reduced in the last backward, every GPU steps it all
    replicated = ddp_overlap_parts(P, topo, sc.grad_bytes, sc.param_bytes, sc.ddp_bucket_mb or None, sc.optimizer, True)
    lat_ar = [latency["ddp_allreduce"]] * len(replicated[1])
    sync["ddp_allreduce"] = back_to_back_s(replicated[1], lat_ar) + replicated[2]
    # FSDP's per-layer collectives (fsdp.py); its sync_s: all of them end to end, then the optimizer
    costs = fsdp.layer_costs(P, L, topo, sc.grad_bytes, sc.param_bytes, sc.optimizer)
    for m in fsdp.FSDP_METHODS:
        sync[m] = float(fsdp.sync_s(m, costs, sc.accum, sc.fsdp_no_sync))
    return {
        "micro_batch_s": mu,
        "inner_step_s": inner,
        "sync_s": sync,
        "parts": parts,
        "outer_syncs": per_sync,
        "ddp_overlap": overlap,
        "ddp_allreduce": replicated,
        "bucket_latency_s": latency,
        "fsdp": costs,
    }


def replica_factors(f: np.ndarray, replica_gpus: int) -> np.ndarray:
    """(R, B, N) per-GPU slowdowns -> (R, B, N/G): a replica's synchronous inner step waits for its
    slowest GPU (replicas are consecutive GPUs: whole nodes, or slices of one)."""
    if replica_gpus == 1:
        return f
    R, B, N = f.shape
    return f.reshape(R, B, N // replica_gpus, replica_gpus).max(-1)


def timings(method: str, mu, f, m, sc: Scenario, inner=0.0) -> schedules.Timing:
    """One method over B scenarios that share (accum, H, F, τ, replicas, ...): mu, m, inner (the local
    methods' inner step) of shape (B,); f per GPU (local methods: per replica, replica_factors)."""
    A = sc.accum
    if not applicable(method, sc):
        raise ValueError(f"{method} needs an even accum (half a step per round), got {A}")
    layers = sc.model.layers if sc.layerwise else 0
    if method == "ddp":
        return schedules.ddp(mu, f, m, A)
    if method in BUCKETED or method in fsdp.FSDP_METHODS:
        raise ValueError(f"{method} is simulated one scenario at a time (its own buckets or layers)")
    if method in ("dpu", "wp"):
        return schedules.overlapped(mu, f, m, A, 1, contention=sc.contention)
    if method in ("acco", "acco_adaptive"):
        return schedules.overlapped(mu, f, m, A // 2, 2, adaptive=method == "acco_adaptive", contention=sc.contention)
    if method == "diloco":
        return schedules.local(mu, replica_factors(f, sc.replica_gpus), m, A, sc.H, 1, 0, inner, layers)
    if method == "streaming_diloco":
        f_rep = replica_factors(f, sc.replica_gpus)
        return schedules.local(mu, f_rep, m, A, sc.H, sc.F, sc.tau, inner, layers, sc.strided)
    raise ValueError(f"unknown method {method!r}: use one of {', '.join(METHODS)}")


def overlap_timing(prim: dict, f, sc: Scenario, method: str = "ddp_overlap") -> schedules.Timing:
    """An overlapped ddp (`BUCKETED`) of one scenario (B = 1): its own buckets."""
    buckets, reduce_s, tail_s = prim[method]
    mu = np.array([prim["micro_batch_s"]])
    latency = [np.array([prim["bucket_latency_s"][method]])] * len(reduce_s)
    share = 1.0 - forward_share(sc.recompute and not sc.step_time_s)  # the backward's, recomputation in it
    overlap = schedules.Overlap(
        buckets, [np.array([r]) for r in reduce_s], np.array([tail_s]), share=share, latency_s=latency
    )
    return schedules.ddp(mu, f, np.array([prim["sync_s"][method]]), sc.accum, overlap)


def _stack(parts: list[schedules.Timing]) -> schedules.Timing:
    fields = schedules.Timing.__dataclass_fields__
    return schedules.Timing(*(np.concatenate([getattr(t, k) for t in parts], axis=-1) for k in fields))


def beside(method: str, sc: Scenario) -> float:
    """Micro-batches per GPU between two syncs (what a sync hides under, or is amortised over)."""
    if method.startswith("acco"):
        return sc.accum / 2
    if method == "diloco":
        return sc.accum * sc.H
    if method == "streaming_diloco":
        return sc.accum * sc.H / sc.F
    return sc.accum


def _group_key(sc: Scenario):
    return (
        sc.topo.workers,
        sc.topo.gpus_per_node,
        sc.accum,
        sc.H,
        sc.F,
        sc.tau,
        sc.rounds,
        sc.replica_gpus,
        sc.model.layers if sc.layerwise else 0,
        sc.strided,
        sc.contention,
    )


def _schedule_syncs(prims: list[dict], method: str, m: np.ndarray) -> np.ndarray:
    """What the schedule gets as the sync time: for a local method whose outer syncs differ (wan.py's
    jitter), each sync's own, (syncs, B); otherwise the one time `m` (B,)."""
    if method not in ("diloco", "streaming_diloco"):
        return m
    per_sync = np.stack([p["outer_syncs"][method] for p in prims], axis=1)
    return per_sync if np.any(per_sync != per_sync[:1]) else m


def _outer_percentile(prim: dict, method: str, q: float) -> float:
    """The q-th percentile of a local method's outer syncs (nan for the other methods)."""
    if method not in ("diloco", "streaming_diloco"):
        return math.nan
    return float(np.percentile(prim["outer_syncs"][method], q))


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
        for method in (m for m in methods if applicable(m, first)):
            m = np.array([p["sync_s"][method] for p in prims])
            if method in BUCKETED:
                parts = [
                    overlap_timing(p, f[:, j : j + 1], scenarios[i], method) for j, (i, p) in enumerate(zip(idx, prims))
                ]
                per_method[method] = (_stack(parts), m)
                continue
            if method in fsdp.FSDP_METHODS:  # layer by layer, each scenario its own layers and costs
                parts = [
                    fsdp.scenario_timing(method, p, f[:, j : j + 1], scenarios[i])
                    for j, (i, p) in enumerate(zip(idx, prims))
                ]
                per_method[method] = (_stack(parts), m)
                continue
            per_method[method] = (timings(method, mu, f, _schedule_syncs(prims, method, m), first, inner), m)
        for j, i in enumerate(idx):
            sc = scenarios[i]
            rates = {  # the data-parallel baselines' samples/s (one GPU a worker)
                method: per_method[method][0].micro_batches[j] * sc.model.micro_batch / per_method[method][0].step_s[j]
                for method in ("ddp", "ddp_overlap")
                if method in per_method
            }
            ddp_rate, overlap_rate = rates.get("ddp"), rates.get("ddp_overlap")
            for k, method in enumerate(methods):
                if method not in per_method:
                    continue
                t, m = per_method[method]
                per_worker = sc.replica_gpus if method in ("diloco", "streaming_diloco") else 1
                seqs = t.micro_batches[j] * per_worker * sc.model.micro_batch
                rate = seqs / t.step_s[j]
                mem = memory_gb(method, sc.model.params, N, sc.replica_gpus, sc.fsdp_no_sync)
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
                    # the local methods' outer syncs over the run (wan.py's jitter): median and p90 beside the mean
                    "outer_sync_p50_s": _outer_percentile(prims[j], method, 50),
                    "outer_sync_p90_s": _outer_percentile(prims[j], method, 90),
                    "sync_over_compute": m[j] / (mu[j] * beside(method, sc)),
                    "step_s": t.step_s[j],
                    "samples_per_s": rate,
                    "tokens_per_s_per_gpu": rate * sc.model.seq_len / N,
                    "speedup_vs_ddp": rate / ddp_rate if ddp_rate else float("nan"),
                    # against the DDP that hides what its last backward can (the baseline at its best)
                    "speedup_vs_ddp_overlap": rate / overlap_rate if overlap_rate else float("nan"),
                    "idle_fraction": t.idle[j],
                    "batch_per_step": seqs,
                    "batch_p5": t.micro_batches_p5[j] * per_worker * sc.model.micro_batch,
                    "batch_p95": t.micro_batches_p95[j] * per_worker * sc.model.micro_batch,
                    "memory_gb": mem,
                    "fits": mem <= sc.topo.memory_gb,
                }
    return [r for r in rows if r is not None]


def with_topology(sc: Scenario, **changes) -> Scenario:
    return replace(sc, topo=replace(sc.topo, **changes))


def utilization(sc: Scenario, method: str, gbps) -> np.ndarray:
    """Compute utilization (1 − idle fraction: compute time over elapsed) of `method` at each inter-node
    bandwidth in `gbps` (Gbit/s per node: one link every ring of the node uses, as --inter-gbps
    alone sets it), the scenarios simulated in one batch."""
    scs = [with_topology(sc, inter_bytes_per_s=float(g) * 1e9 / 8, nics_per_node=1) for g in gbps]
    return np.array([1.0 - r["idle_fraction"] for r in run(scs, [method])])


def bandwidth_for_utilization(
    sc: Scenario, method: str, target: float, lo: float = 0.01, hi: float = 1e5, points: int = 121
) -> tuple[float, float]:
    """(the inter-node Gbit/s per node at which `method` reaches compute utilization `target`, the
    utilization at `hi`): a geometric grid, then a finer one between the two points that straddle the
    target. inf where even `hi` does not reach it (the utilization is then capped by something the
    network does not set: an exposed step, a latency, the schedule)."""
    grid = np.geomspace(lo, hi, points)
    cu = utilization(sc, method, grid)
    top = float(cu[-1])
    above = np.flatnonzero(cu >= target - 1e-12)
    if not len(above):
        return math.inf, top
    i = int(above[0])
    if i == 0:
        return float(grid[0]), top
    fine = np.geomspace(grid[i - 1], grid[i], 41)
    cu = utilization(sc, method, fine)
    return float(fine[int(np.flatnonzero(cu >= target - 1e-12)[0])]), top
