"""The backward overlap of a data-parallel step: one model of one schedule, read by the virtual
clock (VirtualClock: PyTorch's DDP and the flat engine's overlapped ddp) and by the simulator (its
schedule `ddp`).

What it models is what PyTorch's DistributedDataParallel (after `no_sync()` micro-batches),
DeepSpeed ZeRO's `overlap_comm` and FSDP do with gradient accumulation: only the last
micro-batch's backward can hide the gradients' reduction, bucket by bucket, and what follows the
reduction (the sharded optimizer step, ZeRO's all-gather or broadcast of the parameters, the
counts' all-reduce) cannot be hidden at all.

A step of `a` micro-batches on rank q, each costing c_q: a−1 micro-batches, then the last one's
forward ((1−β)·c_q) and its backward (β·c_q), β the backward's share of a micro-batch. The
gradients are put in buckets in reverse parameter order; bucket i is final on rank q once the
backward has walked through the parameters from the model's end to the bucket's first one:
at the fraction φ_i of the backward (the parameters' share, counted from the end: the backward's
time is taken proportional to the parameters it goes through; the first bucket to be final holds
the last parameters, the last bucket, with φ = 1, the first, e.g. the embedding, which a tied
output layer makes final only at the backward's end). Then

    ready_i  = max_q ( s_q + (a−1)·c_q + (1−β)·c_q + φ_i·β·c_q )     every rank has bucket i
    start_i  = max(ready_i, end_{i−1})          the link is free: one reduction at a time,
                                                end_0 = when the link is free before the step
    end_i    = start_i + r_i                    r_i: bucket i's reduction (its bytes on the link)
    step end = end_last + tail                  every rank waits for it

With one bucket (φ = 1) this is the blocking step, max_q(s_q + a·c_q) + r + tail: the flat
engine's ddp without overlap, the simulator's `ddp` as the paper ran it.

**A ring's latency is pipelined** (`queued_s`, the simulator's buckets): of r_i, λ_i is the ring's
latency ((n−1)·α: the first chunk's trip around the ring, which needs the link's bandwidth no
more than the bytes queued ahead of it do). A bucket issued while the link still carries the
previous one's bytes runs its latency beside them; only its bytes wait for the link:

    end_i    = max(end_{i−1}, ready_i + λ_i) + (r_i − λ_i)

A bucket that finds the link idle (ready_i ≥ end_{i−1}) pays all of r_i, as above; buckets issued
back to back pay one latency between them all and their bytes (1,000 buckets of a 13B model on
8×8 GPUs: one 280 µs latency, not 1,000). λ = 0 is the rule above, which the virtual clock keeps
(gloo on a CPU testbed, validated as it is). The pipelining is the optimistic bound: NCCL runs a
stream's collectives one kernel after another, so each one's launch (a few µs, not modelled) is
still paid; nccl-tests' small-message times, measured back to back, show per-operation latency.

β: the default 2/3 is the transformer's FLOP count (a backward is two forwards' matrix products:
the gradients with respect to the activations and to the weights; Kaplan et al. 2020, C ≈ 6·N·D =
2·N·D forward + 4·N·D backward); `make calibrate-clock` measures this machine's
(results/cpu/clock/calibration.json, `backward_share`), which the CPU-scale virtual runs set as
`clock.backward_share`.

Every function takes Python floats or numpy arrays (the simulator's B scenarios × N workers: the
ranks on the last axis), and gives the same numbers either way.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

BACKWARD_SHARE = 2.0 / 3.0  # a backward costs two forwards (the FLOP count: 4ND of 6ND)
DDP_FIRST_BUCKET_MB = 1.0  # PyTorch DDP's first bucket (dist._DEFAULT_FIRST_BUCKET_BYTES: 1 MiB)
DDP_BUCKET_MB = 25.0  # PyTorch DDP's bucket_cap_mb default
MIB = 1 << 20


@dataclass(frozen=True)
class Buckets:
    """A step's gradient buckets in the order they are reduced (reverse parameter order): the
    fraction of the backward at which each is final (increasing, the last 1.0) and its size in
    entries (the caller turns entries into bytes and seconds)."""

    ready: tuple[float, ...]
    entries: tuple[int, ...]

    def __post_init__(self):
        if not self.ready or len(self.ready) != len(self.entries):
            raise ValueError("buckets need one readiness fraction per bucket, at least one bucket")
        if any(b < a for a, b in zip(self.ready, self.ready[1:])) or abs(self.ready[-1] - 1.0) > 1e-12:
            raise ValueError(f"readiness fractions must increase to 1.0, got {self.ready}")

    @classmethod
    def single(cls, entries: int) -> Buckets:
        """One bucket, final at the backward's end: the blocking step."""
        return cls((1.0,), (int(entries),))

    @classmethod
    def from_sizes(cls, entries_in_launch_order: Sequence[int]) -> Buckets:
        """Buckets of these sizes (entries, in the order they are reduced), covering the model from
        its end: bucket i is final when the backward has gone through buckets 0..i."""
        total = float(sum(entries_in_launch_order))
        ready, done = [], 0
        for n in entries_in_launch_order:
            done += int(n)
            ready.append(done / total)
        ready[-1] = 1.0
        return cls(tuple(ready), tuple(int(n) for n in entries_in_launch_order))

    def __len__(self) -> int:
        return len(self.entries)

    def shares(self) -> list[float]:
        """Each bucket's share of the entries (for a sync time split by its bytes)."""
        total = float(sum(self.entries))
        return [n / total for n in self.entries]


