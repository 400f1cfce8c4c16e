"""The compute side: forward + backward of one micro-batch at a time, accumulating into the
gradient buffer, with the heterogeneous-worker slowdown and the compute lane of the trace.

Mixed precision is the same for every method: the forward runs under autocast in the compute dtype
(bf16), whatever the parameters' storage (bf16 views of the flat buffer, or the torch DDP baseline's
fp32 parameters), so matrix products run in bf16 and autocast's fp32 ops (softmax, layer norm on
GPU, the loss) in fp32; the backward follows the forward's dtypes."""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import nullcontext
from typing import Any

import torch
from torch import nn

from .trace import COMM, COMPUTE, TraceRecorder


def autocast(device_type: str, dtype: torch.dtype | None):
    """torch.autocast in `dtype` on `device_type` ("cpu" or "cuda"); None or fp32: no autocast."""
    if dtype is None or dtype == torch.float32:
        return nullcontext()
    return torch.autocast(device_type=device_type, dtype=dtype)


class MicroBatchRunner:
    def __init__(
        self,
        model: nn.Module,
        loss_fn: Callable[[nn.Module, Any], torch.Tensor],
        stream,
        tracer: TraceRecorder,
        slowdown: float = 1.0,
        loss_scale: float = 1.0,
        autocast_dtype: torch.dtype | None = None,
        device_type: str = "cpu",
    ):
        self.model = model
        self.autocast_dtype = autocast_dtype  # the forward's compute dtype (None: the parameters')
        self.device_type = device_type
        self.loss_fn = loss_fn
        self.stream = stream  # .batch(k) -> the k-th micro-batch of this rank
        self.tracer = tracer
        self.slowdown = float(slowdown)
        self.loss_scale = loss_scale  # the torch DDP baseline scales by 1/accum before backward
        self.next_index = 0  # index k of this rank's next micro-batch
        self.count = 0  # micro-batches in the accumulator since the last reset
        # the losses' sum since the last reset, on the device in float64 (the same sums as Python
        # floats on CPU): the sync reads it with the counts, so a GPU needs no host sync per
        # micro-batch for it. Replaced, never added to in place: a sync already launched holds the
        # previous tensor.
        self.loss_sum = self._zero_loss()
        # the host waits for each micro-batch to finish only where something needs its duration:
        # the trace's compute spans, the slowdown of a heterogeneous worker (sized by it), and the
        # adaptive rounds' extension (so a GPU's queue never runs ahead of a finished sync); on
        # CPU the work is synchronous anyway
        self.wait_each = device_type != "cuda" or self.slowdown > 1.0
        self.busy_s = 0.0  # total fwd+bwd seconds (without the slowdown sleep)
        self._last_backward_s: float | None = None

    def _zero_loss(self) -> torch.Tensor:
        device = "cuda" if self.device_type == "cuda" else "cpu"
        return torch.zeros((), dtype=torch.float64, device=device)

    def reset(self) -> None:
        self.count = 0
        self.loss_sum = self._zero_loss()

    # the data position (the stream is a pure function of k) and the accumulator's pending counts
    STATE = ("next_index", "count", "loss_sum", "busy_s", "_last_backward_s")

    def state_dict(self) -> dict:
        state = {key: getattr(self, key) for key in self.STATE}
        state["loss_sum"] = float(self.loss_sum)  # a plain number in the checkpoint
        return state

    def load_state_dict(self, state: dict) -> None:
        for key in self.STATE:
            setattr(self, key, state[key])
        self.loss_sum = self._zero_loss() + float(state["loss_sum"])

    def _sleep_slowdown(self, work_s: float) -> None:
        # a heterogeneous worker k times slower: idle (k-1) x its own fwd+bwd time
        if self.slowdown > 1.0:
            t0 = self.tracer.now_us()
            time.sleep((self.slowdown - 1.0) * work_s)
            self.tracer.add("slowdown", COMPUTE, t0, self.tracer.now_us(), cat="idle", factor=self.slowdown)

    def run_one(self, label: str = "fwd+bwd", hooked_backward: bool = False, wait: bool = False) -> None:
        """One micro-batch. `hooked_backward`: the backward also runs communication hooks (PyTorch
        DDP's bucketed all-reduce), so it goes on the communication lane and its duration is not
        used to size the slowdown (the last pure backward's duration is). `wait`: the host waits
        for it to finish (on CPU it always has)."""
        k = self.next_index
        batch = self.stream.batch(k)
        wait = wait or self.wait_each or self.tracer.recording
        t0 = self.tracer.now_us()
        start = time.perf_counter()
        cpu0 = time.thread_time()
        with autocast(self.device_type, self.autocast_dtype):
            loss = self.loss_fn(self.model, batch)
        scaled = loss * self.loss_scale if self.loss_scale != 1.0 else loss
        if hooked_backward:
            forward_s = time.perf_counter() - start
            self.tracer.add(f"{label} (fwd)", COMPUTE, t0, self.tracer.now_us(), k=k)
            work_s = forward_s + (self._last_backward_s if self._last_backward_s is not None else 2.0 * forward_s)
            self._sleep_slowdown(work_s)
            with self.tracer.span("bwd + all_reduce (DDP hooks)", COMM, k=k):
                scaled.backward()
                self._finish(wait)
        else:
            mid = time.perf_counter()
            scaled.backward()
            self._finish(wait)  # so the span measures finished work
            end = time.perf_counter()
            self._last_backward_s = end - mid
            work_s = end - start
            # cpu_s: this thread's CPU seconds for it (the intra-op pool's are not counted: the
            # benchmark runs one thread per worker); wall minus cpu_s is time the cores went to others
            self.tracer.add(label, COMPUTE, t0, self.tracer.now_us(), k=k, cpu_s=time.thread_time() - cpu0)
            self._sleep_slowdown(work_s)
        self.busy_s += work_s
        self.next_index += 1
        self.count += 1
        self.loss_sum = self.loss_sum + loss.detach().double()

    def _finish(self, wait: bool) -> None:
        if wait and self.device_type == "cuda":
            torch.cuda.current_stream().synchronize()
