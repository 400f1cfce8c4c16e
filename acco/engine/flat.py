"""The model's trainable parameters and gradients as two flat buffers, sharded in contiguous
pieces across ranks.

Every parameter's `.data` and `.grad` become views into `params` and `grads`, so a backward pass
accumulates straight into the flat gradient buffer (autograd adds in place into an existing
`.grad`) and one copy moves the whole model in or out of a communication buffer.

Memory: the buffers are built one parameter at a time. Each original (typically fp32, possibly still
on the host) is copied into the low-precision buffer on the device and into this rank's fp32 master
shard, then released; nothing model-sized in fp32 is ever held, and weight decay is described by
index ranges of this rank's shard, not by a mask.

An accumulator of another dtype than the parameters (`grad_dtype`, e.g. fp32 beside bf16
parameters): autograd wants a `.grad` of the parameter's dtype, so each `.grad` is a view into a
parameter-dtype `micro_grads` buffer holding one micro-batch's gradient, which a post-accumulate
hook adds into `grads` and zeroes (the micro-batch's gradient is rounded once, the sum is not)."""

from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from torch import nn


@dataclass(frozen=True)
class ShardLayout:
    numel: int  # P: trainable entries
    world_size: int

    @property
    def shard_size(self) -> int:
        return max(1, math.ceil(self.numel / self.world_size))

    @property
    def padded(self) -> int:  # N * ceil(P / N); the last shard holds the padding
        return self.shard_size * self.world_size

    def bounds(self, rank: int) -> tuple[int, int]:
        return rank * self.shard_size, (rank + 1) * self.shard_size


