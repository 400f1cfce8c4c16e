"""How long a run is: `train.steps` committed steps, a budget of `train.samples` or `train.tokens`,
or both (the run stops at whichever is reached first).

The paper sizes its runs in tokens (fig7 50B, fig11 6B) or in global micro-batches (fig8). With
adaptive accumulation ACCO puts more samples into a committed step than DDP does, so equal steps are
not equal work; a budget is. The budget is checked after every committed step against the global
sample count of the steps so far (every sync all-reduces its micro-batch count, so every rank
decides alike), and the run ends at the first step that reaches it.

With a budget the learning-rate schedule runs over samples, not steps: the rate of a step is the
schedule at (samples before the step) / (nominal samples per committed step), with the budget as its
end and `optim.warmup_steps` counted in nominal steps (world x accum x micro-batch size, x2 for
ACCO's two rounds per step). DDP and adaptive ACCO thus anneal at the same sample counts, and a run
whose steps hold exactly the nominal samples gets exactly the step schedule."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from omegaconf import DictConfig

from ..engine.schedule import LrAt, lr_shape, make_lr_schedule, per_step
from ..methods import get as get_method


class BudgetError(ValueError):
    pass


@dataclass(frozen=True)
class RunLength:
    steps: int | None  # committed steps (None: no limit in steps)
    budget: int | None = None  # in `unit`s (None: no budget)
    unit: str = "samples"  # "samples" or "tokens"
    per_sample: int = 1  # units per sample (tokens: the task's fixed tokens per sample)

    def done(self, steps_done: int, samples_done: int) -> bool:
        if self.steps is not None and steps_done >= self.steps:
            return True
        return self.budget is not None and samples_done * self.per_sample >= self.budget

    @property
    def budget_samples(self) -> float | None:
        return None if self.budget is None else self.budget / self.per_sample

    def describe(self) -> str:
        parts = ([f"{self.steps} steps"] if self.steps is not None else []) + (
            [f"{self.budget} {self.unit}"] if self.budget is not None else []
        )
        return " or ".join(parts)


def run_length(train_cfg: Mapping[str, Any], tokens_per_sample: int = 0) -> RunLength:
    """How long a run's train section says it trains (steps, a budget, or whichever comes first).
    `train_cfg`: the run's typed view's, or a plan's plain dict."""
    steps, tokens, samples = train_cfg["steps"], train_cfg.get("tokens"), train_cfg.get("samples")
    if tokens is not None and samples is not None:
        raise BudgetError("train.tokens and train.samples are both set; keep one budget")
    if tokens is not None:
        if not tokens_per_sample:
            raise BudgetError(
                "train.tokens needs a task with a fixed number of tokens per sample (packed "
                "pretraining); this task's samples vary in length: use train.samples"
            )
        return RunLength(steps, int(tokens), "tokens", int(tokens_per_sample))
    if samples is not None:
        return RunLength(steps, int(samples), "samples", 1)
    if steps is None:
        raise BudgetError("train.steps is null and there is no budget: set train.steps, train.samples or train.tokens")
    return RunLength(steps)


def nominal_samples_per_step(method: str, world: int, accum: int, samples_per_micro_batch: int) -> int:
    """Samples in a committed step with exactly `accum` micro-batches per round and rank."""
    return world * accum * samples_per_micro_batch * get_method(method).rounds_per_step


def lr_schedule(cfg: DictConfig, world: int, samples_per_micro_batch: int, tokens_per_sample: int = 0) -> LrAt:
    """lr_at(step, micro_batches) for a run's config (the trainer's, and the reference's)."""
    optim = cfg.optim
    length = run_length(cfg.train, tokens_per_sample)
    lr, schedule, warmup, min_ratio = optim.lr, optim.schedule, optim.warmup_steps, optim.min_lr_ratio
    if length.budget is None:
        assert length.steps is not None  # no budget: train.steps ends the run (validated up front)
        return per_step(make_lr_schedule(lr, schedule, warmup, length.steps, min_ratio))
    assert length.budget_samples is not None  # a budget is counted in samples too
    nominal = nominal_samples_per_step(cfg.method.name, world, cfg.train.accum, samples_per_micro_batch)
    shape = lr_shape(lr, schedule, max(0, warmup), length.budget_samples / nominal, min_ratio)

    def lr_at(step: int, micro_batches: int) -> float:
        return shape(micro_batches * samples_per_micro_batch / nominal)

    return lr_at
