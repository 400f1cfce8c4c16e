"""The local methods as a backend: diloco and streaming_diloco on the flat engine's machinery
(flat buffers, the communication thread, the micro-batch runner), with an inner AdamW per worker and
an outer Nesterov step sharded over the ranks."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import contextmanager

import torch

from ..engine.comm_worker import CommWorker
from ..engine.compute import MicroBatchRunner
from ..engine.flat import FlatModel
from ..engine.local_rounds import (
    LocalCosts,
    LocalEngine,
    LocalSchedule,
    fragment_bounds,
    fragment_kind,
    run_local_rounds,
)
from ..engine.rounds import StepCallback, StopRule
from ..engine.sharded_adamw import AdamWSettings, ShardedAdamW
from ..engine.trace import TraceRecorder
from ..engine.virtual_clock import ClockSettings, VirtualClock, local_sync_collectives
from ..methods.tables import add, lookup
from ..tasks import Task
from .backend import Backend
from .precision import dtype_name
from .signals import CHECKPOINT_SIGNALS

# a schedule of rounds on the local engine: (engine, until, on_step, start)
LocalRounds = Callable[[LocalEngine, StopRule, StepCallback, int], None]
# by the name a local method's spec gives (acco/methods/: `schedule`); register_local_rounds adds one
LOCAL_SCHEDULES: dict[str, LocalRounds] = {"local_rounds": run_local_rounds}


def register_local_rounds(name: str, rounds: LocalRounds) -> LocalRounds:
    """Add a schedule of local rounds (a method defined outside acco may instead name `module:function`)."""
    return add(LOCAL_SCHEDULES, name, rounds, "local schedule of rounds")


def local_schedule(method) -> LocalSchedule:
    """The schedule a method config (conf/method/diloco.yaml, streaming_diloco.yaml) describes."""
    return LocalSchedule(
        sync_every=int(method["sync_every"]),
        fragments=int(method["fragments"]),
        overlap_steps=int(method["overlap_steps"]),
        mixing=float(method["mixing"]),
        outer_lr=float(method["outer_lr"]),
        outer_momentum=float(method["outer_momentum"]),
    )


class LocalBackend(Backend):
    parameters_in_compute_dtype = True
    carries_gradients = False  # an inner step spends its gradients at once

    def __init__(
        self,
        task: Task,
        schedule: LocalSchedule,
        adamw: AdamWSettings,
        rank: int,
        world_size: int,
        device: torch.device,
        accum: int,
        lr_at,
        slowdown: float,
        compute_dtype: torch.dtype,
        tracer: TraceRecorder,
        comm_group,
        step_group,
        clock: ClockSettings | None = None,
        outer_dtype: torch.dtype | None = None,
        rounds: str = "local_rounds",
    ):
        """`clock` (clock.mode=virtual): inner steps and fragment syncs on the virtual clock;
        `slowdown` should then be 1. `outer_dtype` (train.grad_dtype): the pseudo-gradient's dtype
        on the wire (default: the compute dtype).
        `rounds`: the schedule of rounds (LOCAL_SCHEDULES; the method's spec names it)."""
        self.rounds = lookup(LOCAL_SCHEDULES, rounds, "local schedule of rounds")
        self.device = device
        self.outer_dtype = outer_dtype or compute_dtype
        self.flat = FlatModel(
            task.model,
            world_size,
            dtype=compute_dtype,
            decay_bias_and_norm=adamw.decay_bias_and_norm,
            rank=rank,
            device=device,
            full_master=True,
        )
        inner = ShardedAdamW.with_settings(self.flat.take_master_shard(), self.flat.decay_ranges, lr_at, adamw)
        self.comm = CommWorker(device)
        self.runner: MicroBatchRunner | None = MicroBatchRunner(
            task.model,
            task.loss_fn,
            task.train_stream,
            tracer,
            slowdown,
            autocast_dtype=compute_dtype,
            device_type=device.type,
        )
        self.clock: VirtualClock | None = None
        clock_costs = None
        if clock is not None and clock.virtual:
            self.clock, clock_costs = self._virtual_clock(clock, schedule, rank, world_size)
        self.engine: LocalEngine | None = LocalEngine(
            self.flat,
            inner,
            schedule,
            self.comm,
            self.runner,
            accum,
            rank,
            world_size,
            comm_group,
            step_group,
            tracer,
            adamw.clip_norm,
            clock=self.clock,
            clock_costs=clock_costs,
            outer_dtype=self.outer_dtype,
        )
        self.world_size = world_size

    def _virtual_clock(
        self, clock: ClockSettings, schedule: LocalSchedule, rank: int, world_size: int
    ) -> tuple[VirtualClock, LocalCosts]:
        """Each fragment's sync over its bytes (clock.sync_s: its share of the whole model's), the
        inner step's counts all-reduce ([count, loss, non-finite, votes] in float64) and its AdamW
        over the whole model: world_size x clock.optimizer_step_s, the step on one shard."""
        padded = self.flat.layout.padded
        item = torch.empty((), dtype=self.outer_dtype).element_size()  # Δ is reduced in the buffer's dtype
        costs = {
            fragment_kind(f): clock.communication_s(local_sync_collectives(b - a, item), world_size, (b - a) / padded)
            for f, (a, b) in enumerate(fragment_bounds(padded, world_size, schedule.fragments))
        }
        local = LocalCosts(
            counts_s=clock.small_collective_s(8 * (3 + len(CHECKPOINT_SIGNALS)), world_size),
            inner_step_s=world_size * clock.optimizer_step_s,
        )
        costs["inner step counts"] = local.counts_s
        return VirtualClock(clock.micro_batch_costs(world_size), costs, rank), local

    @property
    def live(self) -> LocalEngine:
        if self.engine is None:
            raise RuntimeError("the local backend was released")
        return self.engine

    def run(self, until: StopRule, on_step: StepCallback, start: int) -> None:
        self.rounds(self.live, until, on_step, start)

    def carry_votes(self, votes) -> None:
        self.live.agreement.votes = votes

    def take_agreed(self) -> tuple[bool, tuple[float, ...]]:
        return self.live.agreement.take()

    def state_dicts(self) -> tuple[dict, dict]:
        # φ is the same on every rank (saved once); θ_w and its inner state are each worker's own
        return {"params": self.live.anchor}, {"engine": self.live.state_dict()}

    def load_state_dicts(self, shared: dict, own: dict) -> None:
        self.live.load_state_dict(own["engine"], shared["params"])  # φ stays in host memory

    def committed_vector(self) -> torch.Tensor:
        return self.live.anchor[: self.flat.numel].clone()

    def load_committed_into_model(self, vector: torch.Tensor | None = None) -> None:
        source = self.live.anchor[: self.flat.numel] if vector is None else vector
        self.flat.trainable().copy_(source)

    @contextmanager
    def committed_parameters(self):
        """φ in the buffers' dtype, viewed by the model for the block (θ_w untouched). The
        communication buffer may be busy with a fragment's sync: φ itself where the dtypes and
        devices agree, else a copy on the device (φ is kept in host memory)."""
        anchor = self.live.anchor
        with self.flat.parameters_from(anchor.to(self.flat.params.device, self.flat.dtype)):
            yield

    def precision_report(self) -> dict:
        """Δ is reduced in the buffer's dtype and φ' all-gathered in fp32; the inner AdamW's state
        is the master."""
        flat, engine = self.flat, self.live
        return {
            "compute": dtype_name(flat.dtype),
            "parameters": dtype_name(flat.dtype),
            "micro_batch_grad": dtype_name(flat.dtype),
            "grad_accum": dtype_name(flat.grads.dtype),
            "reduce": dtype_name(engine.buffer.dtype),
            "all_gather": "fp32",
            "master": dtype_name(engine.inner.master.dtype),
            "moments": dtype_name(engine.inner.exp_avg.dtype),
        }

    def memory_report(self) -> dict:
        item = self.flat.params.element_size()
        engine = self.live
        # on the device only: φ is kept in host memory (on a CPU run that is the device)
        outer = [t for t in (engine.anchor, engine.staging, *engine.momentum) if t.device == self.flat.params.device]
        return {
            # the inner AdamW over the whole model, φ, the outer momentum shards, the fp32 staging
            "optimizer_state_bytes": engine.inner.state_bytes() + sum(t.numel() * t.element_size() for t in outer),
            "param_bytes": self.flat.params.numel() * item,
            "grad_bytes": self.flat.grads.numel() * item,
            "comm_buffer_bytes": engine.buffer.numel() * engine.buffer.element_size(),
        }

    def round_micro_batches(self) -> list[int]:
        return list(self.live.rounds_micro_batches)

    def close(self, wait: bool = True) -> None:
        self.comm.close(timeout=30 if wait else 1)

    def release(self) -> None:
        self.engine = self.runner = None
