"""The ddp baseline as a backend: PyTorch's DistributedDataParallel + ZeroRedundancyOptimizer
(TorchDDPZero1), one committed step per accumulation of `accum` micro-batches."""

from __future__ import annotations

from contextlib import contextmanager

import torch

from ..analytic.overlap import Buckets, torch_ddp_buckets
from ..engine.rounds import StepCallback, StopRule
from ..engine.sharded_adamw import AdamWSettings
from ..engine.torch_ddp import TorchDDPZero1
from ..engine.trace import TraceRecorder
from ..engine.virtual_clock import ClockSettings, VirtualClock, torch_ddp_costs
from ..tasks import Task
from .backend import Backend
from .precision import dtype_name
from .signals import CHECKPOINT_SIGNALS


class TorchDDPBackend(Backend):
    # PyTorch's mixed precision: fp32 parameters and gradients, the forward under autocast
    parameters_in_compute_dtype = False
    carries_gradients = False

    def __init__(
        self,
        task: Task,
        adamw: AdamWSettings,
        accum: int,
        lr_at,
        slowdown: float,
        device: torch.device,
        compute_dtype: torch.dtype,
        tracer: TraceRecorder,
        group,
        comm_hook: str = "allreduce",
        clock: ClockSettings | None = None,
        rank: int = 0,
        world_size: int = 1,
        bucket_mb: float | None = None,
    ):
        """`clock` (clock.mode=virtual, with this `rank` of `world_size`): every step on the virtual
        clock (the overlap model's rule): accum micro-batches on each rank, each bucket's
        all-reduce from when every rank has it final in the last backward and the link is free, then
        ZeRO's broadcast, which nothing hides (`slowdown` should then be 1). DDP's first step reduces
        one bucket of everything, the later ones its rebuilt buckets; the reduce-scatter hooks run
        their collectives inside the hook, which stalls the backward: no overlap (one bucket of
        their sum). `bucket_mb`: DDP's bucket_cap_mb."""
        self.model = task.model
        self.accum = accum
        self.compute_dtype = compute_dtype
        self.comm_hook = comm_hook
        self.torch_ddp: TorchDDPZero1 | None = TorchDDPZero1(
            task.model,
            task.loss_fn,
            task.train_stream,
            tracer,
            accum,
            lr_at,
            adamw.betas,
            adamw.eps,
            adamw.weight_decay,
            adamw.decay_bias_and_norm,
            adamw.clip_norm,
            slowdown,
            device,
            compute_dtype=compute_dtype,
            group=group,
            comm_hook=comm_hook,
            bucket_mb=bucket_mb,
        )
        self.runner = self.torch_ddp.runner
        self.clock: VirtualClock | None = None
        self.steps_here = 0  # steps this process's DDP has taken (its first reduces one bucket)
        self.steps_model: list[tuple[Buckets, list[float], float]] = []
        self.share = clock.backward_share if clock is not None else 0.0
        if clock is not None and clock.virtual:
            numels = [p.numel() for p in self.torch_ddp.params]
            params = sum(numels)
            wire = 2 if comm_hook.endswith("_bf16") else 4  # DDP's fp32 buckets, or the bf16 hook's wire
            agreement = 8 * (2 + len(CHECKPOINT_SIGNALS))  # [count, loss sum, votes] in float64
            rebuilt = torch_ddp_buckets(numels, self.torch_ddp.params[0].element_size(), bucket_mb)
            # (buckets, their reductions, the tail): the first step's, then every later one's
            for buckets in (Buckets.single(params), rebuilt):
                reduce_s, tail_s = torch_ddp_costs(clock, world_size, buckets, params, wire, agreement)
                if comm_hook != "allreduce":  # collectives inside the hook: the backward waits for each
                    buckets, reduce_s = Buckets.single(params), [sum(reduce_s)]
                self.steps_model.append((buckets, reduce_s, tail_s))
            _b, reduce_s, tail_s = self.steps_model[-1]
            sync = {"commit": sum(reduce_s) + tail_s}  # the whole sync's seconds, hidden or not
            self.clock = VirtualClock(clock.micro_batch_costs(world_size), sync, rank)

    @property
    def live_ddp(self) -> TorchDDPZero1:
        assert self.torch_ddp is not None, "the backend was used after release()"
        return self.torch_ddp

    def run(self, until: StopRule, on_step: StepCallback, start: int) -> None:
        t = start
        while not until.done(t):
            result = self.live_ddp.step()
            if self.clock is not None:  # the step on the virtual clock (the overlap model's rule)
                # DDP's first step in this process (a resumed run's too) reduces one bucket
                buckets, reduce_s, tail_s = self.steps_model[min(self.steps_here, 1)]
                self.clock.backward_overlapped_step(self.accum, buckets, reduce_s, tail_s, self.share)
            self.steps_here += 1
            on_step(t, result)
            t += 1

    def carry_votes(self, votes) -> None:
        self.live_ddp.votes = votes

    def take_agreed(self) -> tuple[bool, tuple[float, ...]]:
        votes, self.live_ddp.agreed_votes = tuple(self.live_ddp.agreed_votes), []
        # DDP all-reduced the gradient, so every rank gives the same answer
        return not self.live_ddp.grads_finite(), votes

    def state_dicts(self) -> tuple[dict, dict]:
        # the live tensors (no copy): the checkpoint writes them in pieces and loads into them in place
        shared = {"model": self.model.state_dict()}
        own = {"torch_ddp": self.live_ddp.state_dict()}
        if self.clock is not None:
            own["clock"] = self.clock.state_dict()
        return shared, own

    def load_state_dicts(self, shared: dict, own: dict) -> None:
        self.live_ddp.load_state_dict(own["torch_ddp"], shared["model"])
        if self.clock is not None:
            self.clock.load_state_dict(own["clock"])

    def committed_vector(self) -> torch.Tensor:
        return self.live_ddp.committed_vector()

    def load_committed_into_model(self, vector: torch.Tensor | None = None) -> None:
        return  # the model is the one DDP trains: it holds θ_t

    @contextmanager
    def committed_parameters(self):
        yield  # the model holds θ_t

    def memory_report(self) -> dict:
        params = sum(p.numel() * p.element_size() for p in self.live_ddp.params)
        return {
            "optimizer_state_bytes": self.live_ddp.optimizer_state_bytes(),
            "param_bytes": params,
            "grad_bytes": params,
            "comm_buffer_bytes": 0,
        }

    def precision_report(self) -> dict:
        """What PyTorch really uses: fp32 parameters hold their gradients' sum (a micro-batch's
        gradient reaches them through autocast's cast, so its matrix products' gradients are bf16
        values), DDP's buckets reduce in the parameters' dtype unless the hook sends bf16, ZeRO's
        partitions are broadcast in fp32, and the parameters are the optimizer's master."""
        params = dtype_name(self.live_ddp.params[0].dtype)
        return {
            "compute": dtype_name(self.compute_dtype),
            "parameters": params,
            "micro_batch_grad": params,
            "grad_accum": params,
            "reduce": "bf16" if self.comm_hook.endswith("_bf16") else params,
            "all_gather": params,
            "master": params,
            "moments": params,
        }

    def round_micro_batches(self) -> list[int]:
        return [self.accum] * self.live_ddp.step_count

    def release(self) -> None:
        self.torch_ddp = self.runner = None