class BucketLayout:
    """The flat vector cut into gradient buckets for a backward-overlapped sync (ddp with
    method.overlap_backward): contiguous ranges [lo_k, hi_k) of the padded vector in model order,
    each a multiple of N entries long, tiling it. Rank r owns the r-th of the N equal chunks of
    every bucket, so each bucket's reduce-scatter is balanced (every rank sends (N−1)/N of it, as
    FSDP's per-unit reduce-scatter does) and can start as soon as that bucket's gradients are final;
    rank r's optimizer shard is its chunks, bucket after bucket. With one bucket, the chunks are the
    contiguous shards of ShardLayout: the layout of every other sync."""

    def __init__(self, bounds: list[int], world_size: int):
        if len(bounds) < 2 or bounds[0] != 0 or any(b <= a for a, b in zip(bounds, bounds[1:])):
            raise ValueError(f"bucket bounds must increase from 0, got {bounds}")
        if any(b % world_size for b in bounds):
            raise ValueError(f"bucket bounds must be multiples of the world size {world_size}, got {bounds}")
        self.bounds = [int(b) for b in bounds]
        self.world_size = world_size
        self.chunks = [(b - a) // world_size for a, b in zip(self.bounds, self.bounds[1:])]
        self.offsets = [sum(self.chunks[:k]) for k in range(len(self.chunks))]  # in the shard

    @classmethod
    def single(cls, layout: ShardLayout) -> BucketLayout:
        return cls([0, layout.padded], layout.world_size)

    @classmethod
    def by_size(
        cls, slices: list[tuple[int, int]], layout: ShardLayout, limits: list[int], item_bytes: int
    ) -> BucketLayout:
        """PyTorch DDP's bucketing on the flat vector: the parameters (`slices`, model order) taken
        in reverse order fill the current bucket until its bytes reach its limit (`limits` in turn,
        the last repeating: ddp_limits); a bucket starts at its first
        parameter's offset rounded up to a multiple of N (the few entries below it belong to the
        next bucket, which is final later anyway); the first bucket holds the padding."""
        world = layout.world_size
        bounds = [layout.padded]
        size, which = 0, 0
        for a, b in reversed(slices):
            size += (b - a) * item_bytes
            if size >= limits[which]:
                start = -(-a // world) * world
                if 0 < start < bounds[-1]:
                    bounds.append(start)
                    size, which = 0, min(which + 1, len(limits) - 1)
        bounds.append(0)
        return cls(sorted(set(bounds)), world)

    def __len__(self) -> int:
        return len(self.chunks)

    @property
    def is_single(self) -> bool:
        return len(self.chunks) == 1

    def bucket(self, k: int) -> tuple[int, int]:
        return self.bounds[k], self.bounds[k + 1]

    def launch_order(self) -> list[int]:
        """The order the buckets become final in the backward: from the model's end."""
        return list(reversed(range(len(self.chunks))))

    def owned(self, rank: int) -> list[tuple[int, int, int]]:
        """Rank `rank`'s entries: (lo, hi) of the flat vector and where they start in its shard."""
        return [(lo + rank * c, lo + (rank + 1) * c, off) for lo, c, off in zip(self.bounds, self.chunks, self.offsets)]

    def entries_in_launch_order(self) -> list[int]:
        return [self.chunks[k] * self.world_size for k in self.launch_order()]


def trainable_parameters(model: nn.Module) -> list[tuple[str, nn.Parameter]]:
    # named_parameters() already drops duplicates, so tied weights (wte / lm_head) count once
    return [(n, p) for n, p in model.named_parameters() if p.requires_grad]


def no_decay(name: str, param: torch.Tensor) -> bool:
    """Hugging Face Trainer's convention: no weight decay on biases and normalisation weights."""
    return param.ndim < 2 or name.endswith(".bias") or "norm" in name.lower() or ".ln_" in name


def _add_range(ranges: list[tuple[int, int]], start: int, end: int) -> None:
    if ranges and ranges[-1][1] == start:  # adjacent decayed parameters: one range
        ranges[-1] = (ranges[-1][0], end)
    else:
        ranges.append((start, end))


def move_untrained(model: nn.Module, device: torch.device, skip: set[int]) -> None:
    """Buffers and the parameters not in `skip` (by id) onto `device`, one tensor at a time."""
    for module in model.modules():
        for key, buf in module._buffers.items():
            if buf is not None and buf.device != device:
                module._buffers[key] = buf.to(device)
        for p in module._parameters.values():
            if p is not None and id(p) not in skip and p.device != device:
                p.data = p.data.to(device)


class FlatModel:
    """Owns the flat parameter and gradient buffers of `model` (padded to the shard layout) and
    the fp32 initial values of rank `rank`'s shard. The model may arrive on the host: it ends on
    `device` (default: where its first parameter is)."""

    def __init__(
        self,
        model: nn.Module,
        world_size: int,
        dtype: torch.dtype | None = None,
        decay_bias_and_norm: bool = True,
        rank: int = 0,
        device: torch.device | None = None,
        full_master: bool = False,
        grad_dtype: torch.dtype | None = None,
        bucket_limits: list[int] | None = None,
    ):
        """`full_master`: keep the fp32 initial values of the whole (padded) vector, not only rank
        `rank`'s shard (the local methods' inner optimizer is not sharded). `bucket_limits` (bytes):
        cut the vector into gradient buckets (BucketLayout.by_size) and shard it by buckets' chunks;
        None: one bucket, the contiguous shards."""
        named = trainable_parameters(model)
        if not named:
            raise ValueError("the model has no trainable parameters")
        first = named[0][1]
        self.dtype = dtype or first.dtype
        self.device = torch.device(device) if device is not None else first.device
        self.layout = ShardLayout(sum(p.numel() for _, p in named), world_size)
        self.rank = rank
        padded = self.layout.padded
        sizes, at = [], 0
        for _, p in named:
            sizes.append((at, at + p.numel()))
            at += p.numel()
        item = torch.empty((), dtype=grad_dtype or self.dtype).element_size()
        self.buckets = (
            BucketLayout.by_size(sizes, self.layout, bucket_limits, item)
            if bucket_limits
            else BucketLayout.single(self.layout)
        )
        # (lo, hi) of the flat vector and where it starts in this rank's master copy
        owned = [(0, padded, 0)] if full_master else self.buckets.owned(rank)
        master_numel = padded if full_master else self.layout.shard_size
        move_untrained(model, self.device, {id(p) for _, p in named})
        self.params = torch.zeros(padded, dtype=self.dtype, device=self.device)
        self.grad_dtype = grad_dtype or self.dtype
        self.grads = torch.zeros(padded, dtype=self.grad_dtype, device=self.device)  # the accumulator
        # one micro-batch's gradient in the parameters' dtype, when the accumulator's differs
        self.micro_grads = (
            torch.zeros(padded, dtype=self.dtype, device=self.device) if self.grad_dtype != self.dtype else None
        )
        # this rank's shard of the fp32 initial values, before any cast to a low-precision buffer:
        # the optimizer's master shard starts from it (taken once with take_master_shard)
        self._master_init: torch.Tensor | None = torch.zeros(master_numel, dtype=torch.float32, device=self.device)
        # [start, end) ranges of this rank's shard where AdamW's decoupled weight decay applies
        self.decay_ranges: list[tuple[int, int]] = []
        self.names: list[str] = []
        self.slices: list[tuple[int, int]] = []
        self.parameters: list[nn.Parameter] = []
        offset = 0
        with torch.no_grad():
            for name, p in named:
                n = p.numel()
                src = p.detach().reshape(-1).to(self.device)  # one parameter on the device at a time
                self.params[offset : offset + n].copy_(src)
                for lo, hi, at in owned:  # the parts of p in this rank's shard
                    a, b = max(offset, lo), min(offset + n, hi)
                    if a < b:
                        self._master_init[at + a - lo : at + b - lo].copy_(src[a - offset : b - offset])
                        if decay_bias_and_norm or not no_decay(name, p):
                            _add_range(self.decay_ranges, at + a - lo, at + b - lo)
                del src
                p.data = self.params[offset : offset + n].view_as(p)  # the original is released
                if self.micro_grads is None:
                    p.grad = self.grads[offset : offset + n].view_as(p)
                else:
                    p.grad = self.micro_grads[offset : offset + n].view_as(p)
                    p.register_post_accumulate_grad_hook(self._accumulate_into(offset, offset + n))
                self.names.append(name)
                self.slices.append((offset, offset + n))
                self.parameters.append(p)
                offset += n
        self.model = model

    def _accumulate_into(self, a: int, b: int):
        def hook(p: torch.Tensor) -> None:
            grad = p.grad
            assert grad is not None  # autograd has just accumulated into it
            self.grads[a:b].add_(grad.reshape(-1))
            grad.zero_()

        return hook

    @property
    def numel(self) -> int:
        return self.layout.numel

    def take_master_shard(self) -> torch.Tensor:
        """This rank's shard (or, with full_master, all) of the fp32 initial parameters (padding:
        zeros); handed over once."""
        init, self._master_init = self._master_init, None
        if init is None:
            raise RuntimeError("the fp32 initial parameters were already taken")
        return init

    def zero_grads(self) -> None:
        self.grads.zero_()

    def trainable(self) -> torch.Tensor:
        """The unpadded parameter vector (a view)."""
        return self.params[: self.numel]

    @contextmanager
    def parameters_from(self, vector: torch.Tensor):
        """For the block, the model's parameters are views into `vector` (a flat vector of the
        same layout and dtype) instead of `params`: no copy, `params` untouched."""
        if vector.dtype != self.dtype or vector.numel() < self.numel:
            raise ValueError("parameters_from needs a flat vector of the buffers' dtype and layout")
        for p, (a, b) in zip(self.parameters, self.slices):
            p.data = vector[a:b].view_as(p)
        try:
            yield
        finally:
            for p, (a, b) in zip(self.parameters, self.slices):
                p.data = self.params[a:b].view_as(p)
