"""The methods' rounds as discrete events, vectorised with numpy over B scenarios and N workers.

Inputs: `mu` (B,) one micro-batch's nominal time, `f` (R, B, N) every worker's slowdown factor per
round (stragglers.py), `m` (B,) one sync's time. A worker's compute in round r is (its micro-batches)
· mu · f[r]. Each function steps through the rounds, keeping per worker the time its compute lane
ends and per scenario the time the communication lane ends, with the overlap rule of its method
(README "The rounds, drawn", "Local methods"):

    ddp         blocking: step r = max_i compute_{r,i} + m                 (ZeRO-1, nothing overlaps)
                with `overlap` (PyTorch DDP, the flat engine's overlapped ddp): each gradient
                bucket's reduction starts in the last micro-batch's backward once every worker has
                it final and the link is free, the tail (optimizer, all-gather) after the last: the
                rule of acco/analytic/overlap.py, the virtual clock's own
    overlapped  dpu, wp, acco: round r's sync (round r−1's gradients) starts when the last worker
                has finished round r−1 and the previous sync has ended; each worker starts its round-r
                compute when its own round r−1 and sync r−1 are done (it needs sync r−1's parameters).
                Deterministic: `per_round` micro-batches. Adaptive: at least `per_round`, and more
                until sync r has ended (faster workers do more). ACCO commits every 2 rounds.
    local       diloco, streaming_diloco: inner steps with no communication; every H/F inner steps a
                fragment's sync (1/F of the bytes) starts when the last worker reaches it, and each
                worker waits for it to land τ inner steps later (DiLoCo: F = 1, τ = 0).

Outputs per scenario: time per committed step (steady state: the first rounds left out), busy
fraction (compute seconds / (N × elapsed); idle = 1 − busy) and micro-batches per committed step
summed over workers (its mean and 5th/95th percentiles: adaptive methods vary); and the time every
committed step ends (`commit_s`, prologue and all), for windows like the measured runs' own.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from acco.analytic.overlap import BACKWARD_SHARE, Buckets, step_end

EPS = 1e-9


@dataclass(frozen=True)
class Overlap:
    """A DDP step's backward overlap (acco/analytic/overlap.py): its buckets, each bucket's
    reduction seconds (an array (B,) each), the tail's (B,) and the backward's share."""

    buckets: Buckets
    reduce_s: list
    tail_s: np.ndarray
    share: float = BACKWARD_SHARE


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


def ddp(mu: np.ndarray, f: np.ndarray, m: np.ndarray, accum: int, overlap: Overlap | None = None) -> Timing:
    """Blocking: every worker computes `accum` micro-batches, then all wait for one sync (`m`).
    `overlap`: the sync's reductions overlap the last backward, bucket by bucket (`m` unused)."""
    R, B, N = f.shape
    c = accum * mu[None, :, None] * f
    if overlap is None:
        step = c.max(-1) + m[None, :]
    else:
        o = overlap  # every step starts with every worker at 0: they all left the last one together
        reduce_s = [np.asarray(x, float) for x in o.reduce_s]
        zero = np.zeros((B, N))
        step = np.stack(
            [step_end(zero, mu[:, None] * f[r], accum, o.buckets, reduce_s, o.tail_s, o.share) for r in range(R)]
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
) -> Timing:
    """dpu / wp (rounds_per_step=1) and acco (2): each round's sync beside the next round's compute.
    Round 0 is the prologue (compute only, no sync yet)."""
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
        s = start.max(-1) + (m if r else 0.0)  # sync r (round r−1's gradients) ends
        n = np.full((B, N), float(per_round))
        if adaptive and r:
            n = np.maximum(n, np.ceil((s[:, None] - start) / t - EPS))
        cend = start + n * t
        sync_end[r], counts[r] = s, n.sum(-1)
        if skip <= r < usable:
            busy += (n * t).sum(-1)
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


def local(
    mu: np.ndarray,
    f: np.ndarray,
    m_fragment: np.ndarray,
    accum: int,
    H: int,
    F: int = 1,
    tau: int = 0,
    inner_step_s: np.ndarray | float = 0.0,
) -> Timing:
    """diloco (F=1, tau=0) and streaming_diloco: a committed step is one inner step (accum
    micro-batches and the inner AdamW step over the whole model, `inner_step_s`). Steady state:
    whole periods of H inner steps after the first."""
    R, B, N = f.shape
    H, F, tau = int(H), int(F), int(tau)
    if H % F or tau >= H // F:
        raise ValueError(f"local method needs F dividing H and tau < H/F (H={H}, F={F}, tau={tau})")
    periods = R // H
    if periods < 2:
        raise ValueError(f"need at least 2 periods of H={H} inner steps, got {R} rounds")
    t = np.zeros((B, N))
    comm_free = np.zeros(B)
    pending: list[tuple[int, np.ndarray]] = []
    boundary = np.zeros((periods, B))
    commits = np.zeros((periods * H, B))
    busy = np.zeros(B)
    every = H // F
    for s in range(1, periods * H + 1):
        work = accum * mu[:, None] * f[s - 1] + np.asarray(inner_step_s, float).reshape(-1, 1)
        t = t + work
        if s > H:
            busy += work.sum(-1)
        if s % every == 0:  # a fragment's sync starts once the last worker reaches it
            start = np.maximum(t.max(-1), comm_free)
            comm_free = start + m_fragment
            pending.append((s + tau, comm_free))
        while pending and pending[0][0] == s:  # it lands: every worker waits for it
            t = np.maximum(t, pending.pop(0)[1][:, None])
        commits[s - 1] = t.max(-1)
        if s % H == 0:
            boundary[s // H - 1] = t.max(-1)
    elapsed = boundary[-1] - boundary[0]
    steps = (periods - 1) * H
    return _per_step_stats(np.full((steps, B), float(accum * N)), elapsed / steps, busy / (N * elapsed), commits)
