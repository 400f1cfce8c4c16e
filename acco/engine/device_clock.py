"""Timing device work without waiting for it: on CUDA the host returns from a kernel launch long
before the kernel runs, so host clocks around GPU work time its enqueueing. A `Mark` is a point
in a stream's work: a cuda.Event recorded on the calling thread's current stream (it completes
when the work queued before it has) with the host time of the recording; on CPU the work is done
when the host moves on, and a mark is the host time alone. The time between two marks is read
once the later one's event has completed (`done`, which never blocks, or `wait`, which does).

Every CUDA call goes through the module-level `cuda` (torch.cuda), the one place a test puts a
stand-in (tests/test_device_timing.py)."""

from __future__ import annotations

import time
from typing import Any, NamedTuple

import torch

cuda = torch.cuda


class Mark(NamedTuple):
    host_us: float  # wall-clock time of the recording (µs since the epoch, as the trace's)
    event: Any = None  # a timing cuda.Event on the recording thread's current stream; None on CPU


def mark(on_device: bool) -> Mark:
    event = None
    if on_device:
        event = cuda.Event(enable_timing=True)
        event.record()  # the current stream of this thread (the communication thread's own)
    return Mark(time.time() * 1e6, event)


def done(m: Mark) -> bool:
    """Has the work queued before `m` finished? Never blocks."""
    return m.event is None or bool(m.event.query())


def wait(m: Mark) -> None:
    """Block the host until the work queued before `m` has finished (a host sync on CUDA)."""
    if m.event is not None:
        m.event.synchronize()


def elapsed_us(a: Mark, b: Mark) -> float:
    """Microseconds of work from `a` to `b` (b's work must be done on a device)."""
    if a.event is None or b.event is None:
        return b.host_us - a.host_us
    return float(a.event.elapsed_time(b.event)) * 1e3  # elapsed_time: milliseconds


class Anchor:
    """A device point whose host time is known, so event times can be placed on the trace's wall
    clock: made once, with the device drained (one host sync), so its event completes the moment
    it is recorded. The offset is a float32 count of ms (CUDA's): 0.25 ms resolution an hour in,
    while a span's own duration keeps the event pair's full resolution."""

    def __init__(self) -> None:
        cuda.synchronize()
        self.mark = mark(True)

    def host_us(self, m: Mark) -> float:
        return self.mark.host_us + elapsed_us(self.mark, m)
