"""DDP + ZeRO-1 on the flat engine with its gradient reduction overlapped with the last
micro-batch's backward (`method=ddp method.impl=flat method.overlap_backward=true`): the baseline
as PyTorch's DDP, DeepSpeed ZeRO's `overlap_comm` and FSDP run it, on the same buffers, sharded
AdamW and communication thread as every other flat method.

    [mb]...[mb][fwd|bwd ............]                         compute
                   [rs b0][rs b1]...[rs bK-1][counts|adamw|all-gather]   communication

The flat vector is cut into buckets (BucketLayout: PyTorch DDP's sizes, in
reverse parameter order); rank r owns the r-th chunk of every bucket, so a bucket's reduce-scatter
is balanced, moves the minimal (N−1)/N of its bytes (reduce_scatter_sum's ring on gloo,
NCCL's own on GPU) and needs nothing but that bucket. During the last micro-batch's backward a
post-accumulate-grad hook on every parameter counts down each bucket's parameters; once a bucket
and every bucket before it in launch order are final (a fixed order on every rank, as DDP's
reducer keeps), its gradients are copied into the communication buffer and its reduce-scatter is
submitted to the communication thread, which runs it while the backward goes on. After the
backward: the counts' all-reduce, the division, clipping, the AdamW step on the shard and one
all-gather of the shards, put back in model order bucket by bucket (one more sync job, which
nothing can hide: ZeRO's parameters are needed by the next forward).

The update is the blocking flat ddp's: every entry is summed over the ranks in the same ring order
(a bucket's chunk r is summed as the whole vector's shard r is, starting from rank r+1), so the
gradients are the same bits; what may differ is rounding where an entry sits elsewhere in the
shard (AdamW's vectorised kernels and their scalar tails, the clipping norm's float64 sum): 10
steps of the test model gave the same bits on 2 ranks and 2.7e-7 apart on 3. Against the
single-process reference it is within the flat ddp's own reduction-order rounding
(tests/integration/test_methods_vs_reference.py).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import torch

from .collectives import all_gather_into, reduce_scatter_sum
from .device_clock import Mark
from .flat import BucketLayout, FlatModel
from .rounds import RoundEngine
from .sync import CHUNK, Syncer, SyncKind, SyncResult
from .trace import COMM, COMPUTE, machine_cpu_seconds, side_cpu_seconds


class BucketedSyncer(Syncer):
    """A Syncer over a BucketLayout: `reduce_bucket(k)` reduce-scatters bucket k of the buffer into
    this rank's chunk of the shard, `finish` is the rest of the sync; the buffer is in model order
    before and after."""

    def __init__(self, *args, buckets: BucketLayout, gather_space: torch.Tensor, **kwargs):
        """`gather_space`: a vector of the buffer's size and dtype that is free while a sync
        gathers (ddp's gradient accumulator: its buckets are in the buffer by then, and the next
        step empties it)."""
        super().__init__(*args, **kwargs)
        self.buckets = buckets
        self.gather_space = gather_space
        self.rank = self.lo // self.grad_shard.numel()
        self._begin: Mark | None = None  # the sync's first mark (its first bucket's start) and CPU clocks then
        self._cpu0: tuple[float, float | None] | None = None

    def _chunk(self, k: int) -> tuple[int, int]:
        off, c = self.buckets.offsets[k], self.buckets.chunks[k]
        return off, off + c

    def reduce_bucket(self, k: int) -> None:
        """grad_shard's chunk of bucket k <- Σ over ranks of the buffer's bucket k (clobbered)."""
        if self._begin is None:  # the sync's span starts with its first bucket
            self._begin = self.tracer.mark()
            if self.tracer.recording:
                self._cpu0 = (side_cpu_seconds(), machine_cpu_seconds())
        lo, hi = self.buckets.bucket(k)
        a, b = self._chunk(k)
        scratch = None if self.scratch is None else self.scratch[: b - a]  # NCCL needs none
        with self.tracer.span(f"reduce_scatter (bucket {k})", COMM, bucket=k, entries=hi - lo):
            reduce_scatter_sum(self.buffer[lo:hi], self.grad_shard[a:b], self.group, scratch)

    def finish(self, kind: SyncKind, count: int, loss_sum: torch.Tensor | float) -> SyncResult:
        """The sync after every bucket's reduce-scatter; its span runs from the first bucket's start."""
        begin = self._begin if self._begin is not None else self.tracer.mark()
        cpu0 = self._cpu0
        self._begin, self._cpu0 = None, None
        result = self.step_and_gather(kind, count, loss_sum)
        end = self.tracer.mark()
        args: dict = {"buckets": len(self.buckets)}
        if cpu0 is not None:
            args["side_cpu_s"] = side_cpu_seconds() - cpu0[0]
            machine1 = machine_cpu_seconds()
            if cpu0[1] is not None and machine1 is not None:
                args["machine_cpu_s"] = machine1 - cpu0[1]
        self.tracer.add_marked(f"sync ({kind.value})", COMM, begin, end, **args)
        return result

    def gather(self, new: torch.Tensor) -> None:
        """One all-gather of the shards (rank after rank, each its chunks bucket after bucket) into
        the gather space, then each bucket's chunks copied into `gathered` in model order: the
        bytes and ring steps of the blocking sync's all-gather, not one collective per bucket, in
        the parameters' dtype (a view of the gather space in it, beside fp32 gradients)."""
        space = self.gather_space
        if space.dtype != self.gathered.dtype:
            space = space.view(self.gathered.dtype)[: space.numel()]
        own = space[self.lo : self.hi]
        own.copy_(new)
        with self.tracer.span("all_gather", COMM):
            all_gather_into(space, own, self.group)
        shards = space.view(self.world_size, -1)
        for k in range(len(self.buckets)):
            lo, hi = self.buckets.bucket(k)
            a, b = self._chunk(k)
            self.gathered[lo:hi].view(self.world_size, b - a).copy_(shards[:, a:b])

    def _gather_bucket(self, out: torch.Tensor, shard: torch.Tensor, k: int) -> None:
        lo, hi = self.buckets.bucket(k)
        a, b = self._chunk(k)
        c = b - a
        own = out[lo + self.rank * c : lo + (self.rank + 1) * c]
        own.copy_(shard[a:b])
        all_gather_into(out[lo:hi], own, self.group)

    def gather_committed(self, out: torch.Tensor) -> torch.Tensor:
        for k in range(len(self.buckets)):
            self._gather_bucket(out, self.opt.master, k)
        return out

    def gather_committed_to_host(self, numel: int, chunk: int = CHUNK) -> torch.Tensor:
        """As Syncer's (the shards gathered `chunk` entries at a time), then each bucket's chunks put
        back in model order, in host memory."""
        shards = super().gather_committed_to_host(self.grad_shard.numel() * self.world_size, chunk)
        shards = shards.view(self.world_size, -1)
        out = torch.empty(shards.numel(), dtype=shards.dtype)
        for k in range(len(self.buckets)):
            lo, hi = self.buckets.bucket(k)
            a, b = self._chunk(k)
            out[lo:hi].view(self.world_size, b - a).copy_(shards[:, a:b])
        return out[:numel]


