"""The three collectives a sync needs, each behind one small function so every backend gets the
right implementation.

gloo's `reduce_scatter_tensor` (torch 2.13) clones the input, runs a full all-reduce and copies
out the local chunk: twice the bytes a reduce-scatter needs, and its async handle never reports
completion. On gloo we therefore run a ring reduce-scatter from point-to-point sends, which moves
the minimal (N-1)/N of the buffer and needs only one shard-sized receive buffer. NCCL has a real
reduce-scatter."""
from __future__ import annotations

import time

import torch
import torch.distributed as dist

from ..testbed import delay as link_delay  # the emulated slow link (no-op unless configured)


def backend_of(group) -> str:
    return dist.get_backend(group)


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def all_reduce_sum(tensor: torch.Tensor, group) -> None:
    started = time.perf_counter()
    dist.all_reduce(tensor, op=dist.ReduceOp.SUM, group=group)
    link_delay.after("all_reduce", _nbytes(tensor), dist.get_world_size(group), started)


def reduce_scatter_sum(full: torch.Tensor, out: torch.Tensor, group,
                       scratch: torch.Tensor | None = None) -> None:
    """out <- sum over ranks of this rank's chunk of `full` (len(full) = N * len(out)).

    `full` is used as work space and is clobbered."""
    world = dist.get_world_size(group)
    rank = dist.get_rank(group)
    if world == 1:
        out.copy_(full)
        return
    started = time.perf_counter()
    if backend_of(group) == "nccl":
        dist.reduce_scatter_tensor(out, full, op=dist.ReduceOp.SUM, group=group)
        return
    chunks = full.chunk(world)
    recv = scratch if scratch is not None else torch.empty_like(chunks[0])
    right = dist.get_global_rank(group, (rank + 1) % world)
    left = dist.get_global_rank(group, (rank - 1) % world)
    # Step s: send the partial sum of chunk (r-s-1) to the right, receive the partial sum of chunk
    # (r-s-2) from the left and add our own contribution. After N-1 steps chunk r is complete here.
    for s in range(world - 1):
        send_idx = (rank - s - 1) % world
        recv_idx = (rank - s - 2) % world
        # receive posted before the send: with the send first, a 2-rank exchange on a shaped
        # link ran at half the rate in about half the runs (the two directions serialized)
        ops = [dist.P2POp(dist.irecv, recv, left, group),
               dist.P2POp(dist.isend, chunks[send_idx], right, group)]
        for work in dist.batch_isend_irecv(ops):
            work.wait()
        chunks[recv_idx].add_(recv)
    out.copy_(chunks[rank])
    link_delay.after("reduce_scatter", _nbytes(full), world, started)


def all_gather_into(full: torch.Tensor, shard: torch.Tensor, group) -> None:
    """full <- concatenation over ranks of each rank's `shard` (may be a view of `full`)."""
    if dist.get_world_size(group) == 1:
        if shard.data_ptr() != full.data_ptr():
            full.copy_(shard)
        return
    # torch 2.13 renamed all_gather_into_tensor to all_gather_single (the old name warns)
    gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    started = time.perf_counter()
    gather(full, shard, group=group)
    link_delay.after("all_gather", _nbytes(full), dist.get_world_size(group), started)
