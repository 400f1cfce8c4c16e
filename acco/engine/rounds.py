"""Rounds on shared machinery, and the methods as schedules of rounds (docs/rounds.md).

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

from collections.abc import Callable
from dataclasses import dataclass

import torch

from .comm_worker import CommWorker
from .compute import MicroBatchRunner
from .flat import FlatModel
from .round_state import RoundState
from .sync import Syncer, SyncKind, SyncResult
from .trace import COMPUTE, TraceRecorder
from .virtual_clock import VirtualClock

StepCallback = Callable[[int, SyncResult], None]


class RoundEngine:
    def __init__(
        self,
        flat: FlatModel,
        syncer: Syncer,
        comm: CommWorker,
        runner: MicroBatchRunner,
        accum: int,
        adaptive: bool,
        tracer: TraceRecorder,
        max_accum_factor: int = 64,
        clock: VirtualClock | None = None,
    ):
        """`clock` (clock.mode=virtual): the virtual clock decides every rank's micro-batches per
        round instead of the real sync's end."""
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
        # may_extend(uncommitted): may this rank compute one more micro-batch beyond the round's
        # minimum, holding `uncommitted` micro-batches not yet in a committed step? (a budget near
        # its end: see Trainer.budget_allows_more); None: always, while the sync runs
        self.may_extend: Callable[[int], bool] | None = None
        self.in_flight = 0  # micro-batches of this rank in a commit sync now running
        self.clock = clock

    # -- building blocks ----------------------------------------------------------------------
    def _compute(self, minimum: int, job=None, label: str = "fwd+bwd") -> int:
        if self.clock is not None:
            return self._compute_virtual(minimum, job is not None, label)
        n = 0
        while n < minimum or (self.adaptive and job is not None and self._extend(job, n)):
            self.runner.run_one(label)
            n += 1
        self.rounds_micro_batches.append(n)
        return n

    def _compute_virtual(self, minimum: int, beside_sync: bool, label: str) -> int:
        """As many micro-batches as the virtual clock fits (every rank's count, decided alike on
        every rank: the budget's may_extend is asked with each rank's own uncommitted count)."""
        assert self.clock is not None
        n = self.clock.compute_round(minimum, self.adaptive and beside_sync, self.max_micro_batches, self.may_extend)
        for _ in range(n):
            self.runner.run_one(label)
        self.rounds_micro_batches.append(n)
        return n

    def _extend(self, job, n: int) -> bool:
        """Compute one more micro-batch beyond the minimum, while the sync runs? Decided on
        finished work: on a GPU the host first waits for the micro-batch before the last one
        queued, so the queue never runs more than one micro-batch ahead of a finished sync and
        one stays in flight (no drain between micro-batches)."""
        self.runner.wait_previous()
        return not job.is_done() and n < self.max_micro_batches and self._extend_ok()

    def _extend_ok(self) -> bool:
        # uncommitted: the accumulator (ACCO's estimate round keeps G̃ in it) and a commit in flight
        return self.may_extend is None or self.may_extend(self.runner.count + self.in_flight)

    def _launch(self, kind: SyncKind):
        """Gradients out: copy the accumulator into the communication buffer, start the sync."""
        self.comm.delay_writes()  # make-gpu-check's race delay lands before the writes it tests
        self.buffer.copy_(self.flat.grads)
        count, loss_sum = self.runner.count, self.runner.loss_sum
        self.in_flight = count if kind.commits else 0  # an estimate leaves them in the accumulator
        if self.clock is not None:
            self.clock.launch(kind.value, kind.commits)
        return self.comm.submit(lambda: self.syncer.sync(kind, count, loss_sum))

    def _finish(self, job) -> SyncResult:
        """Parameters in: wait for the sync and load what it gathered into the model."""
        with self.tracer.span("wait for sync", COMPUTE, cat="idle"):
            result = job.wait()
        self.in_flight = 0
        if self.clock is not None:
            modelled = self.clock.finish()
            if modelled != result.micro_batches:  # the model must be what the ranks really did
                raise RuntimeError(
                    f"the virtual clock modelled {modelled} micro-batches in this sync, the ranks sent "
                    f"{result.micro_batches}: its counts are out of step with the ranks'"
                )
        self.flat.params.copy_(self.syncer.gathered)
        return result

    def _empty_accumulator(self) -> None:
        self.flat.zero_grads()
        self.runner.reset()
        if self.clock is not None:
            self.clock.empty()

    # -- rounds ---------------------------------------------------------------------------------
    def prologue(self, label: str = "fwd+bwd") -> None:
        """Compute a round's gradients with nothing to communicate yet."""
        self._empty_accumulator()
        self._compute(self.accum, label=label)

    def sequential_round(self) -> SyncResult:
        """Compute, then commit: nothing overlaps (ddp; dpu/wp during their warmup)."""
        self.prologue()
        return self._finish(self._launch(SyncKind.COMMIT))

    def overlapped_round(self, kind: SyncKind, label: str) -> SyncResult:
        """Send the accumulator and, while the sync runs, compute fresh gradients into the emptied
        accumulator (dpu, wp; ACCO's commit round: G̃_{t+1} at θ̃_{t+1})."""
        job = self._launch(kind)
        self._empty_accumulator()
        self._compute(self.accum, job, label)
        return self._finish(job)

    def accumulating_round(self, kind: SyncKind, label: str) -> SyncResult:
        """Send a copy of the accumulator and, while the sync runs, compute more gradients on top of
        it: the accumulator keeps what was sent (ACCO's estimate round: G_t on top of G̃_t)."""
        job = self._launch(kind)
        self._compute(self.accum, job, label)
        return self._finish(job)

    def communicate_only(self, kind: SyncKind) -> SyncResult:
        """Send the accumulator and compute nothing beside the sync: the run's known last round,
        whose gradients nobody would use. The accumulator is left empty, as after any sync that
        spent it."""
        job = self._launch(kind)
        self._empty_accumulator()
        return self._finish(job)

    # -- checkpoints: what a step boundary leaves for the next round -----------------------------
    def carried_state(self, pending: bool) -> RoundState:
        """This rank's state between two committed steps: its optimizer shard, its data position
        and, when `pending` (dpu/wp/acco after their first overlapped round), the gradients the
        next round will send (the live buffer, not a copy). The parameters are the same on every
        rank and saved once."""
        return RoundState(
            opt=self.syncer.opt.state_dict(),
            runner=self.runner.state_dict(),
            rounds_micro_batches=list(self.rounds_micro_batches),
            grads=self.flat.grads if pending else None,
            clock=self.clock.state_dict() if self.clock is not None else None,
        )

    def resume_from(self, state: RoundState, params: torch.Tensor) -> None:
        """Continue from `state` and the committed parameters (read back from a checkpoint)."""
        self.flat.params.copy_(params)
        self.syncer.opt.load_state_dict(state.opt)
        self.runner.load_state_dict(state.runner)
        self.rounds_micro_batches = list(state.rounds_micro_batches)
        if state.grads is not None:
            self.flat.grads.copy_(state.grads)
        if self.clock is not None:
            assert state.clock is not None, "a virtual-clock run's checkpoint holds its clock"
            self.clock.load_state_dict(state.clock)

    def state_dict(self, pending: bool) -> dict:
        """carried_state() as a checkpoint holds it (the keys checkpoints have always had)."""
        return self.carried_state(pending).state_dict()

    def load_state_dict(self, state: dict, params: torch.Tensor) -> None:
        self.resume_from(RoundState.from_state_dict(state), params)

    def gather_committed(self, out: torch.Tensor) -> torch.Tensor:
        """θ_t from the masters, through the communication thread (its group, its order)."""
        return self.comm.submit(lambda: self.syncer.gather_committed(out)).wait()


