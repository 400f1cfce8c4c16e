"""The local methods on the shared machinery (beyond the paper): DiLoCo (arXiv 2311.08105) and
Streaming DiLoCo (arXiv 2501.18512), as schedules of rounds like ddp, dpu, wp and acco.

Every worker w takes inner AdamW steps on its own micro-batches with an optimizer of its own (over
the whole model: it cannot be sharded, the workers' parameters differ), and now and then the
workers average how far they moved away from the global parameters φ (the pseudo-gradient) and
take an outer step with it. The model's flat vector is cut into F fragments, contiguous ranges in
module order (consecutive layers), each synchronised on its own timetable:

    inner step s = 1, 2, ... (every worker):  θ_w <- AdamW_w(θ_w, g_w / accum)
    fragment f's sync starts after inner step s when s ≡ (f+1)·H/F (mod H):
        Δ_f  = mean_w (φ_f - θ_{w,f})              reduce-scatter: this rank's shard of Δ_f
        φ'_f = φ_f - lr_out·(Δ_f + μ·m_f),  m_f <- μ·m_f + Δ_f   (SGD with Nesterov momentum,
                                                   on this rank's shard; the momentum is sharded)
        φ'_f gathered in fp32 (all-gather)
    it runs on the communication thread beside the next τ inner steps; after inner step s + τ:
        φ_f <- φ'_f ;  θ_{w,f} <- α·θ_{w,f} + (1-α)·φ'_f

diloco is F = 1, τ = 0, α = 0: every H steps all workers wait for the outer step and restart from
φ. streaming_diloco: F fragments, τ ≥ 1 inner steps of overlap, mixing factor α. A run of known
length ends with every fragment synchronised: after the last inner step each fragment whose
inner steps are not all in φ yet takes one more outer step (not overlapped). The committed
parameters (evaluation, final_params.pt) are φ, the same on every rank.

What is not sent: gradients. Each inner step's counts, loss sum, finiteness and votes (a few
numbers) are all-reduced on the main thread's own group, so they never queue behind a fragment's
sync on the communication thread; the trainer's step boundaries stay agreed, as for every method."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..config.validate import ConfigError
from .collectives import all_gather_into, reduce_scatter_sum
from .comm_worker import CommJob, CommWorker
from .compute import MicroBatchRunner
from .flat import FlatModel
from .round_state import InFlightSync, LocalRoundState
from .rounds import StepCallback, StopRule
from .sharded_adamw import ShardedAdamW
from .sync import Agreement, SyncKind, SyncResult, squared_norm
from .trace import COMM, COMPUTE, TraceRecorder
from .virtual_clock import VirtualClock


@dataclass(frozen=True)
class LocalSchedule:
    """H, F, τ, α and the outer optimizer (conf/method/diloco.yaml, streaming_diloco.yaml)."""

    sync_every: int  # H: inner steps between two syncs of a fragment
    fragments: int = 1  # F
    overlap_steps: int = 0  # τ: inner steps a fragment's sync runs beside
    mixing: float = 0.0  # α: the share of the local parameters kept when a sync lands
    outer_lr: float = 0.7
    outer_momentum: float = 0.9

    def starts_after(self, step: int) -> list[int]:
        """The fragments whose sync starts after inner step `step` (1-based)."""
        every = self.sync_every // self.fragments
        return [f for f in range(self.fragments) if step % self.sync_every == ((f + 1) * every) % self.sync_every]


def check_schedule(s: LocalSchedule) -> str | None:
    """Why the schedule cannot run, or None."""
    if s.sync_every < 1 or s.fragments < 1:
        return "sync_every and fragments must be >= 1"
    if s.sync_every % s.fragments:
        return f"sync_every ({s.sync_every}) must be a multiple of fragments ({s.fragments}): evenly spaced syncs"
    if not 0 <= s.overlap_steps < s.sync_every // s.fragments:
        return (
            f"overlap_steps ({s.overlap_steps}) must be >= 0 and below sync_every/fragments "
            f"({s.sync_every // s.fragments}): one fragment's sync in flight at a time"
        )
    if not 0.0 <= s.mixing <= 1.0:
        return f"mixing must lie in [0, 1], got {s.mixing}"
    if s.outer_lr <= 0 or not 0.0 <= s.outer_momentum < 1.0:
        return "outer_lr must be > 0 and outer_momentum in [0, 1)"
    return None


def fragment_kind(f: int) -> str:
    """Fragment f's sync, as the virtual clock names its cost."""
    return f"fragment {f}"


