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
(TABLE1_FORMULAS, K = 12; activations not counted); `fits` says whether it is
below the GPU's memory.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
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
    SyncParts,
    Topology,
    compute_s,
    ddp_overlap_latency_s,
    ddp_overlap_parts,
    inner_step_s,
    replica_groups,
    replica_sync_parts,
    sync_parts,
)
from .variants import BUCKETED, LAYERWISE, LOCAL, OVERLAPPED, SEQUENTIAL, VARIANTS, Modelled, keys, modelled
from .wan import Links, mean_s, outer_syncs

# the built-in result keys and their labels (variants.VARIANTS); variants.keys() and labels() add the
# methods registered beside them
METHODS = tuple(v.key for v in VARIANTS)
LABELS = {v.key: v.label for v in VARIANTS}
# the data-parallel baselines the speed-ups are over: the blocking DDP and the one whose
# reduce-scatter overlaps the last backward
BASELINE, BASELINE_OVERLAPPED = "ddp", "ddp_overlap"


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
    # the fsdp methods: FSDP's forward and backward prefetch, no_sync while accumulating
    forward_prefetch: bool = True
    backward_prefetch: bool = True
    fsdp_no_sync: bool = False
    links: Links = field(default_factory=Links)  # wide-area links; default: the uniform network
    recompute: bool = False  # activation recomputation: one more forward per micro-batch

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
    """A method of several rounds per committed step splits a step's micro-batches between them (ACCO
    in two halves: it needs an even accum)."""
    return sc.accum % modelled(method).rounds_per_step == 0


def scenario(model_name: str, topo: Topology, **kw) -> Scenario:
    return Scenario(model(model_name), topo, **kw)


def memory_gb(method: str, params: float, workers: int, replica_gpus: int = 1, fsdp_no_sync: bool = False) -> float:
    facts = modelled(method)
    if facts.schedule == LAYERWISE:
        return fsdp.memory_gb(method, params, workers, fsdp_no_sync)
    per_param = TABLE1_FORMULAS[facts.table1_row][0](12, workers)
    if facts.schedule == LOCAL and replica_gpus > 1:
        # sharded inside the replica: everything, outer vector included, over its G GPUs
        return per_param / replica_gpus * params / 1e9
    return per_param * params / 1e9


def micro_batch_s(sc: Scenario) -> float:
    """One micro-batch's forward + backward: the measured step over accum (its recomputation, if any,
    measured with it), or 6·Ψ·tokens at the MFU of its tokens, × 4/3 with recomputation."""
    if sc.step_time_s:
        return sc.step_time_s / sc.accum
    flops = sc.model.flops_per_micro_batch()
    return compute_s(flops, sc.topo, sc.model.tokens) * recompute_factor(sc.recompute)


def primitives(sc: Scenario) -> dict:
    """The micro-batch time, the local methods' inner step and each method's sync time (seconds):
    DDP's is what its sync leaves exposed (schedules.exposed_sync), the overlapped methods' the whole
    sync (× 1 + sync_contention), the local methods' one fragment's outer sync."""
    P, topo, L = sc.model.params, sc.links.effective(sc.topo), sc.model.layers  # slowest link, TCP cap
    mu = micro_batch_s(sc)
    forward = forward_share(sc.recompute and not sc.step_time_s) * mu
    by_schedule: dict[str, list[Modelled]] = {}
    for facts in map(modelled, keys()):
        by_schedule.setdefault(facts.schedule, []).append(facts)
    parts = {
        f.key: sync_parts(
            f.key, P, topo, sc.grad_bytes, sc.param_bytes, ddp_bucket_mb=sc.ddp_bucket_mb, optimizer=sc.optimizer
        )
        for f in by_schedule.get(SEQUENTIAL, []) + by_schedule.get(OVERLAPPED, [])
    }
    sync = {f.key: parts[f.key].total * (1 + sc.sync_contention) for f in by_schedule.get(OVERLAPPED, [])}
    for f in by_schedule.get(SEQUENTIAL, []):
        d = parts[f.key]
        sync[f.key] = float(schedules.exposed_sync(d.reduce_s, d.step_s, d.gather_s, forward, L, sc.prefetch))
    per_sync = {}
    for f in by_schedule.get(LOCAL, []):
        parts[f.key], per_sync[f.key] = _outer_syncs(sc, topo, f)
        sync[f.key] = mean_s(per_sync[f.key])
    bucketed, latency = {}, {}
    for f in by_schedule.get(BUCKETED, []):
        bucketed[f.key], latency[f.key], sync[f.key] = _bucketed_sync(sc, topo, forward, f)
    # FSDP's per-layer collectives; its sync_s: all of them end to end, then the optimizer
    costs = fsdp.layer_costs(P, L, topo, sc.grad_bytes, sc.param_bytes, sc.optimizer)
    for f in by_schedule.get(LAYERWISE, []):
        sync[f.key] = float(fsdp.sync_s(f.key, costs, sc.accum, sc.fsdp_no_sync))
    return {
        "micro_batch_s": mu,
        "inner_step_s": _inner_step_s(sc, topo, forward),
        "sync_s": sync,
        "parts": parts,
        "outer_syncs": per_sync,
        **bucketed,  # each bucketed DDP's (buckets, reductions, tail) under its key
        "bucket_latency_s": latency,
        "fsdp": costs,
    }


