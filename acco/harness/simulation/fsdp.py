"""FSDP as a schedule of its own: per micro-batch, layer by layer, each collective beside the
neighbouring layer's compute.

Two of PyTorch FSDP's sharding strategies (torch/distributed/fsdp/api.py `ShardingStrategy`):

    fsdp          FULL_SHARD (ZeRO-3): each layer's parameters all-gathered before its forward and
                  freed after it, all-gathered again before its backward, its gradients
                  reduce-scattered after its backward; per micro-batch 2 gathers + 1 reduce-scatter
                  of every layer (3x the bytes of one pass).
    fsdp_grad_op  SHARD_GRAD_OP (ZeRO-2): gathered before the forward and kept for the backward,
                  reduce-scattered after each layer's backward; 1 gather + 1 reduce-scatter per
                  micro-batch.

Both end the step with the sharded AdamW step (topology's optimizer cost: 30 bytes per parameter of
the shard over the HBM bandwidth) once the last reduce-scatter has landed.

**The overlap rule** is the overlap model's (acco.analytic.overlap): one communication lane per scenario, one compute
lane per worker. "For a single process group using NCCL backend, any collectives, even if issued
from different streams, contend for the same per-device NCCL stream" (the `BackwardPrefetch`
docstring, torch/distributed/fsdp/api.py), so the collectives run one at a time in the order they
are issued; a collective starts once every worker has issued it and the lane is free; a layer's
compute waits for its gather. The model's parameters are spread evenly over its `layers` (one FSDP
unit per transformer block; the embedding and head counted in the blocks' even split), a layer's
forward is FORWARD_SHARE/L of a micro-batch and its backward (1 − FORWARD_SHARE)/L.

**Prefetch** (the issue order, which is all it changes):

    forward prefetch on   layer ℓ+1's gather is issued when layer ℓ's forward starts: it runs beside
                          that forward (a two-stage pipeline: the first layer's gather exposed, then
                          max(gather, forward) per layer). PyTorch's FSDP notes
                          (https://pytorch.org/docs/stable/notes/fsdp.html, "FSDP Prefetch Nuances")
                          call this implicit forward prefetching, always on when the CPU runs ahead
                          of the GPU; `forward_prefetch=True` makes it explicit for CPU-bound runs.
    forward prefetch off  the CPU-bound case those notes make `forward_prefetch` for: a layer's
                          gather is issued only when the previous layer's forward is done, so every
                          gather is exposed. A GPU-bound FSDP run overlaps whatever its
                          `forward_prefetch` says: leave it on for one.
    backward prefetch on  BACKWARD_PRE (FSDP's default): the next layer's gather is issued before the
                          current layer's gradient computation and runs beside it (fsdp only:
                          SHARD_GRAD_OP has no backward gather).
    backward prefetch off `backward_prefetch=None`: the next layer's gather is issued after the current
                          layer's reduce-scatter on the same stream, so each layer's reduce-scatter
                          and gather are exposed in turn ("no overlap", the same docstring).

Zhao et al., "PyTorch FSDP: Experiences on Scaling Fully Sharded Data Parallel" (arXiv 2304.11277)
§3.3 describes the same forward/backward prefetch and the single NCCL stream.

**no_sync** (`FullyShardedDataParallel.no_sync`): every micro-batch but the last accumulates
unsharded gradients without a reduce-scatter, the last one reduce-scatters (one reduce-scatter of
every layer per step), at the memory of unsharded gradients. FULL_SHARD still gathers twice per
micro-batch; SHARD_GRAD_OP keeps the parameters gathered between the micro-batches inside no_sync
(torch/distributed/fsdp/_runtime_utils.py `_should_free_in_backward`), so it gathers once per step.

`ddp_overlap --prefetch` uses the forward rule above for the parameters' all-gather after
ZeRO's step: hidden layer by layer under the next step's first forward (`prefetched_overlap`).

Predicts time only, as the rest of the simulator.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from acco.analytic.overlap import BACKWARD_SHARE, Buckets
from acco.analytic.table1 import TABLE1_FORMULAS

from .compute import forward_share
from .schedules import Timing, prefetched_gather_s
from .topology import ADAMW_BYTES_PER_PARAM, Topology, all_gather_s, reduce_scatter_s

FSDP_METHODS = ("fsdp", "fsdp_grad_op")
FULL_SHARD, SHARD_GRAD_OP = "fsdp", "fsdp_grad_op"


@dataclass(frozen=True)
class Settings:
    """FSDP's overlap settings (defaults: forward and backward prefetch on, no no_sync)."""

    forward_prefetch: bool = True
    backward_prefetch: bool = True
    no_sync: bool = False


@dataclass(frozen=True)
class LayerCosts:
    """One layer's collectives (seconds; floats or arrays over scenarios) and the step's optimizer."""

    layers: int
    gather_s: Any  # one layer's all-gather of its parameters
    reduce_s: Any  # one layer's reduce-scatter of its gradients
    step_s: Any  # the sharded AdamW step, once per committed step


