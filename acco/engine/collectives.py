"""The three collectives a sync needs, each behind one small function so every backend gets the
right implementation.

gloo's `reduce_scatter_tensor` (torch 2.13) clones the input, runs a full all-reduce and copies
out the local chunk: twice the bytes a reduce-scatter needs, and its async handle never reports
completion. On gloo we therefore run a ring reduce-scatter from point-to-point sends, which moves
the minimal (N-1)/N of the buffer and needs only one shard-sized receive buffer. NCCL has a real
reduce-scatter.

Collective hooks: whoever needs to see every training collective (an emulated slow link charges
each one the time it would take there) registers a function here; it is called on the thread
that ran the collective, right after it, as fn(op, nbytes, world, started), where op is
"all_reduce" | "reduce_scatter" | "all_gather", nbytes the size of the full buffer (the ring's
per-rank share is the hook's to work out), world the group's size and started the
time.perf_counter() at which the collective began. The engine's torch DDP baseline reports
PyTorch's own collectives through the same hooks."""

from __future__ import annotations

import time
from collections.abc import Callable

import torch
import torch.distributed as dist

CollectiveHook = Callable[[str, int, int, float], None]
_hooks: list[CollectiveHook] = []


def register_collective_hook(fn: CollectiveHook) -> None:
    """Call `fn` after every collective from now on (once, however often it is registered)."""
    if fn not in _hooks:
        _hooks.append(fn)


def unregister_collective_hook(fn: CollectiveHook) -> None:
    if fn in _hooks:
        _hooks.remove(fn)


def collective_hooks() -> tuple[CollectiveHook, ...]:
    return tuple(_hooks)


def collective_done(op: str, nbytes: int, world: int, started: float) -> None:
    """Tell the hooks that collective `op` over `nbytes` among `world` ranks, begun at `started`
    (time.perf_counter()), has finished."""
    for fn in _hooks:
        fn(op, nbytes, world, started)


def backend_of(group) -> str:
    return dist.get_backend(group)


def is_nccl(group) -> bool:
    """Is `group` an NCCL group (False for None, or where no process group is set up)."""
    return group is not None and dist.is_initialized() and backend_of(group) == "nccl"


def _host_staged(group, *tensors: torch.Tensor) -> bool:
    """gloo over CUDA tensors (dist.backend=gloo on a GPU, e.g. two ranks on one GPU in make
    gpu-check): gloo's point-to-point and all-gather take host tensors only, so the collective
    runs on host copies. The copy to the host waits for the current stream (the communication
    stream, which has waited for the gradients); the copy back is queued on it."""
    return any(t.is_cuda for t in tensors) and backend_of(group) == "gloo"


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def all_reduce_sum(tensor: torch.Tensor, group) -> None:
    started = time.perf_counter()
    if _host_staged(group, tensor):
        host = tensor.cpu()
        dist.all_reduce(host, op=dist.ReduceOp.SUM, group=group)
        tensor.copy_(host)
    else:
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM, group=group)
    collective_done("all_reduce", _nbytes(tensor), dist.get_world_size(group), started)


def reduce_scatter_sum(full: torch.Tensor, out: torch.Tensor, group, scratch: torch.Tensor | None = None) -> None:
    """out <- sum over ranks of this rank's chunk of `full` (len(full) = N * len(out)).

    `full` is used as work space and is clobbered."""
    started = time.perf_counter()
    world = dist.get_world_size(group)
    if world == 1:
        out.copy_(full)
    elif _host_staged(group, full, out):
        host_full, host_out = full.cpu(), torch.empty(out.shape, dtype=out.dtype)
        _ring_reduce_scatter(host_full, host_out, group, world, None)
        full.copy_(host_full)  # `full` is work space: clobbered as on the other paths
        out.copy_(host_out)
    elif backend_of(group) == "nccl":
        dist.reduce_scatter_tensor(out, full, op=dist.ReduceOp.SUM, group=group)
    else:
        _ring_reduce_scatter(full, out, group, world, scratch)
    # every branch is charged alike (the NCCL one too)
    collective_done("reduce_scatter", _nbytes(full), world, started)


def _ring_reduce_scatter(
    full: torch.Tensor, out: torch.Tensor, group, world: int, scratch: torch.Tensor | None
) -> None:
    rank = dist.get_rank(group)
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
        ops = [dist.P2POp(dist.irecv, recv, left, group), dist.P2POp(dist.isend, chunks[send_idx], right, group)]
        for work in dist.batch_isend_irecv(ops):
            work.wait()
        chunks[recv_idx].add_(recv)
    out.copy_(chunks[rank])


def all_gather_into(full: torch.Tensor, shard: torch.Tensor, group) -> None:
    """full <- concatenation over ranks of each rank's `shard` (may be a view of `full`)."""
    started = time.perf_counter()
    world = dist.get_world_size(group)
    if world == 1:
        if shard.data_ptr() != full.data_ptr():
            full.copy_(shard)
    else:
        # torch 2.13 renamed all_gather_into_tensor to all_gather_single (the old name warns)
        gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
        if _host_staged(group, full, shard):
            host_full = torch.empty(full.shape, dtype=full.dtype)
            gather(host_full, shard.cpu(), group=group)  # .cpu(): a copy, also where shard is in full
            full.copy_(host_full)
        else:
            gather(full, shard, group=group)
    collective_done("all_gather", _nbytes(full), world, started)