def _outer_syncs(sc: Scenario, topo: Topology, f: Modelled) -> tuple[SyncParts, np.ndarray]:
    """A local method's outer sync (one fragment's: the scenario's F where it is fragmented) in its
    parts, and every outer sync of run()'s periods on the wide-area links (jittered per
    sync, CPU quantisation added)."""
    P, F = sc.model.params, sc.F if f.fragmented else 1
    one = partial(
        sync_parts,
        f.key,
        P,
        fragments=F,
        outer_bytes=sc.outer_bytes / sc.outer_compression,
        replica_gpus=sc.replica_gpus,
        optimizer=sc.optimizer,
    )
    syncs = max(sc.rounds, 4 * sc.H) // sc.H * F
    return one(topo), outer_syncs(sc.links, sc.topo, syncs, sc.seed, one, P / F / sc.replica_gpus)


def _bucketed_sync(sc: Scenario, topo: Topology, forward: float, f: Modelled):
    """A DDP that reduces its buckets in the last backward (the overlap model's rule, ddp_limits): its
    (buckets, each one's reduction, the tail: the step and the gather), the ring latency in each
    reduction, and its sync_s (all of it). Replicated (no ZeRO): each bucket all-reduced, every GPU
    steps it all, no gather."""
    P, L = sc.model.params, sc.model.layers
    overlap = ddp_overlap_parts(
        P, topo, sc.grad_bytes, sc.param_bytes, sc.ddp_bucket_mb or None, sc.optimizer, f.replicated
    )
    if sc.prefetch and not f.replicated:  # the gather layer by layer under the next step's first forward
        overlap = fsdp.prefetched_overlap(overlap, P, L, topo, sc.param_bytes, forward)
    # each bucket's ring latency pipelines behind the bucket before (overlap.queued_s): back to back, one
    latency = ddp_overlap_latency_s(topo, f.replicated)
    return overlap, latency, back_to_back_s(overlap[1], [latency] * len(overlap[1])) + overlap[2]


