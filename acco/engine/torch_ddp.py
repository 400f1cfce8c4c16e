"""The paper's baseline, built from PyTorch's own parts: DistributedDataParallel (no_sync() while
accumulating, so the bucketed all-reduce runs once per step, hooked into the last backward) and
ZeroRedundancyOptimizer(AdamW) (ZeRO-1: each rank steps its partition, then broadcasts it)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from contextlib import nullcontext

import torch
import torch.distributed as dist
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.nn.parallel import DistributedDataParallel

from ..methods.ddp import COMM_HOOKS as DDP_COMM_HOOKS
from . import device_clock
from .collectives import all_gather_into, collective_done, collective_hooks, reduce_scatter_sum
from .compute import MicroBatchRunner
from .flat import no_decay, trainable_parameters
from .schedule import LrAt
from .sync import SyncKind, SyncResult
from .trace import COMM, COMPUTE, TraceRecorder


def adamw_param_groups(model: torch.nn.Module, weight_decay: float, decay_bias_and_norm: bool):
    decay: list[torch.nn.Parameter] = []
    skip: list[torch.nn.Parameter] = []
    for name, p in trainable_parameters(model):
        (decay if decay_bias_and_norm or not no_decay(name, p) else skip).append(p)
    groups = [{"params": decay, "weight_decay": weight_decay}]
    if skip:
        groups.append({"params": skip, "weight_decay": 0.0})
    return groups


# allreduce: PyTorch's own hook; reduce_scatter / reduce_scatter_bf16: reduce_scatter_hook with the
# bucket sent in fp32 / in bf16 as ACCO's buffer is (PyTorch's bf16_compress_hook needs NCCL);
# the names are ddp's setting method.comm_hook
COMM_HOOKS = DDP_COMM_HOOKS


def reduce_scatter_hook(world: int, wire_dtype: torch.dtype | None = None):
    """A DDP communication hook that averages a gradient bucket with a reduce-scatter and an
    all-gather (reduce_scatter_sum: a ring from point-to-point sends on gloo, NCCL's own
    reduce-scatter on GPU), each rank sending 2(N-1)/N of the bucket: the minimal bytes, as NCCL's
    ring all-reduce does. gloo's all-reduce, PyTorch's default hook on CPU, moved ~1.9x longer on
    a shaped link for the same bucket, which is gloo's algorithm, not DDP's. Like PyTorch's hook it
    divides by the world size first, so on 2 ranks the mean is bit-identical to it. `wire_dtype` (bf16):
    the bucket is cast to it, then divided, sent and summed in it, and cast back, as PyTorch's
    bf16_compress_hook (NCCL only) does for its all-reduce.

    The collectives run synchronously inside the hook and its future is complete on return: the
    bucket's communication does not overlap the rest of the backward pass (with one bucket, as for
    the models on CPU, there is nothing left to overlap). A bucket whose length does not divide by
    the world size is padded with zeros in a per-bucket work buffer kept across steps."""
    work: dict[int, tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = {}

    # a plain function without a return annotation: DDP accepts only an absent one or the
    # evaluated torch.futures.Future[torch.Tensor] (this module's annotations are strings), and
    # reads the hook's __name__
    def reduce_scatter_all_gather(group, bucket):
        buf = bucket.buffer()
        n = buf.numel()
        if bucket.index() not in work or work[bucket.index()][0].numel() < n:
            shard = -(-n // world)
            dtype = wire_dtype or buf.dtype
            full, shard_sum, scratch = (
                torch.zeros(size, dtype=dtype, device=buf.device) for size in (shard * world, shard, shard)
            )
            work[bucket.index()] = (full, shard_sum, scratch)
        full, shard_sum, scratch = work[bucket.index()]
        full[:n].copy_(buf).div_(world)
        full[n:].zero_()  # reduce_scatter_sum clobbers the whole work buffer
        reduce_scatter_sum(full, shard_sum, group, scratch)
        all_gather_into(full, shard_sum, group)
        buf.copy_(full[:n])
        fut: torch.futures.Future = torch.futures.Future(devices=[buf.device] if buf.is_cuda else None)
        fut.set_result(buf)
        return fut

    return reduce_scatter_all_gather


class TorchDDPZero1:
    def __init__(
        self,
        model,
        loss_fn,
        stream,
        tracer: TraceRecorder,
        accum: int,
        lr_at: LrAt,
        betas,
        eps: float,
        weight_decay: float,
        decay_bias_and_norm: bool,
        clip_norm: float = 0.0,
        slowdown: float = 1.0,
        device=None,
        compute_dtype: torch.dtype | None = None,
        group=None,
        comm_hook: str = "allreduce",
        bucket_mb: float | None = None,
    ):
        """`lr_at(step, micro_batches)`: acco.engine.schedule. `compute_dtype` bf16: mixed
        precision the PyTorch way, fp32 parameters and gradients, forward under bf16 autocast.
        `group`: the process group of the training collectives (its timeout is how long a rank
        waits for a crashed or hung peer); None = the default group. `comm_hook`: how DDP averages
        each gradient bucket, "allreduce" (PyTorch's own) or "reduce_scatter" (reduce-scatter +
        all-gather, the minimal bytes: see reduce_scatter_hook). `bucket_mb`: DDP's bucket_cap_mb
        (None: its defaults, a 1 MiB first bucket then 25 MiB, from its second step on).

        Traced on CPU (the tracer enabled), every bucket's reduction is a span "all_reduce (bucket i)"
        (cat "ddp_bucket": from DDP's call of the hook to its future's completion) and the last
        backward a span "bwd (DDP, to the last gradient)" (cat "ddp_backward": until the last
        parameter's gradient is final), so how much of the reduction the backward hides is read off
        the trace (backward_overlap); both categories stay out of the compute and
        communication lanes' sums, whose "bwd + all_reduce (DDP hooks)" span covers the whole
        hooked backward, waiting for its reductions included."""
        if comm_hook not in COMM_HOOKS:
            raise ValueError(f"comm_hook must be one of {', '.join(COMM_HOOKS)}, got {comm_hook!r}")
        self.group = group
        self.device = torch.device(device) if device is not None else torch.device("cpu")
        model.to(self.device)  # a model built on the host: PyTorch's DDP keeps it whole on the device
        device_ids = [self.device.index] if self.device.type == "cuda" else None
        self.ddp = DistributedDataParallel(
            model, device_ids=device_ids, gradient_as_bucket_view=True, process_group=group, bucket_cap_mb=bucket_mb
        )
        self.opt = ZeroRedundancyOptimizer(
            adamw_param_groups(model, weight_decay, decay_bias_and_norm),
            optimizer_class=torch.optim.AdamW,
            process_group=group,
            # each rank's partition in one flat bucket: one broadcast per rank after the step instead
            # of one per parameter tensor (dozens of small collectives, each paying a slow link's latency)
            parameters_as_bucket_view=True,
            lr=lr_at(0, 0),
            betas=tuple(betas),
            eps=eps,
        )
        self.params = [p for _, p in trainable_parameters(model)]
        self.runner = MicroBatchRunner(
            self.ddp,
            loss_fn,
            stream,
            tracer,
            slowdown,
            loss_scale=1.0 / accum,  # DDP averages over ranks
            autocast_dtype=compute_dtype,
            device_type=self.device.type,
        )
        self.tracer = tracer
        self.accum = accum
        self.lr_at = lr_at
        self.clip_norm = float(clip_norm or 0.0)
        self.step_count = 0
        self.micro_batches = 0  # global micro-batches of the committed steps (a budget's schedule)
        # per-rank votes carried in the loss all-reduce, as on the flat path (Agreement)
        self.votes: Callable[[], Sequence[float]] = tuple
        self.agreed_votes: list[float] = []
        # one comm hook (DDP takes one): the bucket's reduction, reported to the collective hooks
        # (register_collective_hook) and timed for the trace when either is wanted; none at all
        # (DDP's own C++ all-reduce) otherwise
        hook = None
        if comm_hook.startswith("reduce_scatter"):
            wire = torch.bfloat16 if comm_hook.endswith("_bf16") else None
            hook = reduce_scatter_hook(dist.get_world_size(self.group), wire)
        reporting = bool(collective_hooks())
        if reporting and hook is None:
            hook = self._reported_allreduce()
        self.last_grad_us = 0.0  # when the last parameter's gradient was final (host time)
        if tracer.enabled and self.device.type == "cpu":
            from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

            hook = self._timed(hook or default_hooks.allreduce_hook)
            for p in self.params:
                p.register_post_accumulate_grad_hook(self._gradient_final)
        if hook is not None:
            # state = the process group DDP was built on (its step timeout), as for DDP's own hook
            self.ddp.register_comm_hook(self.group, hook)
        if reporting:
            self._report_step()

    def _gradient_final(self, _p) -> None:
        self.last_grad_us = self.tracer.now_us()

    def _timed(self, inner):
        """`inner` with each bucket's reduction recorded as a span, from the hook's call (DDP calls it
        once the bucket's gradients are final) to its future's completion."""
        tracer = self.tracer

        def timed(state, bucket):
            index, entries = bucket.index(), bucket.buffer().numel()
            start = tracer.now_us()
            fut = inner(state, bucket)

            def done(f):
                tracer.add(
                    f"all_reduce (bucket {index})", COMM, start, tracer.now_us(), cat="ddp_bucket", entries=entries
                )
                return f.value()

            return fut.then(done)

        return timed

    def _reported_allreduce(self):
        """PyTorch's all-reduce hook, each bucket reported to the collective hooks."""
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

        world = dist.get_world_size(self.group)

        def reported_allreduce(state, bucket):
            started = time.perf_counter()
            nbytes = bucket.buffer().numel() * bucket.buffer().element_size()
            fut = default_hooks.allreduce_hook(state, bucket)

            def done(f):
                collective_done("all_reduce", nbytes, world, started)
                return f.value()

            return fut.then(done)

        return reported_allreduce

    def _report_step(self) -> None:
        """PyTorch's collectives through the collective hooks (register_collective_hook), like
        the flat path's: each bucket's all-reduce is reported by the comm hook (the reduce-scatter
        hook's collectives report themselves), and the optimizer step (whose partition broadcasts
        move the bytes of an all-gather of the parameters) is reported as an all-gather. Only when
        hooks are registered: DDP's own all-reduce is left alone otherwise."""
        world = dist.get_world_size(self.group)
        param_bytes = sum(p.numel() * p.element_size() for p in self.params)
        step = self.opt.step

        def reported_step(*args, **kwargs):
            started = time.perf_counter()
            out = step(*args, **kwargs)
            collective_done("all_gather", param_bytes, world, started)
            return out

        self.opt.step = reported_step  # type: ignore[method-assign]  # wrapped: reports its all-gather

    def step(self) -> SyncResult:
        self.opt.zero_grad(set_to_none=False)
        self.runner.reset()
        for i in range(self.accum):
            last = i == self.accum - 1
            with nullcontext() if last else self.ddp.no_sync():
                before = self.tracer.now_us()
                self.runner.run_one(hooked_backward=last)
            if last and self.last_grad_us > before:  # traced: the backward, up to its last gradient
                bwd0 = self.runner.forward_end_us
                self.tracer.add("bwd (DDP, to the last gradient)", COMPUTE, bwd0, self.last_grad_us, cat="ddp_backward")
        lr = self.lr_at(self.step_count, self.micro_batches)
        with self.tracer.span("sync (ZeroRedundancyOptimizer)", COMM):
            grad_norm = float("nan")
            if self.clip_norm > 0:
                with self.tracer.span("clip", COMM):
                    grad_norm = float(torch.nn.utils.clip_grad_norm_(self.params, self.clip_norm))
            for group in self.opt.param_groups:
                group["lr"] = lr
            with self.tracer.span("adamw (zero-1) + broadcast", COMM):
                self.opt.step()
            votes = [float(v) for v in self.votes()]
            # built on the device by scalar fills: no copy from (and so no wait for) the host
            stats = torch.zeros(2 + len(votes), dtype=torch.float64, device=self.device)
            stats[0].fill_(float(self.runner.count))  # fill_: a kernel argument, not a copy from the host
            stats[1] = self.runner.loss_sum
            for i, v in enumerate(votes):
                stats[2 + i].fill_(v)
            with self.tracer.span("all_reduce loss", COMM):
                dist.all_reduce(stats, group=self.group)
        self.step_count += 1
        if stats.is_cuda:  # the step's collectives done, within dist.step_timeout_s (device_clock.wait_for)
            end = torch.cuda.Event()
            end.record()
            device_clock.wait_for(end, "a step's all-reduce and ZeRO's broadcasts")
        n_tot, loss_tot, *vote_sums = stats.tolist()
        self.agreed_votes = [a + b for a, b in zip(self.agreed_votes, vote_sums)] or vote_sums
        self.micro_batches += int(round(n_tot))
        return SyncResult(SyncKind.COMMIT, int(round(n_tot)), loss_tot / n_tot, lr, grad_norm, self.step_count)

    def grads_finite(self) -> bool:
        """Whether the averaged gradient of the last step is finite (the same answer on every rank:
        DDP all-reduced it; it stays in .grad until the next step zeroes it)."""
        grads = [p.grad for p in self.params if p.grad is not None]
        # one fused check and one host sync, not one per parameter
        return not grads or bool(torch.stack([torch.isfinite(g).all() for g in grads]).all())

    # -- checkpoints: the model is saved once (rank 0), each rank its own ZeRO partition's state --
    def state_dict(self) -> dict:
        return {
            "optim": self.opt.optim.state_dict(),
            "step_count": self.step_count,
            "micro_batches": self.micro_batches,
            "runner": self.runner.state_dict(),
        }

    def load_state_dict(self, state: dict, model_state: dict) -> None:
        self.ddp.module.load_state_dict(model_state)
        self.opt.optim.load_state_dict(state["optim"])
        self.step_count = int(state["step_count"])
        self.micro_batches = int(state.get("micro_batches", 0))
        self.runner.load_state_dict(state["runner"])

    def optimizer_state_bytes(self) -> int:
        total = 0
        for state in self.opt.optim.state.values():
            for v in state.values():
                if torch.is_tensor(v):
                    total += v.numel() * v.element_size()
        return total

    def committed_vector(self) -> torch.Tensor:
        return torch.cat([p.detach().reshape(-1).float() for p in self.params])