@dataclass(frozen=True)
class LocalCosts:
    """What the virtual clock charges an inner step beside its micro-batches: the counts'
    all-reduce (every rank waits for the slowest there) and the inner AdamW over the whole model."""

    counts_s: float = 0.0
    inner_step_s: float = 0.0


def fragment_bounds(padded: int, world_size: int, fragments: int) -> list[tuple[int, int]]:
    """F contiguous [start, end) ranges of the padded flat vector, as equal as they can be, each a
    multiple of world_size long (each is reduce-scattered over the ranks on its own)."""
    units = padded // world_size
    if fragments > units:
        raise ValueError(f"{fragments} fragments of a vector of {padded} entries over {world_size} ranks")
    cuts = [round(f * units / fragments) * world_size for f in range(fragments + 1)]
    return list(zip(cuts[:-1], cuts[1:]))


class LocalEngine:
    """One rank's worker: its flat model (θ_w, in the compute dtype), its inner AdamW over the whole
    vector (fp32 master = θ_w), the global parameters φ (fp32, the same on every rank), this rank's
    shard of each fragment's outer momentum, and the communication thread for the fragments' syncs."""

    def __init__(
        self,
        flat: FlatModel,
        inner: ShardedAdamW,
        schedule: LocalSchedule,
        comm: CommWorker,
        runner: MicroBatchRunner,
        accum: int,
        rank: int,
        world_size: int,
        comm_group,
        step_group,
        tracer: TraceRecorder,
        clip_norm: float = 0.0,
        clock: VirtualClock | None = None,
        clock_costs: LocalCosts | None = None,
        outer_dtype: torch.dtype | None = None,
    ):
        """`clock` (clock.mode=virtual), with `clock_costs`: the virtual clock every inner step and
        fragment sync advances (VirtualClock). `outer_dtype` (train.grad_dtype):
        the pseudo-gradient's dtype on the wire (default the compute dtype's; fp32 beside bf16
        parameters sends twice the bytes and sums the workers' Δ without rounding to bf16)."""
        self.flat, self.inner, self.schedule = flat, inner, schedule
        self.clock, self.clock_costs = clock, clock_costs
        self.comm, self.runner, self.accum = comm, runner, accum
        self.rank, self.world_size = rank, world_size
        self.comm_group, self.step_group = comm_group, step_group
        self.tracer = tracer
        self.clip_norm = float(clip_norm or 0.0)
        device = flat.params.device
        self.fragments = fragment_bounds(flat.layout.padded, world_size, schedule.fragments)
        # φ: fp32, padded, the same on every rank, in host memory: on a GPU a model-sized fp32
        # vector (28 GB at 7B) beside θ_w's own AdamW would not fit; a fragment's sync brings its
        # part over into `staging` (the fragment's size) and takes it back when it lands
        self.anchor = inner.master.detach().to("cpu", copy=True)
        if device.type == "cuda":  # pinned: φ_f's copy onto the device at a sync's start does not
            self.anchor = self.anchor.pin_memory()  # drain the compute stream (a pageable one does)
        self.momentum = [torch.zeros((b - a) // world_size, device=device) for a, b in self.fragments]
        # Δ out, fragment by fragment, in outer_dtype
        self.buffer = torch.zeros(flat.params.shape, dtype=outer_dtype or flat.params.dtype, device=device)
        longest = max(b - a for a, b in self.fragments)
        self.staging = torch.empty(longest, dtype=torch.float32, device=device)  # φ'_f in
        self.grad_shard = torch.empty(longest // world_size, dtype=self.buffer.dtype, device=device)
        self.scratch = torch.empty_like(self.grad_shard)
        self.agreement = Agreement()
        self.in_flight: tuple[int, CommJob] | None = None  # (fragment, its sync)
        self.lands_after = 0  # the inner step after which the sync in flight lands
        self.last_start = [0] * schedule.fragments  # inner step after which each fragment last synced
        self.rounds_micro_batches: list[int] = []

    # -- the inner step -----------------------------------------------------------------------------
    def local_round(self) -> SyncResult:
        """accum micro-batches at θ_w, the step's counts agreed by all ranks, an inner AdamW step."""
        self.flat.zero_grads()
        self.runner.reset()
        for _ in range(self.accum):
            self.runner.run_one("fwd+bwd @θ_w")
        self.rounds_micro_batches.append(self.runner.count)
        count = self.runner.count
        n_tot, loss_tot = self.agreement.all_reduce(
            count, self.runner.loss_sum, self.flat.grads, self.step_group, on_host=True
        )
        if self.clock is not None:  # every rank's micro-batches, the counts' all-reduce, the inner AdamW
            assert self.clock_costs is not None
            self.clock.compute_all(self.accum)
            self.clock.collective(self.clock_costs.counts_s)
            self.clock.advance(self.clock_costs.inner_step_s)
        grad = self.flat.grads.to(torch.float32).div_(count)  # this worker's own mean gradient
        grad_norm = float("nan")
        if self.clip_norm > 0:
            grad_norm = float(squared_norm(grad).sqrt())
            coef = self.clip_norm / (grad_norm + 1e-6)
            if coef < 1.0:
                grad.mul_(coef)
        lr = self.inner.lr
        with self.tracer.span("adamw (inner)", COMPUTE):
            self.flat.params.copy_(self.inner.commit(grad, int(round(n_tot))))
        return SyncResult(SyncKind.LOCAL, int(round(n_tot)), loss_tot / n_tot, lr, grad_norm, self.inner.step_count)

    # -- a fragment's sync ------------------------------------------------------------------------
    def start_sync(self, f: int, step: int) -> None:
        """Δ_f out and the outer step on the communication thread (one fragment in flight), to land
        after inner step step + τ."""
        if self.in_flight is not None:
            raise RuntimeError("a fragment's sync started while another is in flight")
        a, b = self.fragments[f]
        phi = self.staging[: b - a]
        self.comm.delay_writes()  # make gpu-check's race delay lands before the writes it tests
        # φ_f onto the device (queued: the anchor is pinned on a GPU), the outer step starts from it
        phi.copy_(self.anchor[a:b], non_blocking=True)
        torch.sub(phi, self.inner.master[a:b], out=self.buffer[a:b])  # cast to the buffer
        self.last_start[f] = step
        if self.clock is not None:  # starts when the last rank joins; waited for when it lands
            self.clock.launch(fragment_kind(f), commits=False)
        self.in_flight = (f, self.comm.submit(lambda: self._outer_step(f)))
        self.lands_after = step + self.schedule.overlap_steps

    def _outer_step(self, f: int) -> None:
        a, b = self.fragments[f]
        shard = (b - a) // self.world_size
        s = self.schedule
        with self.tracer.span(f"sync (fragment {f})", COMM, side_cpu=True):
            with self.tracer.span("reduce_scatter", COMM):
                reduce_scatter_sum(self.buffer[a:b], self.grad_shard[:shard], self.comm_group, self.scratch[:shard])
            delta = self.grad_shard[:shard].to(torch.float32).div_(self.world_size)
            m = self.momentum[f]
            m.mul_(s.outer_momentum).add_(delta)  # torch.optim.SGD(nesterov=True), dampening 0
            update = delta.add(m, alpha=s.outer_momentum)
            own = self.staging[self.rank * shard : (self.rank + 1) * shard]  # φ_f's own shard, in place
            torch.add(own, update, alpha=-s.outer_lr, out=own)
            with self.tracer.span("all_gather", COMM):
                all_gather_into(self.staging[: b - a], own, self.comm_group)

    def finish_sync(self) -> None:
        """Wait for the fragment in flight, take φ'_f and mix it into θ_w."""
        if self.in_flight is None:
            return
        f, job = self.in_flight
        with self.tracer.span("wait for sync", COMPUTE, cat="idle"):
            job.wait()
        self.in_flight = None
        if self.clock is not None:
            self.clock.finish()
        a, b = self.fragments[f]
        phi = self.staging[: b - a]  # φ'_f, on the device
        self.anchor[a:b].copy_(phi)
        master = self.inner.master[a:b]
        alpha = self.schedule.mixing
        if alpha == 0.0:
            master.copy_(phi)
        else:
            master.mul_(alpha).add_(phi, alpha=1.0 - alpha)
        self.flat.params[a:b].copy_(master)

    def sync_now(self, f: int, step: int) -> None:
        self.start_sync(f, step)
        self.finish_sync()

    def after_step(self, step: int, last: bool) -> None:
        """The syncs due after inner step `step`: the one in flight lands, fragments start theirs
        (with τ = 0 they land at once); after the run's `last` step every fragment is synchronised."""
        if self.in_flight is not None and self.lands_after <= step:
            self.finish_sync()
        for f in self.schedule.starts_after(step):
            self.start_sync(f, step)
            if self.lands_after <= step:
                self.finish_sync()
        if last:
            self.finish_sync()
            for f in range(self.schedule.fragments):
                if self.last_start[f] < step:
                    self.sync_now(f, step)

    # -- checkpoints --------------------------------------------------------------------------------
    def carried_state(self) -> LocalRoundState:
        """This worker's state at a step boundary. A sync in flight is waited for (not landed): its
        result φ'_f is saved with the step it lands after, so a resumed run lands it then."""
        flight = None
        if self.in_flight is not None:
            f, job = self.in_flight
            job.wait()
            a, b = self.fragments[f]
            flight = InFlightSync(f, self.lands_after, self.staging[: b - a].clone())
        return LocalRoundState(
            inner=self.inner.state_dict(),  # θ_w (fp32) and its moments: this worker's own
            momentum=list(self.momentum),
            last_start=list(self.last_start),
            runner=self.runner.state_dict(),
            rounds_micro_batches=list(self.rounds_micro_batches),
            in_flight=flight,
            clock=self.clock.state_dict() if self.clock is not None else None,
        )

    def resume_from(self, state: LocalRoundState, anchor: torch.Tensor) -> None:
        """Continue from `state` and φ (read back from a checkpoint)."""
        self.anchor.copy_(anchor)
        self.inner.load_state_dict(state.inner)
        self.flat.params.copy_(self.inner.master)
        for m, saved in zip(self.momentum, state.momentum):
            m.copy_(saved)
        self.last_start = list(state.last_start)
        flight = state.in_flight
        if flight is not None:  # its outer step was taken before the checkpoint: only landing is left
            self.staging[: flight.staging.numel()].copy_(flight.staging)
            done = CommJob(lambda: None)
            done.done.set()
            self.in_flight, self.lands_after = (flight.fragment, done), flight.lands_after
        self.runner.load_state_dict(state.runner)
        self.rounds_micro_batches = list(state.rounds_micro_batches)
        if self.clock is not None:
            assert state.clock is not None, "a virtual-clock run's checkpoint holds its clock"
            self.clock.load_state_dict(state.clock)

    def state_dict(self) -> dict:
        """carried_state() as a checkpoint holds it (the keys checkpoints have always had)."""
        return self.carried_state().state_dict()

    def load_state_dict(self, state: dict, anchor: torch.Tensor) -> None:
        self.resume_from(LocalRoundState.from_state_dict(state), anchor)


def run_local_rounds(engine: LocalEngine, until: StopRule, on_step: StepCallback, start: int = 0) -> None:
    """diloco and streaming_diloco: inner steps, each followed by the syncs its timetable holds."""
    t = start
    while not until.done(t):
        result = engine.local_round()
        engine.after_step(t + 1, last=until.known_last(t))
        on_step(t, result)
        t += 1


def check_local_method(cfg: dict) -> None:
    """diloco / streaming_diloco: a schedule that can run, and a run of known length (it ends with
    every fragment synchronised after its last step). Each setting alone has been checked by its
    field's check (LocalMethod) before this runs."""
    m = cfg["method"]
    name = m["name"]
    schedule = LocalSchedule(
        int(m["sync_every"]),
        int(m["fragments"]),
        int(m["overlap_steps"]),
        float(m["mixing"]),
        float(m["outer_lr"]),
        float(m["outer_momentum"]),
    )
    problem = check_schedule(schedule)
    if problem:
        raise ConfigError(f"method={name}: {problem}; see conf/method/{name}.yaml")
    train = cfg["train"]
    if not train.get("steps") or train.get("samples") or train.get("tokens"):
        raise ConfigError(
            f"method={name} needs a run of known length: set train.steps and train.samples=null "
            f"train.tokens=null (its last step synchronises every fragment)"
        )
