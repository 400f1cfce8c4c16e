"""AdamW held only for this rank's shard (ZeRO-1): an fp32 master copy of the shard, its moments
and a step count. Committed steps update that state; tentative steps compute the same update into
separate output without touching it (ACCO's estimate, WP's prediction).

The arithmetic follows torch.optim.AdamW step for step (decoupled decay, lerp for the first
moment, bias corrections), so a flat sharded run equals PyTorch's own optimizer to fp32
round-off. Which entries are decayed is a list of index ranges of the shard, not a mask: a mask
would cost as much memory as the master shard's first moment."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from .schedule import LrAt


@dataclass(frozen=True)
class AdamWSettings:
    """AdamW's numbers as every optimizer of the suite reads them (conf/config.yaml's optim keys
    but the learning-rate schedule's, which `lr_at` carries): read once, from a run's typed view or
    acco.Overlapped's dict, and handed down as they are."""

    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    weight_decay: float = 0.0
    decay_bias_and_norm: bool = True  # decay biases and norm weights too (the paper's setting)
    clip_norm: float = 0.0  # the global gradient norm's limit; 0: no clipping

    @classmethod
    def of(cls, optim: Mapping[str, Any]) -> AdamWSettings:
        beta1, beta2 = optim["betas"]
        decay_all = optim["decay_bias_and_norm"]
        return cls((beta1, beta2), optim["eps"], optim["weight_decay"], decay_all, optim["clip_norm"])

    @property
    def clips(self) -> bool:
        return self.clip_norm > 0


class ShardedAdamW:
    def __init__(
        self,
        param_shard: torch.Tensor,
        decay_ranges: Sequence[tuple[int, int]],
        lr_at: LrAt,
        betas=(0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
    ):
        """`decay_ranges`: [start, end) ranges of the shard where decoupled weight decay applies.
        `lr_at(step, micro_batches)`: the rate of the next committed step (acco.engine.schedule)."""
        self.master = param_shard.detach().to(torch.float32).clone()
        self.exp_avg = torch.zeros_like(self.master)
        self.exp_avg_sq = torch.zeros_like(self.master)
        self.decay_ranges = [(int(a), int(b)) for a, b in decay_ranges if b > a]
        if any(a < 0 or b > self.master.numel() for a, b in self.decay_ranges):
            raise ValueError("a weight-decay range lies outside the shard")
        self.step_count = 0  # committed steps taken so far
        self.micro_batches = 0  # global micro-batches in those steps (a budget's schedule reads it)
        self.lr_at = lr_at
        self.beta1, self.beta2 = float(betas[0]), float(betas[1])
        self.eps = float(eps)
        self.weight_decay = float(weight_decay)
        # the update's working memory, allocated once (a sync runs on the communication stream,
        # whose freed temporaries the compute stream never reuses): the denominator, and for a
        # tentative step (acco, wp) copies of master, m and v, made at the first one
        self._denom = torch.empty_like(self.master)
        self._tentative: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None

    @classmethod
    def with_settings(
        cls, param_shard: torch.Tensor, decay_ranges: Sequence[tuple[int, int]], lr_at: LrAt, adamw: AdamWSettings
    ) -> ShardedAdamW:
        return cls(param_shard, decay_ranges, lr_at, adamw.betas, adamw.eps, adamw.weight_decay)

    @property
    def lr(self) -> float:
        """The learning rate of the next committed step."""
        return self.lr_at(self.step_count, self.micro_batches)

    def state_bytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (self.master, self.exp_avg, self.exp_avg_sq))

    def working_bytes(self) -> int:
        """The update's working memory: the denominator, and the tentative step's copies once made."""
        held = [self._denom, *(self._tentative or ())]
        return sum(t.numel() * t.element_size() for t in held)

    def _update(self, param, exp_avg, exp_avg_sq, grad) -> None:
        """One AdamW update in place on (param, exp_avg, exp_avg_sq) with the state's step count."""
        t = self.step_count + 1
        lr = self.lr
        if self.weight_decay:
            # the factor rounded to fp32 as a fp32 kernel computes it: 1 - fl32(lr * wd)
            factor = (1.0 - torch.tensor(lr * self.weight_decay, dtype=torch.float32)).item()
            for a, b in self.decay_ranges:
                param[a:b].mul_(factor)
        exp_avg.lerp_(grad, 1.0 - self.beta1)
        exp_avg_sq.mul_(self.beta2).addcmul_(grad, grad, value=1.0 - self.beta2)
        step_size = lr / (1.0 - self.beta1**t)
        denom = torch.sqrt(exp_avg_sq, out=self._denom).div_(math.sqrt(1.0 - self.beta2**t)).add_(self.eps)
        param.addcdiv_(exp_avg, denom, value=-step_size)

    def commit(self, grad: torch.Tensor, micro_batches: int = 0) -> torch.Tensor:
        """Committed step with the mean gradient of `micro_batches` global micro-batches: updates
        master, moments and counts; returns the new master shard."""
        self._update(self.master, self.exp_avg, self.exp_avg_sq, grad.to(torch.float32))
        self.step_count += 1
        self.micro_batches += int(micro_batches)
        return self.master

    def tentative(self, grad: torch.Tensor) -> torch.Tensor:
        """The shard a committed step would produce, leaving every piece of state as it was (in a
        buffer of its own, valid until the next tentative step)."""
        if self._tentative is None:
            self._tentative = (
                torch.empty_like(self.master),
                torch.empty_like(self.master),
                torch.empty_like(self.master),
            )
        param, exp_avg, exp_avg_sq = self._tentative
        param.copy_(self.master)
        exp_avg.copy_(self.exp_avg)
        exp_avg_sq.copy_(self.exp_avg_sq)
        self._update(param, exp_avg, exp_avg_sq, grad.to(torch.float32))
        return param

    def state_dict(self) -> dict:
        return {
            "master": self.master,
            "exp_avg": self.exp_avg,
            "exp_avg_sq": self.exp_avg_sq,
            "step_count": self.step_count,
            "micro_batches": self.micro_batches,
        }

    def load_state_dict(self, state: dict) -> None:
        for key in ("master", "exp_avg", "exp_avg_sq"):
            getattr(self, key).copy_(state[key])
        self.step_count = int(state["step_count"])
        self.micro_batches = int(state.get("micro_batches", 0))
