"""AdamW held only for this rank's shard (ZeRO-1): an fp32 master copy of the shard, its moments
and a step count. Committed steps update that state; tentative steps compute the same update into
separate output without touching it (ACCO's estimate, WP's prediction).

The arithmetic follows torch.optim.AdamW step for step (decoupled decay, lerp for the first
moment, bias corrections), so a flat sharded run equals PyTorch's own optimizer to fp32
round-off."""
from __future__ import annotations

import math
from typing import Callable

import torch


class ShardedAdamW:
    def __init__(self, param_shard: torch.Tensor, decay_mask_shard: torch.Tensor,
                 lr_at: Callable[[int], float], betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0):
        self.master = param_shard.detach().to(torch.float32).clone()
        self.exp_avg = torch.zeros_like(self.master)
        self.exp_avg_sq = torch.zeros_like(self.master)
        self.decay_mask = decay_mask_shard.to(device=self.master.device, dtype=torch.float32)
        self.step_count = 0  # committed steps taken so far
        self.lr_at = lr_at
        self.beta1, self.beta2 = float(betas[0]), float(betas[1])
        self.eps = float(eps)
        self.weight_decay = float(weight_decay)

    @property
    def lr(self) -> float:
        """The learning rate of the next committed step."""
        return self.lr_at(self.step_count)

    def state_bytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (self.master, self.exp_avg, self.exp_avg_sq))

    def _update(self, param, exp_avg, exp_avg_sq, grad) -> None:
        """One AdamW update in place on (param, exp_avg, exp_avg_sq) with the state's step count."""
        t = self.step_count + 1
        lr = self.lr_at(self.step_count)
        if self.weight_decay:
            param.mul_(1.0 - lr * self.weight_decay * self.decay_mask)
        exp_avg.lerp_(grad, 1.0 - self.beta1)
        exp_avg_sq.mul_(self.beta2).addcmul_(grad, grad, value=1.0 - self.beta2)
        step_size = lr / (1.0 - self.beta1 ** t)
        denom = (exp_avg_sq.sqrt() / math.sqrt(1.0 - self.beta2 ** t)).add_(self.eps)
        param.addcdiv_(exp_avg, denom, value=-step_size)

    def commit(self, grad: torch.Tensor) -> torch.Tensor:
        """Committed step: updates master, moments and step count; returns the new master shard."""
        self._update(self.master, self.exp_avg, self.exp_avg_sq, grad.to(torch.float32))
        self.step_count += 1
        return self.master

    def tentative(self, grad: torch.Tensor) -> torch.Tensor:
        """The shard a committed step would produce, leaving every piece of state as it was."""
        param = self.master.clone()
        self._update(param, self.exp_avg.clone(), self.exp_avg_sq.clone(), grad.to(torch.float32))
        return param

    def state_dict(self) -> dict:
        return {"master": self.master, "exp_avg": self.exp_avg, "exp_avg_sq": self.exp_avg_sq,
                "step_count": self.step_count}

    def load_state_dict(self, state: dict) -> None:
        for key in ("master", "exp_avg", "exp_avg_sq"):
            getattr(self, key).copy_(state[key])
        self.step_count = int(state["step_count"])