def _inner_step_s(sc: Scenario, topo: Topology, forward: float) -> float:
    """The local methods' inner step: AdamW on the whole model, or inside a replica of several GPUs
    the sharded step's exposed collectives."""
    if sc.replica_gpus == 1:
        return inner_step_s(sc.model.params, topo) if sc.optimizer else 0.0
    inside = replica_sync_parts(sc.model.params, topo, sc.replica_gpus, sc.grad_bytes, sc.param_bytes)
    return float(
        schedules.exposed_sync(
            inside.reduce_s,
            inside.step_s if sc.optimizer else 0.0,
            inside.gather_s,
            forward,
            sc.model.layers,
            sc.prefetch,
        )
    )


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
    A, facts = sc.accum, modelled(method)
    rounds = facts.rounds_per_step
    if not applicable(method, sc):
        raise ValueError(f"{method} needs an accum divisible by {rounds} (1/{rounds} of a step per round), got {A}")
    layers = sc.model.layers if sc.layerwise else 0
    if facts.schedule == SEQUENTIAL:
        return schedules.ddp(mu, f, m, A)
    if facts.schedule == OVERLAPPED:
        return schedules.overlapped(mu, f, m, A // rounds, rounds, adaptive=facts.adaptive, contention=sc.contention)
    if facts.schedule == LOCAL:  # DiLoCo: the whole model at once, waited for; streamed: F fragments, τ
        F, tau, strided = (sc.F, sc.tau, sc.strided) if facts.fragmented else (1, 0, False)
        return schedules.local(mu, replica_factors(f, sc.replica_gpus), m, A, sc.H, F, tau, inner, layers, strided)
    raise ValueError(f"{method} is simulated one scenario at a time (its own buckets or layers)")


def overlap_timing(prim: dict, f, sc: Scenario, method: str = BASELINE_OVERLAPPED) -> schedules.Timing:
    """A DDP whose buckets are reduced in the last backward (variants.BUCKETED) of one scenario
    (B = 1): its own buckets."""
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
    facts = modelled(method)
    if facts.schedule == OVERLAPPED and facts.rounds_per_step > 1:
        return sc.accum / facts.rounds_per_step
    if facts.schedule == LOCAL:
        return sc.accum * sc.H / sc.F if facts.fragmented else sc.accum * sc.H
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
    """What the schedule gets as the sync time: for a local method whose outer syncs differ (the wide-area
    links' jitter), each sync's own, (syncs, B); otherwise the one time `m` (B,)."""
    if modelled(method).schedule != LOCAL:
        return m
    per_sync = np.stack([p["outer_syncs"][method] for p in prims], axis=1)
    return per_sync if np.any(per_sync != per_sync[:1]) else m


def _outer_percentile(prim: dict, method: str, q: float) -> float:
    """The q-th percentile of a local method's outer syncs (nan for the other methods)."""
    if modelled(method).schedule != LOCAL:
        return math.nan
    return float(np.percentile(prim["outer_syncs"][method], q))


def run(scenarios: list[Scenario], methods: Sequence[str] | None = None) -> list[dict]:
    """Every method (result keys, variant names; default: all of them) on every scenario; scenarios
    that share workers and schedule parameters are simulated together (one numpy batch). Each
    scenario's straggler factors come from its own seed, so scenarios that differ only in a
    straggler parameter share the underlying random draws."""
    methods = keys() if methods is None else tuple(methods)
    facts = {method: modelled(method) for method in methods}
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
            if facts[method].schedule == BUCKETED:
                parts = [
                    overlap_timing(p, f[:, j : j + 1], scenarios[i], method) for j, (i, p) in enumerate(zip(idx, prims))
                ]
                per_method[method] = (_stack(parts), m)
                continue
            if facts[method].schedule == LAYERWISE:  # layer by layer, each scenario its own layers and costs
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
                for method in (BASELINE, BASELINE_OVERLAPPED)
                if method in per_method
            }
            ddp_rate, overlap_rate = rates.get(BASELINE), rates.get(BASELINE_OVERLAPPED)
            for k, method in enumerate(methods):
                if method not in per_method:
                    continue
                t, m = per_method[method]
                per_worker = sc.replica_gpus if facts[method].schedule == LOCAL else 1
                seqs = t.micro_batches[j] * per_worker * sc.model.micro_batch
                rate = seqs / t.step_s[j]
                mem = memory_gb(method, sc.model.params, N, sc.replica_gpus, sc.fsdp_no_sync)
                rows[i * len(methods) + k] = {
                    "method": method,
                    "label": facts[method].label,
                    "model": sc.model.name,
                    "params": sc.model.params,
                    "workers": N,
                    "gpus_per_node": g,
                    "nodes": sc.topo.nodes,
                    "inter_gbps": sc.topo.inter_bytes_per_s * 8 / 1e9,
                    "stragglers": sc.stragglers.describe(),
                    "micro_batch_s": mu[j],
                    "sync_s": m[j],
                    # the local methods' outer syncs over the run (the links' jitter): median and p90 beside the mean
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
