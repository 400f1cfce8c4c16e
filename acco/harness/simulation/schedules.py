"""The methods' rounds as discrete events, vectorised with numpy over B scenarios and N workers.

Inputs: `mu` (B,) one micro-batch's nominal time, `f` (R, B, N) every worker's slowdown factor per
round (the straggler model's), `m` (B,) one sync's time. A worker's compute in round r is (its micro-batches)
· mu · f[r]. Each function steps through the rounds, keeping per worker the time its compute lane
ends and per scenario the time the communication lane ends, with the overlap rule of its method
(docs/rounds.md "The rounds, drawn", "Local methods"):

    ddp         blocking: step r = max_i compute_{r,i} + m                 (ZeRO-1, nothing overlaps)
                m is what the sync leaves exposed (`exposed_sync`): the reduction and the step
                always, the gather unless it is prefetched under the next forward (FSDP);
                with `overlap` (PyTorch DDP, the flat engine's overlapped ddp): each gradient
                bucket's reduction starts in the last micro-batch's backward once every worker has
                it final and the link is free (its ring latency pipelined behind the bucket before:
                overlap.queued_s), the tail (optimizer, all-gather) after the last: the rule of
                the overlap model, the virtual clock's own
    overlapped  dpu, wp, acco: round r's sync (round r−1's gradients) starts when the last worker
                has finished round r−1 and the previous sync has ended; each worker starts its round-r
                compute when its own round r−1 and sync r−1 are done (it needs sync r−1's parameters).
                Deterministic: `per_round` micro-batches. Adaptive: at least `per_round`, and more
                until sync r has ended (faster workers do more). ACCO commits every 2 rounds.
                `contention` κ: compute beside a running sync goes 1 + κ times slower (a CPU
                testbed's shared cores; 0 on a GPU, whose communication runs on its own engines).
    local       diloco, streaming_diloco: inner steps with no communication between workers
                (a worker is a replica: one GPU, or G GPUs whose sharded step is in `inner_step_s`);
                fragment k's sync (1/F of the bytes) starts at inner steps ⌈(k+1)H/F⌉ mod H, when the
                last worker reaches it and the link is free, and each worker waits for it to land τ
                inner steps later (DiLoCo: F = 1, τ = 0; eager overlap of a whole outer step: τ = H).
                Layer-wise (`layers` > 0): a fragment's layers go on the link as the last backward
                finishes them (top layer first) and each must land before the forward τ + 1 steps
                later reaches it — the Streaming DiLoCo papers' schedule, in which every reduction
                overlaps the backward.

Outputs per scenario: time per committed step (steady state: the first rounds left out), busy
fraction (compute seconds / (N × elapsed); idle = 1 − busy) and micro-batches per committed step
summed over workers (its mean and 5th/95th percentiles: adaptive methods vary); and the time every
committed step ends (`commit_s`, prologue and all), for windows like the measured runs' own.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from acco.analytic.overlap import BACKWARD_SHARE, Buckets, step_end

from .models import FORWARD_SHARE

EPS = 1e-9


@dataclass(frozen=True)
class Overlap:
    """A DDP step's backward overlap (the overlap model's): its buckets, each bucket's
    reduction seconds (an array (B,) each), the tail's (B,) and the backward's share;
    `latency_s`: each bucket's ring latency inside its reduction (B,), pipelined behind the bucket
    before (overlap.queued_s; None: every bucket pays its whole reduction)."""

    buckets: Buckets
    reduce_s: list
    tail_s: np.ndarray
    share: float = BACKWARD_SHARE
    latency_s: list | None = None


@dataclass
class Timing:
    step_s: np.ndarray  # (B,) seconds per committed step
    busy: np.ndarray  # (B,) compute fraction of the workers' time
    micro_batches: np.ndarray  # (B,) mean micro-batches per committed step, all workers together
    micro_batches_p5: np.ndarray
    micro_batches_p95: np.ndarray
    commit_s: np.ndarray  # (steps, B) when each committed step ends, from the first compute's start
    step_micro_batches: np.ndarray  # (steps, B) micro-batches each committed step sums, all workers

    @property
    def idle(self) -> np.ndarray:
        return np.clip(1.0 - self.busy, 0.0, 1.0)  # float round-off can put busy a hair above 1


def _per_step_stats(per_step: np.ndarray, step_s, busy, commit_s: np.ndarray, every_step=None) -> Timing:
    """per_step: (steps, B) micro-batches per committed step in the steady state; every_step: the
    same for every committed step (default: per_step)."""
    return Timing(
        np.asarray(step_s, float),
        np.asarray(busy, float),
        per_step.mean(0),
        np.percentile(per_step, 5, axis=0),
        np.percentile(per_step, 95, axis=0),
        commit_s,
        per_step if every_step is None else every_step,
    )


def prefetched_gather_s(gather_s, forward_s, layers: int):
    """What an all-gather of the parameters leaves exposed when it runs layer by layer ahead of the
    next forward (FSDP's prefetch): layer ℓ's gather beside layer ℓ−1's forward, a two-stage pipeline
    of `layers` stages — the first layer's gather, then max(gather, forward) per layer:
    exposed = max(AG/L, AG − (L−1)/L·forward). Without layers (0): the whole gather."""
    gather_s, forward_s = np.asarray(gather_s, float), np.asarray(forward_s, float)
    if not layers:
        return gather_s
    L = int(layers)
    return np.maximum(gather_s / L, gather_s - (L - 1) / L * forward_s)


def exposed_sync(reduce_s, step_s, gather_s, forward_s=0.0, layers: int = 0, prefetch: bool = False):
    """The part of a data-parallel sync that no compute hides, in its order: the reduction (all of it
    here: the bucketed reduction in the last backward is `ddp`'s `overlap`),
    ZeRO's optimizer step (after the last reduction, before the gather that carries its result: never
    hidden), and the gather (hidden layer by layer under the next forward with `prefetch`)."""
    gather = prefetched_gather_s(gather_s, forward_s, layers) if prefetch else np.asarray(gather_s, float)
    return np.asarray(reduce_s, float) + np.asarray(step_s, float) + gather


def _contended_end(start, work, s0, s1, kappa: float):
    """When compute of `work` uncontended seconds, started at `start`, ends if it runs 1 + κ times
    slower while a sync occupies [s0, s1] (per worker; s0, s1 per scenario, broadcast)."""
    if not kappa:
        return start + work
    a = np.maximum(start, s0)  # the contended window as this worker sees it
    before = np.clip(s0 - start, 0.0, None)  # uncontended work done before the sync starts
    window = np.clip(s1 - a, 0.0, None)
    rest = work - before
    slow_end = a + rest * (1 + kappa)
    past = a + window + rest - window / (1 + kappa)  # the sync ended before the compute did
    return np.where(rest <= 0, start + work, np.where(rest * (1 + kappa) <= window, slow_end, past))


def ddp(mu: np.ndarray, f: np.ndarray, m: np.ndarray, accum: int, overlap: Overlap | None = None) -> Timing:
    """Blocking: every worker computes `accum` micro-batches, then all wait for one sync (`m`).
    `overlap`: the sync's reductions overlap the last backward, bucket by bucket (`m` unused)."""
    R, B, N = f.shape
    c = accum * mu[None, :, None] * f
    if overlap is None:
        step = c.max(-1) + m[None, :]
    else:
        o = overlap  # every step starts with every worker at 0: they all left the last one together
        reduce_s = [np.asarray(x, float) for x in o.reduce_s]  # (B,) each: broadcast over the rounds
        # every round at once (the rounds on the leading axis): one pass over the buckets
        step = step_end(
            np.zeros((R, B, N)), mu[None, :, None] * f, accum, o.buckets, reduce_s, o.tail_s, o.share, o.latency_s
        )
    busy = c.sum(-1).sum(0) / (N * step.sum(0))
    return _per_step_stats(np.full((R, B), float(accum * N)), step.mean(0), busy, np.cumsum(step, axis=0))


def overlapped(
    mu: np.ndarray,
    f: np.ndarray,
    m: np.ndarray,
    per_round: int,
    rounds_per_step: int = 1,
    adaptive: bool = False,
    skip: int = 2,
    contention: float = 0.0,
) -> Timing:
    """dpu / wp (rounds_per_step=1) and acco (2): each round's sync beside the next round's compute.
    Round 0 is the prologue (compute only, no sync yet). `contention` κ: compute beside a running sync
    is 1 + κ times slower."""
    R, B, N = f.shape
    skip = max(1, int(skip))
    usable = skip + ((R - skip) // rounds_per_step) * rounds_per_step
    cend = np.zeros((B, N))
    s_prev = np.zeros(B)
    sync_end = np.zeros((R, B))
    counts = np.zeros((R, B))
    busy = np.zeros(B)
    for r in range(R):
        start = np.maximum(cend, s_prev[:, None]) if r else np.zeros((B, N))
        t = mu[:, None] * f[r]  # one micro-batch of each worker in this round
        s0 = start.max(-1)
        s = s0 + (m if r else 0.0)  # sync r (round r−1's gradients) ends
        kappa = contention if r else 0.0
        n = np.full((B, N), float(per_round))
        if adaptive and r:
            # micro-batches that fit before the sync ends: uncontended until it starts, slowed beside it
            doable = (s0[:, None] - start) + (s - s0)[:, None] / (1 + kappa)
            n = np.maximum(n, np.ceil(doable / t - EPS))
        cend = _contended_end(start, n * t, s0[:, None], s[:, None], kappa)
        sync_end[r], counts[r] = s, n.sum(-1)
        if skip <= r < usable:
            busy += (cend - start).sum(-1)
        s_prev = s
    elapsed = sync_end[usable - 1] - sync_end[skip - 1]
    steps = (usable - skip) // rounds_per_step
    # a committed step's gradients: the rounds whose syncs it covers (round r's sync carries r−1)
    per_round_counts = counts[skip - 1 : usable - 1]
    per_step = per_round_counts.reshape(steps, rounds_per_step, B).sum(1)
    # commit k (k = 1, 2, ...) ends with sync k·rounds_per_step (ACCO: its commit rounds)
    commits = sync_end[rounds_per_step::rounds_per_step]
    # commit k sums rounds (k−1)·rounds_per_step … k·rounds_per_step − 1 (round 0: the prologue)
    whole = (R // rounds_per_step) * rounds_per_step
    every = counts[:whole].reshape(-1, rounds_per_step, B).sum(1)[: len(commits)]
    return _per_step_stats(per_step, elapsed / steps, busy / (N * elapsed), commits, every)


def fragment_phases(H: int, F: int) -> list[int]:
    """The inner step (1..H) of each period at which fragment k's sync starts: ⌈(k+1)H/F⌉ — every
    H/F steps when F divides H (H = 100 with 8 fragments: 13, 25, 38, 50, 63, 75, 88, 100)."""
    return [math.ceil((k + 1) * H / F) for k in range(F)]


def _pieces(F: int, layers: int, strided: bool = False) -> list[list[tuple[float, float]]]:
    """Per fragment, its pieces on the link in the order the backward finishes them: (depth, share
    of the fragment). Layer-wise: fragment k holds layers ⌊ℓF/L⌋ = k (the sequential pattern) or
    ℓ mod F = k (strided: its layers spread over the depth), layer ℓ at depth ℓ/L from the input;
    otherwise one piece at depth 0 (it waits for the whole step)."""
    if not layers:
        return [[(0.0, 1.0)] for _ in range(F)]
    L = int(layers)
    out = []
    for k in range(F):
        mine = [ell for ell in range(L) if (ell % F if strided else ell * F // L) == k]
        out.append([(ell / L, 1.0 / len(mine)) for ell in sorted(mine, reverse=True)])
    return out


def local(
    mu: np.ndarray,
    f: np.ndarray,
    m_fragment: np.ndarray,
    accum: int,
    H: int,
    F: int = 1,
    tau: int = 0,
    inner_step_s: np.ndarray | float = 0.0,
    layers: int = 0,
    strided: bool = False,
) -> Timing:
    """diloco (F=1, tau=0) and streaming_diloco: a committed step is one inner step (accum
    micro-batches and the inner optimizer step, `inner_step_s`, with whatever communication a replica
    of several GPUs has inside). Fragment k's sync starts at inner step fragment_phases(H, F)[k] of
    each period of H and lands τ inner steps later (any τ ≥ 0: τ = H overlaps a whole outer step);
    `layers` > 0: layer-wise pieces (module docstring), fragments of consecutive layers or `strided`.
    `m_fragment`: one fragment's sync (B,), or every sync's in the order they start (syncs, B: the wide-area
    links' jitter). Steady state: whole periods after the first."""
    R, B, N = f.shape
    H, F, tau, layers = int(H), int(F), int(tau), int(layers or 0)
    if H < 1 or F < 1 or tau < 0:
        raise ValueError(f"local method needs H >= 1, F >= 1 and tau >= 0 (H={H}, F={F}, tau={tau})")
    if layers and layers < F:
        raise ValueError(f"layer-wise fragments need at least one layer per fragment ({layers} layers, F={F})")
    periods = R // H
    if periods < 2:
        raise ValueError(f"need at least 2 periods of H={H} inner steps, got {R} rounds")
    phases = fragment_phases(H, F)
    pieces = _pieces(F, layers, strided)
    inner = np.asarray(inner_step_s, float).reshape(-1, 1)
    # one row per outer sync, taken in turn (jittered links: each sync's own time), or one row for all
    per_sync = np.asarray(m_fragment, float)
    per_sync = per_sync if per_sync.ndim == 2 else np.broadcast_to(per_sync, (B,))[None, :]
    issued = 0
    t = np.zeros((B, N))
    comm_free = np.zeros(B)
    pending: dict[int, list[tuple[float, np.ndarray]]] = {}
    boundary = np.zeros((periods, B))
    commits = np.zeros((periods * H, B))
    busy = np.zeros(B)
    for s in range(1, periods * H + 1):
        one = mu[:, None] * f[s - 1]  # this step's micro-batch, per worker
        work = accum * one + inner
        t = t + work
        if s > H:
            busy += work.sum(-1)
        # the last backward and the inner step finish the layers from the top down
        tail = (1 - FORWARD_SHARE) * one + inner
        for k in (k for k in range(F) if (s - phases[k]) % H == 0):
            m_now, issued = per_sync[issued % len(per_sync)], issued + 1
            for depth, share in pieces[k]:  # a fragment's pieces, as the backward finishes them
                ready = (t - depth * tail).max(-1)  # the last worker to finish this piece
                start = np.maximum(ready, comm_free)
                comm_free = start + share * m_now
                pending.setdefault(s + tau, []).append((depth, comm_free))
        if s in pending:  # they land: a worker's next forward waits at each piece's depth
            ahead = FORWARD_SHARE * mu[:, None] * f[min(s, R - 1)]
            for depth, land in pending.pop(s):
                t = np.maximum(t, land[:, None] - depth * ahead)
        commits[s - 1] = t.max(-1)
        if s % H == 0:
            boundary[s // H - 1] = t.max(-1)
    steps = (periods - 1) * H
    # the link carries every fragment once per period: a steady state is never faster than that
    # (where the link is the bottleneck a backlog grows, which a finite window shows only slowly)
    elapsed = np.maximum(boundary[-1] - boundary[0], steps * F * per_sync.mean(0) / H)
    return _per_step_stats(np.full((steps, B), float(accum * N)), elapsed / steps, busy / (N * elapsed), commits)
