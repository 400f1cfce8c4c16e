"""The compute side: forward + backward of one micro-batch at a time, accumulating into the
gradient buffer, with the heterogeneous-worker slowdown and the compute lane of the trace.

Mixed precision is the same for every method: the forward runs under autocast in the compute dtype
(bf16), whatever the parameters' storage (bf16 views of the flat buffer, or the torch DDP baseline's
fp32 parameters), so matrix products run in bf16 and autocast's fp32 ops (softmax, layer norm on
GPU, the loss) in fp32; the backward follows the forward's dtypes."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from contextlib import nullcontext
from typing import Any

import torch
from torch import nn

from . import device_clock
from .device_clock import Mark
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
        on_device: bool | None = None,
    ):
        """`on_device`: time the work with CUDA events (default: on a "cuda" device)."""
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
        # on a GPU each micro-batch is timed by events on the compute stream (device_clock), read
        # once done, never waited for just to be timed: the host waits only where a decision
        # needs finished work, the heterogeneous worker's slowdown (sized by the micro-batch it
        # follows) and the adaptive rounds' extension (wait_previous). On CPU the work is done
        # when the host moves on.
        self.on_device = device_type == "cuda" if on_device is None else on_device
        if self.on_device:
            tracer.time_on_device()
        self._busy_s = 0.0  # total fwd+bwd seconds (without the slowdown sleep), read so far
        self._unread: deque[tuple[Mark, Mark, Mark, bool]] = deque()  # (begin, mid, end, hooked)
        self._ends: deque[Mark] = deque(maxlen=2)  # the last two micro-batches' end marks
        self._last_backward_s: float | None = None
        self.forward_end_us = 0.0  # the last hooked micro-batch's forward end (host time, µs)

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

    @property
    def busy_s(self) -> float:
        """Total fwd+bwd seconds so far (on a GPU: device time, waiting for the last one's end)."""
        self._read_times(block=True)
        return self._busy_s

    @busy_s.setter
    def busy_s(self, value: float) -> None:
        self._unread.clear()
        self._busy_s = value

    def _read_times(self, block: bool) -> float:
        """Add the device times of the finished micro-batches (`block`: of all) to busy_s, in
        order; returns the last one's fwd+bwd seconds (0.0 if none was read)."""
        work_s = 0.0
        while self._unread:
            begin, mid, end, hooked = self._unread[0]
            if block:
                device_clock.wait(end)
            elif not device_clock.done(end):
                break
            self._unread.popleft()
            if hooked:  # mid: the forward's end; the hooked backward is communication, estimated
                forward_s = device_clock.elapsed_us(begin, mid) / 1e6
                backward_s = self._last_backward_s if self._last_backward_s is not None else 2.0 * forward_s
                work_s = forward_s + backward_s
            else:
                work_s = device_clock.elapsed_us(begin, end) / 1e6
                self._last_backward_s = device_clock.elapsed_us(mid, end) / 1e6
            self._busy_s += work_s
        return work_s

    def wait_previous(self) -> None:
        """Block until the micro-batch before the last one queued has finished: a decision taken
        now sees finished work while one micro-batch stays queued (the adaptive extension)."""
        if self.on_device and len(self._ends) == 2:
            device_clock.wait(self._ends[0])

    def _mark(self) -> Mark:
        return device_clock.mark(self.on_device)

    def run_one(self, label: str = "fwd+bwd", hooked_backward: bool = False) -> None:
        """One micro-batch. `hooked_backward`: the backward also runs communication hooks (PyTorch
        DDP's bucketed all-reduce), so it goes on the communication lane and its duration is not
        used to size the slowdown (the last pure backward's duration is)."""
        k = self.next_index
        batch = self.stream.batch(k)
        if self.on_device:
            self._read_times(block=False)  # the finished ones: the queue of unread marks stays short
        sized = self.slowdown > 1.0  # its sleep is sized by this micro-batch: the host waits for it
        start = time.perf_counter()
        cpu0 = time.thread_time()
        begin = self._mark()
        with autocast(self.device_type, self.autocast_dtype):
            loss = self.loss_fn(self.model, batch)
        scaled = loss * self.loss_scale if self.loss_scale != 1.0 else loss
        if hooked_backward:
            forward_end = self._mark()
            self.forward_end_us = forward_end.host_us  # where the hooked backward starts (host time)
            forward_s = time.perf_counter() - start
            self.tracer.add_marked(f"{label} (fwd)", COMPUTE, begin, forward_end, k=k)
            if self.on_device:
                self._unread.append((begin, forward_end, forward_end, True))
                work_s = self._read_times(block=True) if sized else 0.0  # waits for this forward
            else:
                work_s = forward_s + (self._last_backward_s if self._last_backward_s is not None else 2.0 * forward_s)
                self._busy_s += work_s
            self._sleep_slowdown(work_s)
            with self.tracer.span("bwd + all_reduce (DDP hooks)", COMM, k=k):
                scaled.backward()
            self._ends.append(self._mark())
        else:
            mid_mark = self._mark() if self.on_device else None
            mid = time.perf_counter()
            scaled.backward()
            end_mark = self._mark()
            end = time.perf_counter()
            # cpu_s: this thread's CPU seconds for it (the intra-op pool's are not counted: the
            # benchmark runs one thread per worker); wall minus cpu_s is time the cores went to
            # others. On a GPU: the host's cost of queueing it.
            # fwd_s (CPU: host seconds to the backward's start): the backward's share of a micro-batch,
            # which the virtual clock's DDP overlap reads (make calibrate-clock: clock.backward_share)
            cpu_s = time.thread_time() - cpu0
            fwd_s = None if self.on_device else mid - start  # (on a GPU: enqueue times, not work)
            self.tracer.add_marked(label, COMPUTE, begin, end_mark, k=k, cpu_s=cpu_s, fwd_s=fwd_s)
            self._ends.append(end_mark)
            if self.on_device:
                assert mid_mark is not None
                self._unread.append((begin, mid_mark, end_mark, False))
                work_s = self._read_times(block=True) if sized else 0.0
            else:
                self._last_backward_s = end - mid
                work_s = end - start
                self._busy_s += work_s
            self._sleep_slowdown(work_s)
        self.next_index += 1
        self.count += 1
        self.loss_sum = self.loss_sum + loss.detach().double()