class GradBucketHooks:
    """Post-accumulate-grad hooks on the flat model's parameters that, while armed (the last
    micro-batch's backward), hand each bucket to `launch(k)` once it and every bucket before it in
    launch order are final. Registered after FlatModel's own (an fp32 accumulator's), so a
    parameter's gradient is in the accumulator when its hook counts it."""

    def __init__(self, flat: FlatModel):
        self.layout = flat.buckets
        self.order = self.layout.launch_order()
        # for each parameter, the buckets it has entries in
        self.param_buckets: list[list[int]] = []
        for a, b in flat.slices:
            self.param_buckets.append(
                [k for k in range(len(self.layout)) if a < self.layout.bounds[k + 1] and b > self.layout.bounds[k]]
            )
        self.waiting_init = [0] * len(self.layout)
        for ks in self.param_buckets:
            for k in ks:
                self.waiting_init[k] += 1
        self._lock = threading.Lock()  # autograd may run hooks of one backward on several threads
        self._launch: Callable[[int], None] | None = None
        self._waiting: list[int] = []
        self._next = 0  # index into self.order of the next bucket to launch
        for i, p in enumerate(flat.parameters):
            p.register_post_accumulate_grad_hook(self._hook(i))

    def _hook(self, i: int):
        def hook(_p: torch.Tensor) -> None:
            if self._launch is None:
                return
            with self._lock:
                for k in self.param_buckets[i]:
                    self._waiting[k] -= 1
                self._launch_ready()

        return hook

    def _launch_ready(self) -> None:
        assert self._launch is not None
        while self._next < len(self.order) and self._waiting[self.order[self._next]] <= 0:
            k = self.order[self._next]
            self._next += 1
            self._launch(k)

    def arm(self, launch: Callable[[int], None]) -> None:
        self._waiting = list(self.waiting_init)
        self._next = 0
        self._launch = launch

    def flush(self) -> None:
        """After the backward: launch the buckets not launched yet, in order (a parameter the
        backward gave no gradient keeps its bucket waiting), and disarm."""
        with self._lock:
            if self._launch is not None:
                self._waiting = [0] * len(self._waiting)
                self._launch_ready()
            self._launch = None

    def disarm(self) -> None:
        self._launch = None


