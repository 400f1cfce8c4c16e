"""Timing device work without waiting for it: on CUDA the host returns from a kernel launch long
before the kernel runs, so host clocks around GPU work time its enqueueing. A `Mark` is a point
in a stream's work: a cuda.Event recorded on the calling thread's current stream (it completes
when the work queued before it has) with the host time of the recording; on CPU the work is done
when the host moves on, and a mark is the host time alone. The time between two marks is read
once the later one's event has completed (`done`, which never blocks, or `wait`, which does).

Every CUDA call goes through the module-level `cuda` (torch.cuda), the one place a test puts a
stand-in (tests/unit/test_device_clock.py)."""

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


# -- a bounded wait for device work (NCCL without blocking wait) ------------------------------------
# dist.step_timeout_s on an NCCL run (set by the trainer): the longest a sync's device work may take.
# The host waits with a plain blocking synchronize (the GIL released: a polling loop would wake
# every few hundred µs and take the GIL from a host-bound compute thread, which the GPU check of
# 2026-12-04 saw slow micro-batches beside a sync by ~30 %); a wait that outlives the limit ends
# when NCCL's watchdog, on a slightly longer timeout (acco.runtime.process_group.Timeouts),
# aborts the communicators, and is then raised as a timeout on the waiting thread, so the run's
# own failure path runs and names it. TORCH_NCCL_BLOCKING_WAIT is not used (no watchdog, no
# flight recorder, and every collective's wait polls the host). None: no limit.
_wait_limit_s: float | None = None


class DeviceWaitTimeout(TimeoutError):
    """Device work (a collective and what was queued after it) outlived dist.step_timeout_s."""


def configure_waits(limit_s: float | None) -> None:
    global _wait_limit_s
    _wait_limit_s = None if limit_s is None else float(limit_s)


def wait_limited() -> bool:
    return _wait_limit_s is not None


def wait_for(event, what: str) -> None:
    """Block the host until `event` (a cuda.Event recorded after the work to wait for) completes;
    with a limit set, raise DeviceWaitTimeout if that took longer (the communicator was aborted
    under it, or a peer held it up past dist.step_timeout_s: either way the step failed)."""
    if event is None:
        return
    start = time.monotonic()
    event.synchronize()
    waited = time.monotonic() - start
    if _wait_limit_s is not None and waited > _wait_limit_s:
        raise DeviceWaitTimeout(
            f"{what} timed out: {waited:.0f} s, more than dist.step_timeout_s={_wait_limit_s:g} s (a peer "
            f"crashed, hung or is far slower; raise dist.step_timeout_s if this rank's peers are alive and slow)"
        )


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