def ddp_bucket_sizes(param_bytes_in_ready_order: Sequence[int], limits_bytes: Sequence[int]) -> list[list[int]]:
    """PyTorch DDP's bucket assignment (torch.distributed._compute_bucket_assignment_by_size, one
    dtype and device): parameters in the order their gradients are ready go into the current bucket,
    which closes once its size reaches its limit (so it may exceed it by the last parameter); the
    limits apply in turn, the last one repeating. Returns each bucket's parameter indices."""
    if not limits_bytes:
        raise ValueError("at least one bucket size limit")
    buckets: list[list[int]] = []
    current: list[int] = []
    size, which = 0, 0
    for i, nbytes in enumerate(param_bytes_in_ready_order):
        current.append(i)
        size += int(nbytes)
        if size >= limits_bytes[which]:
            buckets.append(current)
            current, size = [], 0
            which = min(which + 1, len(limits_bytes) - 1)
    if current:
        buckets.append(current)
    return buckets


def ddp_limits(bucket_mb: float | None) -> list[int]:
    """DDP's bucket size limits in bytes after its first step's rebuild: its defaults (a 1 MiB first
    bucket, then 25 MiB) when bucket_cap_mb is not given, else bucket_cap_mb for every bucket."""
    if bucket_mb is None:
        return [int(DDP_FIRST_BUCKET_MB * MIB), int(DDP_BUCKET_MB * MIB)]
    return [max(1, int(bucket_mb * MIB))]


def torch_ddp_buckets(param_numels: Sequence[int], item_bytes: int, bucket_mb: float | None) -> Buckets:
    """PyTorch DDP's buckets for parameters of these sizes (in model order), from its second step
    on (its first step reduces one bucket of everything, which DDP then rebuilds in the order the
    gradients were ready: here the reverse model order)."""
    ready_order = list(reversed([int(n) for n in param_numels]))
    groups = ddp_bucket_sizes([n * item_bytes for n in ready_order], ddp_limits(bucket_mb))
    return Buckets.from_sizes([sum(ready_order[i] for i in g) for g in groups])


def backward_start(start, cost, accum: int, share: float = BACKWARD_SHARE):
    """When the last micro-batch's backward starts on each rank (arrays broadcast)."""
    return start + (accum - 1) * cost + (1.0 - share) * cost


