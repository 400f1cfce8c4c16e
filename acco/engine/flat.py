"""The model's trainable parameters and gradients as two flat buffers, sharded in contiguous
pieces across ranks.

Every parameter's `.data` and `.grad` become views into `params` and `grads`, so a backward pass
accumulates straight into the flat gradient buffer (autograd adds in place into an existing
`.grad`) and one copy moves the whole model in or out of a communication buffer."""
from __future__ import annotations

import math
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


def trainable_parameters(model: nn.Module) -> list[tuple[str, nn.Parameter]]:
    # named_parameters() already drops duplicates, so tied weights (wte / lm_head) count once
    return [(n, p) for n, p in model.named_parameters() if p.requires_grad]


def no_decay(name: str, param: torch.Tensor) -> bool:
    """Hugging Face Trainer's convention: no weight decay on biases and normalisation weights."""
    return param.ndim < 2 or name.endswith(".bias") or "norm" in name.lower() or ".ln_" in name


class FlatModel:
    """Owns the flat parameter and gradient buffers of `model` (padded to the shard layout)."""

    def __init__(self, model: nn.Module, world_size: int, dtype: torch.dtype | None = None,
                 decay_bias_and_norm: bool = True):
        named = trainable_parameters(model)
        if not named:
            raise ValueError("the model has no trainable parameters")
        first = named[0][1]
        self.dtype = dtype or first.dtype
        self.device = first.device
        self.layout = ShardLayout(sum(p.numel() for _, p in named), world_size)
        padded = self.layout.padded
        self.params = torch.zeros(padded, dtype=self.dtype, device=self.device)
        self.grads = torch.zeros(padded, dtype=self.dtype, device=self.device)
        # 1 where AdamW's decoupled weight decay applies, 0 elsewhere (and on the padding)
        self.decay_mask = torch.zeros(padded, dtype=torch.float32, device=self.device)
        self.names: list[str] = []
        self.slices: list[tuple[int, int]] = []
        # the fp32 initial values, before any cast to a low-precision buffer: the optimizer's
        # master shard starts from these (taken once with take_fp32_init)
        self._fp32_init: torch.Tensor | None = torch.zeros(padded, dtype=torch.float32,
                                                           device=self.device)
        offset = 0
        with torch.no_grad():
            for name, p in named:
                n = p.numel()
                self._fp32_init[offset:offset + n].copy_(p.detach().reshape(-1))
                self.params[offset:offset + n].copy_(p.detach().reshape(-1))
                p.data = self.params[offset:offset + n].view_as(p)
                p.grad = self.grads[offset:offset + n].view_as(p)
                if decay_bias_and_norm or not no_decay(name, p):
                    self.decay_mask[offset:offset + n] = 1.0
                self.names.append(name)
                self.slices.append((offset, offset + n))
                offset += n
        self.model = model

    @property
    def numel(self) -> int:
        return self.layout.numel

    def take_fp32_init(self) -> torch.Tensor:
        init, self._fp32_init = self._fp32_init, None
        if init is None:
            raise RuntimeError("the fp32 initial parameters were already taken")
        return init

    def zero_grads(self) -> None:
        self.grads.zero_()

    def trainable(self) -> torch.Tensor:
        """The unpadded parameter vector (a view)."""
        return self.params[: self.numel]
