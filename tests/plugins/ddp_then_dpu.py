"""DDP, then DPU: a method defined outside acco on the flat engine, whose schedule of rounds reads
a setting of its own. Its first `ddp_steps` steps are sequential (each round's gradients synced,
then the step); after them each round's gradients are synced while the next round computes on the
parameters one step old. The schedule gets the method's settings from the backend, as the suite's
dpu gets its warmup_steps.

Its reference update (`ddp_then_delayed`) is written from the reference's primitives only, so a
run that matches it at a given ddp_steps ran that many sequential steps. The module imports nothing
heavier than acco.methods at import time, as a module ACCO_METHODS names should."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from acco.methods import FLAT, MethodSpec, register
from acco.methods.settings import Check, MethodConfig, setting


@dataclass
class DdpThenDpuMethod(MethodConfig):
    """Its config: `method=ddp_then_dpu` composes these defaults (no conf/method/ddp_then_dpu.yaml)."""

    ddp_steps: int = setting(2, Check("int", minimum=0, default=2))  # sequential steps before the delay


SPEC = register(
    MethodSpec(
        name="ddp_then_dpu",
        label="DDP, then DPU",
        backend=FLAT,
        schedule=f"{__name__}:ddp_then_delayed_rounds",
        sync_kinds=("commit",),
        table1_row="dpu",  # the same state as DPU's: the pending round's gradients beside ZeRO-1
        carries_gradients=True,
        overlapped=True,
        reference=f"{__name__}:ddp_then_delayed",
        config=DdpThenDpuMethod,
        config_schema="schema_ddp_then_dpu",
    )
)


def ddp_then_delayed_rounds(engine: Any, until: Any, on_step: Any, start: int, settings: Mapping[str, Any]) -> None:
    """Its schedule of rounds on the flat engine (acco/train/backend_flat.py): `settings` are its
    method.* settings, of which it reads its own ddp_steps."""
    from acco.engine.rounds import run_delayed

    run_delayed(engine, until, on_step, warmup_steps=int(settings["ddp_steps"]), start=start)


def ddp_then_delayed(ref: Any, run: Any):
    """The update rule on acco.train.reference.Reference (`ref`): run.options["ddp_steps"] steps on
    the gradients at θ_t, then each step on the previous round's gradients. Returns θ_T."""
    theta, t, ddp_steps = ref.start(), 0, int(run.options["ddp_steps"])
    while t < ddp_steps and not run.done(ref, t):
        theta = ref.commit(*ref.gradients_at(theta))
        t += 1
    pending = None if run.done(ref, t) else ref.gradients_at(theta)
    while not run.done(ref, t):
        fresh = None if run.known_last(t) else ref.gradients_at(theta)  # computed while `pending` syncs
        assert pending is not None  # None only after the last round
        theta = ref.commit(*pending)
        pending, t = fresh, t + 1
    return theta
