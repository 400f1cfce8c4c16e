"""Rounds on shared machinery, and the methods as schedules of rounds (SPEC §2).

A round hands the gradient accumulator to a sync on the communication thread and, meanwhile,
computes micro-batches; at its end the parameters the sync produced are loaded into the model.

    ddp (flat)  : [compute accum @θ_t] -> [sync commit]                     (sequential)
    dpu         : W sequential steps; prologue compute @θ_W; then every round
                  sync commit(grads of the previous round) || compute @θ_t  (one step stale)
    wp          : as dpu, the sync commits then gathers a tentative second step θ̂ with the same
                  gradient, and the compute side works at θ̂                  (weight prediction)
    acco        : prologue compute G̃_0 @θ_0; then per committed step two rounds
                  estimate: sync θ̃_{t+1} = Opt_tent(θ_t, G̃_t/Ñ_t) || compute G_t @θ_t on top of G̃_t
                  commit  : sync θ_{t+1} = Opt(θ_t, (G̃_t+G_t)/(Ñ_t+N_t)) || compute G̃_{t+1} @θ̃_{t+1}
"""
from __future__ import annotations

from typing import Callable

import torch

from .comm_worker import CommWorker
from .compute import MicroBatchRunner
from .flat import FlatModel
from .sync import COMMIT, COMMIT_PREDICT, ESTIMATE, SyncResult, Syncer
from .trace import COMPUTE, TraceRecorder

StepCallback = Callable[[int, SyncResult], None]


class RoundEngine:
    def __init__(self, flat: FlatModel, syncer: Syncer, comm: CommWorker, runner: MicroBatchRunner,
                 accum: int, adaptive: bool, tracer: TraceRecorder, max_accum_factor: int = 64):
        self.flat = flat
        self.syncer = syncer
        self.buffer = syncer.buffer
        self.comm = comm
        self.runner = runner
        self.accum = accum
        self.adaptive = adaptive
        self.tracer = tracer
        # In adaptive mode a fast rank keeps computing while the sync runs; the cap only bounds the
        # accumulator if a peer stalls (the watchdog, not the cap, is what reports a hang).
        self.max_micro_batches = max(accum, accum * max_accum_factor)
        self.rounds_micro_batches: list[int] = []  # this rank's micro-batches per round

    # -- building blocks ----------------------------------------------------------------------
    def _compute(self, minimum: int, job=None, label: str = "fwd+bwd") -> int:
        n = 0
        while n < minimum or (self.adaptive and job is not None and not job.is_done()
                              and n < self.max_micro_batches):
            self.runner.run_one(label)
            n += 1
        self.rounds_micro_batches.append(n)
        return n

    def _launch(self, kind: str):
        """Gradients out: copy the accumulator into the communication buffer, start the sync."""
        self.buffer.copy_(self.flat.grads)
        count, loss_sum = self.runner.count, self.runner.loss_sum
        return self.comm.submit(lambda: self.syncer.sync(kind, count, loss_sum))

    def _finish(self, job) -> SyncResult:
        """Parameters in: wait for the sync and load what it gathered into the model."""
        with self.tracer.span("wait for sync", COMPUTE, cat="idle"):
            result = job.wait()
        self.flat.params.copy_(self.buffer)
        return result

    def prologue(self, label: str = "fwd+bwd") -> None:
        """Compute a round's gradients with nothing to communicate yet."""
        self.flat.zero_grads()
        self.runner.reset()
        self._compute(self.accum, label=label)

    def sequential_round(self) -> SyncResult:
        self.prologue()
        return self._finish(self._launch(COMMIT))

    def overlapped_round(self, kind: str, zero: bool, compute: bool, label: str) -> SyncResult:
        job = self._launch(kind)
        if zero:
            self.flat.zero_grads()
            self.runner.reset()
        if compute:
            self._compute(self.accum, job, label)
        return self._finish(job)

    # -- checkpoints: what a step boundary leaves for the next round -----------------------------
    def state_dict(self, pending: bool) -> dict:
        """This rank's state between two committed steps: its optimizer shard, its data position
        and, when `pending` (dpu/wp/acco after their first overlapped round), the gradients the
        next round will send. The parameters are the same on every rank and saved once."""
        state = {"opt": self.syncer.opt.state_dict(), "runner": self.runner.state_dict(),
                 "rounds_micro_batches": list(self.rounds_micro_batches)}
        if pending:
            state["grads"] = self.flat.grads
        return state

    def load_state_dict(self, state: dict, params: torch.Tensor) -> None:
        self.flat.params.copy_(params)
        self.syncer.opt.load_state_dict(state["opt"])
        self.runner.load_state_dict(state["runner"])
        self.rounds_micro_batches = list(state["rounds_micro_batches"])
        if "grads" in state:
            self.flat.grads.copy_(state["grads"])

    def gather_committed(self, out: torch.Tensor) -> torch.Tensor:
        """θ_t from the masters, through the communication thread (its group, its order)."""
        return self.comm.submit(lambda: self.syncer.gather_committed(out)).wait()


# -- the methods: schedules of rounds -----------------------------------------------------------
def run_sequential(engine: RoundEngine, steps: int, on_step: StepCallback, start: int = 0) -> None:
    for t in range(start, steps):
        on_step(t, engine.sequential_round())


def run_delayed(engine: RoundEngine, steps: int, on_step: StepCallback, warmup_steps: int = 0,
                predict: bool = False, start: int = 0) -> None:
    """DPU (predict=False) and WP (predict=True). `start`: committed steps already taken (a
    resumed run); past the warmup the engine then already holds the pending gradients."""
    warm = min(warmup_steps, steps)
    run_sequential(engine, warm, on_step, start)
    if warm == steps:
        return
    if start <= warm:
        engine.prologue(label=f"fwd+bwd @θ_{warm}")
    kind = COMMIT_PREDICT if predict else COMMIT
    point = "θ̂" if predict else "θ"
    for t in range(max(warm, start), steps):
        last = t == steps - 1  # nothing would use gradients computed during the last round
        on_step(t, engine.overlapped_round(kind, zero=True, compute=not last,
                                           label=f"fwd+bwd @{point}"))


def run_acco(engine: RoundEngine, steps: int, on_step: StepCallback, start: int = 0) -> None:
    """`start`: committed steps already taken (a resumed run, whose engine holds G̃_start)."""
    if start == 0:
        engine.prologue(label="fwd+bwd G̃ @θ̃")
    for t in range(start, steps):
        engine.overlapped_round(ESTIMATE, zero=False, compute=True, label="fwd+bwd G @θ")
        last = t == steps - 1
        on_step(t, engine.overlapped_round(COMMIT, zero=True, compute=not last,
                                           label="fwd+bwd G̃ @θ̃"))
