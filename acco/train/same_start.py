"""Every rank starts from rank 0's weights, or the run stops.

Data-parallel methods assume the ranks hold the same parameters at the start: the flat engine's
ranks each copy their own model into their shard of the master copy, and the local methods' global
parameters φ start as each rank's own, so ranks seeded differently
would be silently stitched together (a shard from each) or averaged into the first outer step.
PyTorch's DistributedDataParallel copies rank 0's weights to every rank when it is built; here, by
default, a difference is refused with one line before any training collective
(`broadcast=True`, acco.Overlapped(broadcast_initial=True): rank 0's are copied, as DDP does).

The check compares, per trainable parameter, two integer fingerprints of its bits (their sum and a
position-weighted sum, in int64 with wrap-around): exact and independent of the order in which a
sum is taken, so ranks with different thread counts agree on equal weights; one MAX and one MIN
all-reduce of 2 numbers per parameter."""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn

from ..engine.flat import trainable_parameters

CHUNK = 1 << 22  # entries fingerprinted at once (an int64 temporary of 32 MB)


class DifferentStart(ValueError):
    """The ranks' initial parameters differ."""


def _bits(x: torch.Tensor) -> torch.Tensor:
    """The entries' bit patterns as int64 (a float's bits, not its value: -0.0 differs from 0.0)."""
    ints = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[x.element_size()]
    return x.contiguous().view(ints).to(torch.int64)


def fingerprints(params: list[torch.Tensor], device: torch.device) -> torch.Tensor:
    """(2 × len(params),) int64: per parameter Σ bits and Σ bits·(i+1) over its entries i."""
    out = torch.zeros(2 * len(params), dtype=torch.int64, device=device)
    for j, p in enumerate(params):
        flat = p.detach().reshape(-1)
        for start in range(0, flat.numel(), CHUNK):
            bits = _bits(flat[start : start + CHUNK]).to(device)
            index = torch.arange(start + 1, start + 1 + bits.numel(), dtype=torch.int64, device=device)
            out[2 * j] += bits.sum()
            out[2 * j + 1] += (bits * index).sum()
    return out


def same_start(model: nn.Module, group, device: torch.device, broadcast: bool = False) -> None:
    """Check (or, `broadcast`, make) that every rank of `group` holds rank 0's trainable parameters
    (the model may still be on the host; `device`: the training device, whose tensors an NCCL group
    takes). Raises DifferentStart, one line naming the first parameter that differs and the fix."""
    named = trainable_parameters(model)
    if dist.get_world_size(group) == 1 or not named:
        return
    first = dist.get_global_rank(group, 0)
    device = torch.device(device) if dist.get_backend(group) == "nccl" else torch.device("cpu")
    if broadcast:
        with torch.no_grad():
            for _, p in named:
                data = p.data.to(device)
                dist.broadcast(data, src=first, group=group)
                if data.data_ptr() != p.data.data_ptr():
                    p.data.copy_(data)
        return
    mine = fingerprints([p for _, p in named], device)
    high, low = mine.clone(), mine.clone()
    dist.all_reduce(high, op=dist.ReduceOp.MAX, group=group)
    dist.all_reduce(low, op=dist.ReduceOp.MIN, group=group)
    differs = (high != low).view(-1, 2).any(dim=1)
    if bool(differs.any()):
        name = named[int(differs.nonzero()[0])][0]
        count = int(differs.sum())
        raise DifferentStart(
            f"the ranks' initial parameters differ ({count} of {len(named)} tensors, first {name}): every rank "
            f"must build the model with the same seed, or start from rank 0's weights "
            f"(acco.Overlapped(..., broadcast_initial=True), as DistributedDataParallel does)"
        )
