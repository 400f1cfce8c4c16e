"""The flat engine as a backend: flat parameter and gradient buffers, AdamW sharded over the ranks
and a communication thread (acco/engine/*), on which ddp (impl=flat), dpu, wp and acco are
schedules of rounds."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import contextmanager
from types import MappingProxyType
from typing import Any

import torch

from ..analytic.overlap import Buckets, ddp_limits
from ..engine.backward_overlap import BackwardOverlapEngine, BucketedSyncer
from ..engine.comm_worker import CommWorker
from ..engine.compute import MicroBatchRunner
from ..engine.flat import FlatModel
from ..engine.rounds import RoundEngine, StepCallback, StopRule, run_acco, run_delayed, run_sequential
from ..engine.sharded_adamw import AdamWSettings, ShardedAdamW
from ..engine.sync import Syncer, SyncKind
from ..engine.trace import TraceRecorder
from ..engine.virtual_clock import ClockSettings, VirtualClock, flat_overlap_costs, flat_sync_costs
from ..methods import FLAT, get
from ..methods.tables import add, lookup
from ..tasks import Task
from .backend import Backend
from .precision import dtype_name
from .signals import CHECKPOINT_SIGNALS

# a schedule of rounds on this engine: (engine, until, on_step, start, settings), `settings` the
# method's own (method.*, read-only), so a schedule brought from outside acco reads its own there
FlatSchedule = Callable[[RoundEngine, StopRule, StepCallback, int, Mapping[str, Any]], None]


def _warmup(settings: Mapping[str, Any]) -> int:
    """dpu's and wp's method.warmup_steps: sequential steps before the delayed updates."""
    return int(settings.get("warmup_steps", 0))


# the schedules, by the name a method's spec gives (acco/methods/: `schedule`); register_schedule adds one
SCHEDULES: dict[str, FlatSchedule] = {
    "sequential": lambda engine, until, on_step, start, settings: run_sequential(engine, until, on_step, start),
    "delayed": lambda engine, until, on_step, start, settings: run_delayed(
        engine, until, on_step, warmup_steps=_warmup(settings), predict=False, start=start
    ),
    "delayed_predict": lambda engine, until, on_step, start, settings: run_delayed(
        engine, until, on_step, warmup_steps=_warmup(settings), predict=True, start=start
    ),
    "acco": lambda engine, until, on_step, start, settings: run_acco(engine, until, on_step, start),
}


def register_schedule(name: str, schedule: FlatSchedule) -> FlatSchedule:
    """Add a schedule of rounds (a method defined outside acco may instead name `module:function`)."""
    return add(SCHEDULES, name, schedule, "flat schedule of rounds")


# the sync's all-reduce of [count, loss sum, non-finite, one vote per checkpoint signal] in float64
AGREEMENT_BYTES = 8 * (3 + len(CHECKPOINT_SIGNALS))


class FlatBackend(Backend):
    parameters_in_compute_dtype = True  # views of the flat buffer, stored in the compute dtype

    def __init__(
        self,
        task: Task,
        method: str,
        settings: Mapping[str, Any],
        adamw: AdamWSettings,
        rank: int,
        world_size: int,
        device: torch.device,
        accum: int,
        lr_at,
        slowdown: float,
        compute_dtype: torch.dtype,
        adaptive: bool,
        max_accum_factor: int,
        tracer: TraceRecorder,
        comm_group,
        may_extend: Callable[[int], bool] | None = None,
        grad_dtype: torch.dtype | None = None,
        clock: ClockSettings | None = None,
        overlap_backward: bool = False,
        bucket_mb: float | None = None,
    ):
        """`settings`: the method's (method.*: a dict, or the run's cfg.method), which its schedule
        of rounds reads (dpu, wp: warmup_steps). `grad_dtype` (train.grad_dtype): the gradient
        accumulator's and the communication buffer's dtype (default: the compute dtype); the
        parameters are stored in the compute dtype.
        `overlap_backward` (ddp, method.overlap_backward): reduce-scatter the gradients bucket by
        bucket during the last micro-batch's backward, in buckets of
        `bucket_mb` MiB (method.bucket_mb; None: PyTorch DDP's defaults, a 1 MiB first bucket then
        25 MiB).
        `clock` (clock.mode=virtual): the rounds run on the virtual clock;
        `slowdown` should then be 1 (the clock slows a heterogeneous worker, not a sleep)."""
        spec = get(method)
        if spec.backend != FLAT:
            raise ValueError(f"method {method!r} does not run on the flat engine")
        self.schedule = lookup(SCHEDULES, spec.schedule, "flat schedule of rounds")
        if overlap_backward and "overlap_backward" not in spec.settings:
            raise ValueError(f"overlap_backward is ddp's setting, not {method}'s")
        self.method = method
        self.spec = spec
        # read-only: a schedule reads its settings, it does not change the run's
        self.settings: Mapping[str, Any] = MappingProxyType({key: settings[key] for key in settings})
        self.overlap_backward = overlap_backward
        # dpu/wp past warmup and acco hold the gradients of a round not yet sent
        self.carries_gradients = spec.carries_gradients
        self.device = device
        self.compute_dtype = compute_dtype
        # the model may still be on the host: one parameter at a time onto the device, into the
        # low-precision buffer and this rank's fp32 master shard
        self.flat = FlatModel(
            task.model,
            world_size,
            dtype=compute_dtype,
            decay_bias_and_norm=adamw.decay_bias_and_norm,
            rank=rank,
            device=device,
            grad_dtype=grad_dtype,
            bucket_limits=ddp_limits(bucket_mb) if overlap_backward else None,
        )
        self.opt = ShardedAdamW.with_settings(self.flat.take_master_shard(), self.flat.decay_ranges, lr_at, adamw)
        # the one communication buffer, in the accumulator's dtype (the reduce-scatter sums in it;
        # an fp32 buffer all-gathers fp32 parameters, which the copy into `params` rounds)
        self.buffer = torch.zeros_like(self.flat.grads)
        # the parameters' dtype over the buffer's storage: evaluation gathers θ_t into it
        self.param_view = (
            self.buffer
            if self.buffer.dtype == self.flat.dtype
            else self.buffer.view(self.flat.dtype)[: self.buffer.numel()]
        )
        # the communication thread gets a process group of its own (`comm_group`), so its
        # collectives never interleave with the main thread's (evaluation, metrics) on another
        self.comm = CommWorker(device)
        syncer_args = (self.buffer, self.opt, rank, world_size, comm_group, tracer, adamw.clip_norm)
        self.syncer: Syncer | None = (
            BucketedSyncer(
                *syncer_args, buckets=self.flat.buckets, gather_space=self.flat.grads, gathered=self.param_view
            )
            if overlap_backward
            else Syncer(*syncer_args, gathered=self.param_view)
        )
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
        self.overlap_costs: tuple[Buckets, list[float], float] | None = None
        if clock is not None and clock.virtual:
            if overlap_backward:
                buckets = Buckets.from_sizes(self.flat.buckets.entries_in_launch_order())
                reduce_s, tail_s = flat_overlap_costs(
                    clock,
                    world_size,
                    buckets,
                    self.buffer.element_size(),
                    AGREEMENT_BYTES,
                    adamw.clips,
                    gather_item=self.param_view.element_size(),
                )
                self.overlap_costs = (buckets, reduce_s, tail_s)
                costs = {SyncKind.COMMIT.value: sum(reduce_s) + tail_s}
            else:
                costs = flat_sync_costs(
                    clock,
                    tuple(SyncKind(kind) for kind in spec.sync_kinds),
                    world_size,
                    self.buffer.nbytes,
                    AGREEMENT_BYTES,
                    adamw.clips,
                    gather_bytes=self.param_view.nbytes,
                )
            self.clock = VirtualClock(clock.micro_batch_costs(world_size), costs, rank)
        engine_args = (self.comm, self.runner, accum, adaptive, tracer, max_accum_factor, self.clock)
        if isinstance(self.syncer, BucketedSyncer):
            engine = BackwardOverlapEngine(self.flat, self.syncer, *engine_args)
            clock_model, share = self.overlap_costs, clock.backward_share if clock is not None else 0.0
            if self.clock is not None and clock_model is not None:
                virtual, (buckets, reduce_s, tail_s) = self.clock, clock_model
                engine.clock_step = lambda a: virtual.backward_overlapped_step(a, buckets, reduce_s, tail_s, share)
            self.engine: RoundEngine | None = engine
        else:
            self.engine = RoundEngine(self.flat, self.syncer, *engine_args)
        self.engine.may_extend = may_extend

    @property
    def live_engine(self) -> RoundEngine:
        assert self.engine is not None, "the backend was used after release()"
        return self.engine

    @property
    def live_syncer(self) -> Syncer:
        assert self.syncer is not None, "the backend was used after release()"
        return self.syncer

    def run(self, until: StopRule, on_step: StepCallback, start: int) -> None:
        self.schedule(self.live_engine, until, on_step, start, self.settings)

    def carry_votes(self, votes) -> None:
        self.live_syncer.agreement.votes = votes

    def take_agreed(self) -> tuple[bool, tuple[float, ...]]:
        # each rank sees only its shard of the synced gradient: the syncs' count all-reduce agreed on it
        return self.live_syncer.take_agreed()

    def pending_grads_nonfinite(self) -> bool:
        return self.carries_gradients and not bool(torch.isfinite(self.flat.grads).all())

    def state_dicts(self) -> tuple[dict, dict]:
        return {"params": self.flat.params}, {"engine": self.live_engine.state_dict(pending=self.carries_gradients)}

    def load_state_dicts(self, shared: dict, own: dict) -> None:
        self.live_engine.load_state_dict(own["engine"], shared["params"].to(self.device))

    def committed_vector(self) -> torch.Tensor:
        """θ_t in fp32, in host memory (the final parameters' path): gathered in chunks on the
        communication thread (its group, its order), never a model-sized fp32 vector on the GPU."""
        syncer = self.syncer
        assert syncer is not None, "committed_vector after release()"
        return self.comm.submit(lambda: syncer.gather_committed_to_host(self.flat.numel)).wait()

    def load_committed_into_model(self, vector: torch.Tensor | None = None) -> None:
        """Without `vector` no fp32 model-sized vector is made: the masters are gathered, rounded to
        the buffers' dtype, through the communication buffer (free at a step boundary)."""
        if vector is None:
            self.live_engine.gather_committed(self.param_view)
            self.flat.params.copy_(self.param_view)
        else:
            self.flat.trainable().copy_(vector)

    @contextmanager
    def committed_parameters(self):
        """θ_t rounded to the buffers' dtype: the masters are gathered into the communication
        buffer, free at a step boundary, and the parameters viewed from it (no model-sized copy)."""
        self.live_engine.gather_committed(self.param_view)
        with self.flat.parameters_from(self.param_view):
            yield

    def memory_report(self) -> dict:
        flat = self.flat
        micro = flat.micro_grads
        return {
            "optimizer_state_bytes": self.opt.state_bytes(),
            "param_bytes": flat.params.nbytes,
            # the accumulator and, beside an accumulator of another dtype, one micro-batch's gradient
            "grad_bytes": flat.grads.nbytes + (micro.nbytes if micro is not None else 0),
            "comm_buffer_bytes": self.buffer.nbytes,
        }

    def precision_report(self) -> dict:
        flat = self.flat
        return {
            "compute": dtype_name(self.compute_dtype),
            "parameters": dtype_name(flat.dtype),
            "micro_batch_grad": dtype_name(flat.dtype),
            "grad_accum": dtype_name(flat.grads.dtype),
            "reduce": dtype_name(self.buffer.dtype),
            "all_gather": dtype_name(self.param_view.dtype),
            "master": dtype_name(self.opt.master.dtype),
            "moments": dtype_name(self.opt.exp_avg.dtype),
        }

    def round_micro_batches(self) -> list[int]:
        return list(self.live_engine.rounds_micro_batches)

    def close(self, wait: bool = True) -> None:
        self.comm.close(timeout=30 if wait else 1)

    def release(self) -> None:
        self.engine = self.runner = self.syncer = None
