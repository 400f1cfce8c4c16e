"""The backend that runs a method's schedule, chosen in one place: the suite's Trainer
and acco.Overlapped both build theirs here."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch

from ..engine.schedule import LrAt
from ..engine.sharded_adamw import AdamWSettings
from ..engine.trace import TraceRecorder
from ..engine.virtual_clock import ClockSettings
from ..methods import FLAT, LOCAL, TORCH_DDP, MethodSpec, get
from ..methods.tables import add, lookup
from ..runtime.process_group import deterministic_cuda
from ..tasks import Task
from .backend import Backend
from .backend_flat import FlatBackend
from .backend_local import LocalBackend, local_schedule
from .backend_torch_ddp import TorchDDPBackend
from .same_start import same_start


def build_backend(
    task: Task,
    method: str,
    options: Mapping[str, Any],
    adamw: AdamWSettings,
    *,
    rank: int,
    world_size: int,
    device: torch.device,
    accum: int,
    lr_at: LrAt,
    compute_dtype: torch.dtype,
    grad_dtype: torch.dtype,
    deterministic: bool,
    tracer: TraceRecorder,
    comm_group,
    step_group=None,
    max_accum_factor: int = 64,
    slowdown: float = 1.0,
    may_extend: Callable[[int], bool] | None = None,
    clock: ClockSettings | None = None,
    broadcast_initial: bool = False,
    start_group=None,
) -> Backend:
    """The backend that runs `method`'s schedule (acco.Overlapped's and the suite's Trainer's),
    built by BUILDERS' entry for the backend the method's spec names:
    PyTorch's DDP + ZeRO-1 (ddp with options["impl"] "torch", the suite's default, and
    options["comm_hook"]), the local methods' (diloco, streaming_diloco: options are conf/method's
    sync_every ... outer_momentum; `step_group` a host group for the inner steps' counts) or the
    flat engine's (ddp with impl "flat" and options["overlap_backward"], options["bucket_mb"]; the
    schedule of rounds gets `options`: dpu's, wp's warmup_steps). `options`: the
    method's settings (conf/method/<name>.yaml: a dict, or the run's cfg.method); `adamw`:
    the optimizer's numbers (for diloco/streaming_diloco the inner optimizer's); `clock`: clock.mode=virtual, else None;
    `may_extend`: adaptive rounds near the end of a budget (the trainer's budget_allows_more).

    First, every method: the ranks must hold the same initial parameters (same_start:
    a difference is refused with one line) or, `broadcast_initial`, take rank 0's; on `start_group`
    (the caller's thread's own group: the training group carries only the engine's collectives),
    default `comm_group`."""
    same_start(task.model, start_group if start_group is not None else comm_group, device, broadcast_initial)
    if deterministic and device.type == "cuda":
        # reproducible on CUDA too (make gpu-check compares runs bit for bit). The suite's ranks set
        # it before their first process group (acco.harness.launch.init_process_group); here for
        # acco.Overlapped, whose caller made the group: set it before that to cover NCCL too
        deterministic_cuda()
    parts = BackendParts(
        task,
        method,
        options,
        adamw,
        rank,
        world_size,
        device,
        accum,
        lr_at,
        compute_dtype,
        grad_dtype,
        deterministic,
        tracer,
        comm_group,
        step_group,
        max_accum_factor,
        slowdown,
        may_extend,
        clock,
    )
    backend = get(method).backend_for(options)  # the spec's name for it (acco/methods/)
    return lookup(BUILDERS, backend, "backend")(parts)


@dataclass(frozen=True)
class BackendParts:
    """What build_backend was given, for the builder of the method's backend."""

    task: Task
    method: str
    options: Mapping[str, Any]
    adamw: AdamWSettings
    rank: int
    world_size: int
    device: torch.device
    accum: int
    lr_at: LrAt
    compute_dtype: torch.dtype
    grad_dtype: torch.dtype
    deterministic: bool
    tracer: TraceRecorder
    comm_group: Any
    step_group: Any
    max_accum_factor: int
    slowdown: float
    may_extend: Callable[[int], bool] | None
    clock: ClockSettings | None

    @property
    def spec(self) -> MethodSpec:
        return get(self.method)


def _torch_ddp(p: BackendParts) -> Backend:
    """PyTorch's DDP + ZeRO-1, method.comm_hook averaging each bucket."""
    hook = p.options.get("comm_hook") or "allreduce"  # PyTorch's all-reduce, or reduce_scatter
    bucket_mb = p.options.get("bucket_mb")
    return TorchDDPBackend(
        p.task,
        p.adamw,
        p.accum,
        p.lr_at,
        p.slowdown,
        p.device,
        p.compute_dtype,
        p.tracer,
        p.comm_group,
        hook,
        clock=p.clock,
        rank=p.rank,
        world_size=p.world_size,
        bucket_mb=None if bucket_mb is None else float(bucket_mb),
    )


def _local(p: BackendParts) -> Backend:
    """The local methods' engine, with the schedule method.* describes and the spec's rounds."""
    return LocalBackend(
        p.task,
        local_schedule(p.options),
        p.adamw,
        p.rank,
        p.world_size,
        p.device,
        p.accum,
        p.lr_at,
        p.slowdown,
        p.compute_dtype,
        p.tracer,
        comm_group=p.comm_group,
        step_group=p.step_group,
        clock=p.clock,
        outer_dtype=p.grad_dtype,  # the pseudo-gradient moves as the flat methods' gradients do
        rounds=p.spec.schedule,
    )


def _flat(p: BackendParts) -> Backend:
    """The flat engine, running the spec's schedule of rounds."""
    options = p.options
    return FlatBackend(
        p.task,
        p.method,
        options,  # the method's settings, which its schedule reads
        p.adamw,
        p.rank,
        p.world_size,
        p.device,
        p.accum,
        p.lr_at,
        p.slowdown,
        p.compute_dtype,
        adaptive=not p.deterministic,
        max_accum_factor=p.max_accum_factor,
        tracer=p.tracer,
        comm_group=p.comm_group,
        may_extend=p.may_extend,
        grad_dtype=p.grad_dtype,
        clock=p.clock,
        overlap_backward="overlap_backward" in p.spec.settings and bool(options.get("overlap_backward", False)),
        bucket_mb=None if options.get("bucket_mb") is None else float(options["bucket_mb"]),
    )


# the builder of each backend, by the name a method's spec gives (MethodSpec.backend)
BUILDERS: dict[str, Callable[[BackendParts], Backend]] = {TORCH_DDP: _torch_ddp, LOCAL: _local, FLAT: _flat}


def register_backend(name: str, builder: Callable[[BackendParts], Backend]) -> Callable[[BackendParts], Backend]:
    """Add a backend builder (a method defined outside acco may instead name `module:function`)."""
    return add(BUILDERS, name, builder, "backend")