def layer_costs(
    params: float, layers: int, topo: Topology, grad_bytes: float = 2, param_bytes: float = 2, optimizer: bool = True
) -> LayerCosts:
    """Each layer's collectives over every GPU (each pays the ring's latency terms) and ZeRO's
    sharded AdamW step (`optimizer=False`: none)."""
    per_layer = params / int(layers)
    step = params / topo.workers * ADAMW_BYTES_PER_PARAM / topo.hbm_bytes_per_s if optimizer else 0.0
    return LayerCosts(
        int(layers),
        all_gather_s(param_bytes * per_layer, topo),
        reduce_scatter_s(grad_bytes * per_layer, topo),
        step,
    )


def collectives(method: str, accum: int, layers: int, no_sync: bool = False) -> tuple[int, int]:
    """(all-gathers, reduce-scatters) of one layer each in one committed step of `accum` micro-batches."""
    accum, layers = int(accum), int(layers)
    reduces = layers * (1 if no_sync else accum)
    if method == FULL_SHARD:
        return 2 * layers * accum, reduces
    if method == SHARD_GRAD_OP:
        return layers * (1 if no_sync else accum), reduces
    raise ValueError(f"unknown FSDP method {method!r}: use one of {', '.join(FSDP_METHODS)}")


def traffic_bytes(method: str, params: float, accum: int, layers: int, grad_bytes=2, param_bytes=2, no_sync=False):
    """The bytes one GPU's collectives carry in one committed step (each counted once, its payload)."""
    gathers, reduces = collectives(method, accum, layers, no_sync)
    return (gathers * param_bytes + reduces * grad_bytes) * params / int(layers)


def sync_s(method: str, costs: LayerCosts, accum: int, no_sync: bool = False):
    """Every collective of the step end to end, then the optimizer: what the step would add to its
    compute if nothing overlapped (the `sync_s` column)."""
    gathers, reduces = collectives(method, accum, costs.layers, no_sync)
    return gathers * np.asarray(costs.gather_s, float) + reduces * np.asarray(costs.reduce_s, float) + costs.step_s


class _Lane:
    """The communication lane: collectives one at a time, in the order they are issued; each starts
    when every worker has issued it (`issue`: per worker, workers on the last axis) and the lane is free."""

    def __init__(self, shape):
        self.free = np.zeros(shape)

    def run(self, issue, seconds):
        self.free = np.maximum(np.asarray(issue).max(-1), self.free) + seconds
        return self.free


def _forward(t, lane: _Lane, fwd, gather, layers: int, prefetch: bool):
    """One forward whose every layer waits for its gather; returns the compute lane's end (per worker)."""
    if not prefetch:  # each gather issued once the previous layer's forward is done: all exposed
        for _ in range(layers):
            t = np.maximum(t, lane.run(t, gather)[..., None]) + fwd
        return t
    ready = lane.run(t, gather)  # the first layer's gather: nothing to hide it
    for ell in range(layers):
        start = np.maximum(t, ready[..., None])
        if ell + 1 < layers:  # the next layer's gather, issued as this layer's forward starts
            ready = lane.run(start, gather)
        t = start + fwd
    return t


def _backward(t, lane: _Lane, bwd, gather, reduce, layers: int, regather: bool, prefetch: bool, reduces: bool):
    """One backward, last layer first: a reduce-scatter issued after each layer's gradients (`reduces`),
    and with `regather` (FULL_SHARD) a gather before each layer's gradient computation."""
    if not regather:
        for _ in range(layers):
            t = t + bwd
            if reduces:
                lane.run(t, reduce)
        return t
    ready = lane.run(t, gather)  # the last layer's, issued as the backward starts
    for ell in range(layers):
        start = np.maximum(t, ready[..., None])
        t = start + bwd
        if prefetch and ell + 1 < layers:  # BACKWARD_PRE: the next layer's gather before this one's gradients
            ready = lane.run(start, gather)
        if reduces:
            lane.run(t, reduce)
        if not prefetch and ell + 1 < layers:  # after this layer's reduce-scatter, on the same stream
            ready = lane.run(t, gather)
    return t