class _Jobs:
    """The step's bucket jobs and its closing job, waited for in order (a failed bucket raises)."""

    def __init__(self, buckets: list, last):
        self.buckets, self.last = buckets, last

    def wait(self):
        for job in self.buckets:
            job.wait()
        return self.last.wait()


class BackwardOverlapEngine(RoundEngine):
    """The flat engine's rounds with ddp's sequential round replaced by the backward-overlapped step
    (run_sequential runs it as it runs the blocking one). On the virtual clock the step's time is
    the overlap model's rule (VirtualClock.backward_overlapped_step)."""

    def __init__(self, flat: FlatModel, syncer: BucketedSyncer, *args, **kwargs):
        super().__init__(flat, syncer, *args, **kwargs)
        self.bucketed = syncer
        self.hooks = GradBucketHooks(self.flat)
        self.clock_step: Callable[[int], int] | None = None  # the virtual clock's step: accum -> count

    def _launch_bucket(self, jobs: list, k: int) -> None:
        lo, hi = self.bucketed.buckets.bucket(k)
        self.buffer[lo:hi].copy_(self.flat.grads[lo:hi])  # on a GPU: queued before submit's event
        jobs.append(self.comm.submit(lambda: self.bucketed.reduce_bucket(k)))

    def sequential_round(self) -> SyncResult:
        self._empty_accumulator()
        for _ in range(self.accum - 1):
            self.runner.run_one("fwd+bwd")
        jobs: list = []
        self.hooks.arm(lambda k: self._launch_bucket(jobs, k))
        try:
            self.runner.run_one("fwd+bwd")
        except BaseException:
            self.hooks.disarm()
            raise
        self.hooks.flush()
        self.rounds_micro_batches.append(self.accum)
        count, loss_sum = self.runner.count, self.runner.loss_sum
        last = self.comm.submit(lambda: self.bucketed.finish(SyncKind.COMMIT, count, loss_sum))
        modelled = self.clock_step(self.accum) if self.clock_step is not None else None
        with self.tracer.span("wait for sync", COMPUTE, cat="idle"):
            result = _Jobs(jobs, last).wait()
        if modelled is not None and modelled != result.micro_batches:
            raise RuntimeError(
                f"the virtual clock modelled {modelled} micro-batches in this sync, the ranks sent "
                f"{result.micro_batches}: its counts are out of step with the ranks'"
            )
        self.flat.params.copy_(self.bucketed.gathered)
        return result
