"""Learning-rate schedules.

The schedule advances once per *committed* optimizer step (ACCO's estimate rounds and WP's
prediction steps read it but never advance it). An optimizer asks for the rate of the committed
step it is about to take as `lr_at(step, micro_batches)`: the committed steps taken so far and the
global micro-batches they covered. A run sized in steps reads the first (`per_step`); a run sized by
a budget of samples reads the second (acco.train.budget), so methods that put different amounts of data
into a step (adaptive ACCO) still anneal at the same sample counts."""

from __future__ import annotations

import math
from collections.abc import Callable

SCHEDULES = ("constant", "cosine", "linear")

LrAt = Callable[[int, int], float]  # (committed steps so far, global micro-batches in them) -> lr


def lr_shape(
    lr: float, name: str = "constant", warmup: float = 0, total: float = 1, min_lr_ratio: float = 0.0
) -> Callable[[float], float]:
    """The schedule as a function of a position counted in (possibly fractional) steps.

    Linear warmup from lr/warmup to lr over `warmup` steps, then constant, cosine or linear decay
    down to lr*min_lr_ratio at `total` (the same shape as Hugging Face's
    get_{constant,cosine,linear}_schedule_with_warmup, with an optional floor)."""
    if name not in SCHEDULES:
        raise ValueError(f"unknown lr schedule {name!r}; choose one of {', '.join(SCHEDULES)}")
    floor = lr * min_lr_ratio

    def at(position: float) -> float:
        if warmup and position < warmup:
            return lr * (position + 1) / warmup
        if name == "constant":
            return lr
        decay = max(1, total - warmup)
        progress = min(1.0, (position - warmup) / decay)
        if name == "cosine":
            return floor + (lr - floor) * 0.5 * (1.0 + math.cos(math.pi * progress))
        return floor + (lr - floor) * (1.0 - progress)

    return at


def make_lr_schedule(
    lr: float, name: str = "constant", warmup_steps: int = 0, total_steps: int = 1, min_lr_ratio: float = 0.0
) -> Callable[[int], float]:
    """Return lr_at(step) for step = 0, 1, ... (the step about to be taken), over `total_steps`."""
    return lr_shape(lr, name, max(0, int(warmup_steps)), max(1, int(total_steps)), min_lr_ratio)


def per_step(lr_at: Callable[[int], float]) -> LrAt:
    """A schedule over committed steps, in the optimizers' (step, micro_batches) form."""
    return lambda step, micro_batches: lr_at(step)
