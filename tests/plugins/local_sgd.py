"""Local SGD, a method defined outside acco: every worker takes inner AdamW steps on its own
micro-batches, and every sync_every steps the workers' parameters are averaged. It runs on the
local methods' engine (acco/engine/local_rounds.py) as a schedule of one fragment, not overlapped,
no mixing, an outer step of rate 1 without momentum: φ' = φ - (φ - mean θ_w) = mean θ_w.

Its reference update (`average_every`) is written from the reference's primitives only: it shares
no code with DiLoCo's reference, so a run that matches it runs this method. The module imports
nothing heavier than acco.methods at import time, as a module ACCO_METHODS names should."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from acco.methods import LOCAL, MethodSpec, register
from acco.methods.diloco import LocalMethod


@dataclass
class LocalSgdMethod(LocalMethod):
    """Its config: `method=local_sgd` composes these defaults (there is no conf/method/local_sgd.yaml)."""

    sync_every: int = 4  # H: inner steps between two averagings
    fragments: int = 1
    overlap_steps: int = 0
    mixing: float = 0.0
    outer_lr: float = 1.0
    outer_momentum: float = 0.0


SPEC = register(
    MethodSpec(
        name="local_sgd",
        label="Local SGD",
        backend=LOCAL,
        schedule="local_rounds",
        sync_kinds=("local",),
        table1_row="diloco",  # the same state per worker as DiLoCo's (a whole-model inner AdamW)
        local=True,
        sends="parameters",
        reference=f"{__name__}:average_every",
        config=LocalSgdMethod,
        config_schema="schema_local_sgd",
    )
)


def average_every(ref: Any, run: Any):
    """The update rule on acco.train.reference.Reference (`ref`) for run.steps inner steps: one AdamW
    state per worker, the workers' parameters averaged every sync_every steps and after the last.
    Returns the averaged parameters φ_T (ref.history: φ after each step)."""
    import torch

    world, every = len(ref.streams), int(run.options["sync_every"])
    phi = ref.start()
    thetas = [phi.clone() for _ in range(world)]
    states = [ref.opt.state.__class__(dict) for _ in range(world)]
    for step in range(1, run.steps + 1):
        ref.local_step(thetas, states)  # every worker's inner step, as DiLoCo's reference takes it
        if step % every == 0 or step == run.steps:
            phi = torch.stack(thetas).mean(dim=0)
            thetas = [phi.clone() for _ in range(world)]
        ref.history.append(phi)
    return phi
