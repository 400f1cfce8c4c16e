"""Learning-rate schedules as pure functions of the committed step count.

The schedule advances once per *committed* optimizer step (ACCO's estimate rounds and WP's
prediction steps read it but never advance it)."""
from __future__ import annotations

import math
from typing import Callable

SCHEDULES = ("constant", "cosine", "linear")


def make_lr_schedule(lr: float, name: str = "constant", warmup_steps: int = 0,
                     total_steps: int = 1, min_lr_ratio: float = 0.0) -> Callable[[int], float]:
    """Return lr_at(step) for step = 0, 1, ... (the step about to be taken).

    Linear warmup from lr/warmup_steps to lr over `warmup_steps` steps, then constant, cosine
    or linear decay down to lr*min_lr_ratio at `total_steps` (the same shape as Hugging Face's
    get_{constant,cosine,linear}_schedule_with_warmup, with an optional floor)."""
    if name not in SCHEDULES:
        raise ValueError(f"unknown lr schedule {name!r}; choose one of {', '.join(SCHEDULES)}")
    warmup_steps = max(0, int(warmup_steps))
    total_steps = max(1, int(total_steps))
    floor = lr * min_lr_ratio

    def lr_at(step: int) -> float:
        if warmup_steps and step < warmup_steps:
            return lr * (step + 1) / warmup_steps
        if name == "constant":
            return lr
        decay_steps = max(1, total_steps - warmup_steps)
        progress = min(1.0, (step - warmup_steps) / decay_steps)
        if name == "cosine":
            return floor + (lr - floor) * 0.5 * (1.0 + math.cos(math.pi * progress))
        return floor + (lr - floor) * (1.0 - progress)

    return lr_at