# -- the methods: schedules of rounds -----------------------------------------------------------
@dataclass(frozen=True)
class StopRule:
    """When a schedule of rounds ends. `done(t)`: is the run over after t committed steps? It is
    asked on every rank at the same step boundary and must answer alike (it may read only what the
    syncs agreed on: step counts, all-reduced micro-batch counts). `max_steps`: a step count known
    in advance, so the last step's round computes nothing nobody would use; a budget reached at a
    step nobody could foresee (adaptive counts) costs one round of compute whose gradients are
    dropped."""

    done: Callable[[int], bool]
    max_steps: int | None = None

    @classmethod
    def steps(cls, n: int) -> StopRule:
        return cls(lambda t: t >= n, n)

    def known_last(self, t: int) -> bool:
        """Step t (0-based) is the run's last, known before it is computed."""
        return self.max_steps is not None and t == self.max_steps - 1


def run_sequential(engine: RoundEngine, until: StopRule, on_step: StepCallback, start: int = 0) -> None:
    t = start
    while not until.done(t):
        on_step(t, engine.sequential_round())
        t += 1


def run_delayed(
    engine: RoundEngine,
    until: StopRule,
    on_step: StepCallback,
    warmup_steps: int = 0,
    predict: bool = False,
    start: int = 0,
) -> None:
    """DPU (predict=False) and WP (predict=True). `start`: committed steps already taken (a
    resumed run); past the warmup the engine then already holds the pending gradients."""
    t = start
    while t < warmup_steps and not until.done(t):
        on_step(t, engine.sequential_round())
        t += 1
    if until.done(t):
        return
    if start <= warmup_steps:
        engine.prologue(label=f"fwd+bwd @θ_{t}")
    kind = SyncKind.COMMIT_PREDICT if predict else SyncKind.COMMIT
    point = "θ̂" if predict else "θ"
    while not until.done(t):
        if until.known_last(t):  # nothing would use gradients computed during the last round
            on_step(t, engine.communicate_only(kind))
        else:
            on_step(t, engine.overlapped_round(kind, label=f"fwd+bwd @{point}"))
        t += 1


def run_acco(engine: RoundEngine, until: StopRule, on_step: StepCallback, start: int = 0) -> None:
    """`start`: committed steps already taken (a resumed run, whose engine holds G̃_start)."""
    if start == 0:
        engine.prologue(label="fwd+bwd G̃ @θ̃")
    t = start
    while not until.done(t):
        engine.accumulating_round(SyncKind.ESTIMATE, label="fwd+bwd G @θ")
        if until.known_last(t):
            on_step(t, engine.communicate_only(SyncKind.COMMIT))
        else:
            on_step(t, engine.overlapped_round(SyncKind.COMMIT, label="fwd+bwd G̃ @θ̃"))
        t += 1