def step_end(method: str, mu, f, accum: int, costs: LayerCosts, settings: Settings = Settings(), share=BACKWARD_SHARE):
    """When each committed step ends, from 0 with both lanes idle (the optimizer step closes a step,
    so steps do not overlap): `mu` (B,) one micro-batch's time, `f` (R, B, N) the workers' slowdowns
    per round (R rounds, each one committed step). Returns (R, B)."""
    if method not in FSDP_METHODS:
        raise ValueError(f"unknown FSDP method {method!r}: use one of {', '.join(FSDP_METHODS)}")
    f = np.asarray(f, float)
    R, B, N = f.shape
    L = int(costs.layers)
    c = np.asarray(mu, float)[None, :, None] * f  # one micro-batch, per worker
    fwd, bwd = (1.0 - share) * c / L, share * c / L
    gather, reduce = np.asarray(costs.gather_s, float), np.asarray(costs.reduce_s, float)
    lane = _Lane((R, B))
    t = np.zeros((R, B, N))
    kept = False  # SHARD_GRAD_OP inside no_sync: parameters still gathered from the last micro-batch
    for j in range(int(accum)):
        synced = not settings.no_sync or j == accum - 1
        if kept:
            t = t + L * fwd
        else:
            t = _forward(t, lane, fwd, gather, L, settings.forward_prefetch)
        t = _backward(t, lane, bwd, gather, reduce, L, method == FULL_SHARD, settings.backward_prefetch, synced)
        kept = method == SHARD_GRAD_OP and not synced
    return np.maximum(t.max(-1), lane.free) + np.asarray(costs.step_s, float)


def schedule(method: str, mu, f, accum: int, costs: LayerCosts, settings: Settings = Settings(), share=BACKWARD_SHARE):
    """One FSDP method's rounds (one committed step each) as a schedules.Timing."""
    f = np.asarray(f, float)
    R, B, N = f.shape
    step = step_end(method, mu, f, accum, costs, settings, share)
    compute = accum * np.asarray(mu, float)[None, :, None] * f
    busy = compute.sum(-1).sum(0) / (N * step.sum(0))
    per_step = np.full((R, B), float(accum * N))
    return Timing(step.mean(0), busy, per_step.mean(0), per_step[0], per_step[0], np.cumsum(step, axis=0), per_step)


def scenario_timing(method: str, prim: dict, f, sc) -> Timing:
    """One sweep.Scenario (B = 1): `prim` its sweep.primitives (the micro-batch, "fsdp": its
    LayerCosts), `f` (R, 1, N) its slowdowns."""
    settings = Settings(sc.forward_prefetch, sc.backward_prefetch, sc.fsdp_no_sync)
    share = 1.0 - forward_share(sc.recompute and not sc.step_time_s)  # a recomputed forward runs in the backward
    return schedule(method, np.array([prim["micro_batch_s"]]), f, sc.accum, prim["fsdp"], settings, share)


def memory_gb(method: str, params: float, workers: int, no_sync: bool = False, K: float = 12) -> float:
    """Model state per GPU: Table 1's ZeRO-3 (fsdp) or ZeRO-2 (fsdp_grad_op) row; with no_sync the
    gradients accumulate unsharded (2 bytes per parameter more for fsdp, ZeRO-1's row for grad_op)."""
    if method == FULL_SHARD:
        per_param = TABLE1_FORMULAS["zero3"][0](K, workers) + (2 if no_sync else 0)
    elif method == SHARD_GRAD_OP:
        per_param = TABLE1_FORMULAS["zero1" if no_sync else "zero2"][0](K, workers)
    else:
        raise ValueError(f"unknown FSDP method {method!r}: use one of {', '.join(FSDP_METHODS)}")
    return per_param * params / 1e9


def prefetched_overlap(
    overlap: tuple[Buckets, list[float], float], params: float, layers: int, topo: Topology, param_bytes, forward_s
) -> tuple[Buckets, list[float], float]:
    """`ddp_overlap`'s (buckets, reductions, tail) with the tail's all-gather of the parameters run
    layer by layer under the next step's first forward (forward prefetch, the rule above): the tail
    keeps the optimizer step and what the forward leaves exposed — the first layer's gather at least,
    all of what exceeds the forward."""
    buckets, reduce, tail = overlap
    whole = all_gather_s(param_bytes * params, topo)  # what topology.ddp_overlap_parts put in the tail
    per_layer = all_gather_s(param_bytes * params / int(layers), topo)
    exposed = float(prefetched_gather_s(per_layer * int(layers), forward_s, int(layers)))
    return buckets, reduce, tail - whole + exposed


def problem(methods, accum: int, forward_prefetch: bool, backward_prefetch: bool, no_sync: bool) -> str | None:
    """A command line's FSDP settings that make no sense for its methods, as one line (None: fine).
    The settings change the fsdp methods only; given where none of them runs, they are refused rather
    than ignored."""
    chosen = [m for m in methods if m in FSDP_METHODS]
    given = [
        flag
        for flag, on in (
            ("--no-forward-prefetch", not forward_prefetch),
            ("--no-backward-prefetch", not backward_prefetch),
            ("--fsdp-no-sync", no_sync),
        )
        if on
    ]
    if given and not chosen:
        return f"{' '.join(given)} set the FSDP schedule: add fsdp or fsdp_grad_op to --methods"
    if not backward_prefetch and FULL_SHARD not in chosen and chosen:
        return (
            "--no-backward-prefetch: fsdp_grad_op keeps its parameters for the backward (nothing to prefetch); use fsdp"
        )
    if no_sync and int(accum) < 2:
        return f"--fsdp-no-sync with --accum {accum}: nothing to accumulate without a reduce-scatter (--accum >= 2)"
    return None