def queued_s(ready, link_free, seconds, latency_s=0.0):
    """When a collective of `seconds`, `latency_s` of them its ring's latency, issued at `ready`
    ends on a link busy until `link_free` (None: idle): its latency runs from its issue, beside the
    bytes ahead of it; its own bytes wait for the link. max(link_free, ready + λ) + (seconds − λ);
    with λ = 0, max(ready, link_free) + seconds (arrays broadcast)."""
    ready = np.asarray(ready, dtype=float)
    seconds, latency = np.asarray(seconds, dtype=float), np.asarray(latency_s, dtype=float)
    if link_free is None:
        return ready + seconds
    return np.maximum(np.asarray(link_free, dtype=float), ready + latency) + (seconds - latency)


def back_to_back_s(reduce_s: Sequence, latency_s: Sequence | None = None):
    """The reductions issued all at once on an idle link (after the backward, nothing to hide
    them): queued in turn by `queued_s`, so one latency and every bucket's bytes when the buckets'
    latencies are equal; Σ reduce_s where `latency_s` is None."""
    lats = [0.0] * len(reduce_s) if latency_s is None else list(latency_s)
    end = None
    for r, lat in zip(reduce_s, lats):
        end = queued_s(0.0, end, r, lat)
    return 0.0 if end is None else end


def reductions_end(bwd_start, bwd_s, buckets: Buckets, reduce_s: Sequence, link_free=None, latency_s=None):
    """When the last bucket's reduction ends (the rule above): `bwd_start`, `bwd_s` each rank's
    last backward's start and length (the ranks on the last axis); `reduce_s[i]` bucket i's
    reduction time (a float, or an array over the leading axes); `link_free`: when the link is free
    before the step (None: it is); `latency_s[i]`: the ring latency inside reduce_s[i], pipelined
    behind the bucket before (`queued_s`; None: none is, every bucket pays its whole time)."""
    bwd_start = np.asarray(bwd_start, dtype=float)
    bwd_s = np.asarray(bwd_s, dtype=float)
    lats = [0.0] * len(buckets) if latency_s is None else list(latency_s)
    end = None if link_free is None else np.asarray(link_free, dtype=float)
    for frac, r, lat in zip(buckets.ready, reduce_s, lats):
        ready = (bwd_start + frac * bwd_s).max(axis=-1)
        end = queued_s(ready, end, r, lat)
    assert end is not None
    return end


def step_end(
    start,
    cost,
    accum: int,
    buckets: Buckets,
    reduce_s: Sequence,
    tail_s,
    share: float = BACKWARD_SHARE,
    latency_s: Sequence | None = None,
):
    """When a backward-overlapped step of `accum` micro-batches ends (every rank waits for it):
    `start`, `cost` each rank's start and micro-batch cost (ranks on the last axis); the buckets'
    reductions (`latency_s`: their ring latencies, pipelined: `reductions_end`), then `tail_s` (the
    optimizer step, the parameters' all-gather or broadcast, the counts' all-reduce)."""
    start = np.asarray(start, dtype=float)
    cost = np.asarray(cost, dtype=float)
    end = reductions_end(backward_start(start, cost, accum, share), share * cost, buckets, reduce_s, None, latency_s)
    return end + np.asarray(tail_s, dtype=float)


def hidden_s(
    start,
    cost,
    accum: int,
    buckets: Buckets,
    reduce_s: Sequence,
    share: float = BACKWARD_SHARE,
    latency_s: Sequence | None = None,
):
    """How much of the reductions runs before the last rank's backward ends (on one step): the
    reduction seconds the backward hides. What they take issued back to back after the backward
    (`back_to_back_s`: Σ r_i without latencies) − (reductions' end − backward's end)."""
    start = np.asarray(start, dtype=float)
    cost = np.asarray(cost, dtype=float)
    bwd0 = backward_start(start, cost, accum, share)
    end = reductions_end(bwd0, share * cost, buckets, reduce_s, None, latency_s)
    bwd_end = (bwd0 + share * cost).max(axis=-1)
    return back_to_back_s(reduce_s, latency_s) - (end - bwd_end)
