"""A communication thread: runs one job at a time, in submission order, beside the compute side.

gloo releases the GIL inside its collectives, so on CPU the thread's all-reduce / reduce-scatter /
all-gather proceed while the main thread runs forward and backward passes. On GPU the thread
issues its work on its own CUDA stream; the stream first waits for an event recorded by the compute
stream (the gradients are in the buffer), and the job counts as done only once the stream has
drained, so the compute side may use the result as soon as `done` is set. The stream has the
device's highest priority: a sync's kernels are scheduled ahead of the compute stream's queued
ones instead of starved behind them (overlap is the point of the thread).

Every CUDA call goes through the module-level `cuda` (torch.cuda), the one place a test puts a
stand-in (tests/unit/test_comm_worker.py checks the order of the calls on CPU).

Two modes for `make gpu-check`'s race detection, both off by default:
- inline (`dist.comm_thread=false`, set through `configure`): no thread and no stream, `submit`
  runs the job at once on the caller's thread and current stream, the sequential reference a
  threaded run must equal bit for bit (deterministic runs);
- delays (`ACCO_COMM_DELAY_CYCLES=N`, a test-only hook): `torch.cuda._sleep(2N)` on the compute
  stream before it writes what a job will read (`delay_writes`, called by the rounds just before
  they fill the communication buffer: the writes themselves come late, not only the event after
  them) and `_sleep(N)` on the communication stream before each job (its writes come late), so a
  missing wait on either side reads data not yet written and changes the result. The compute
  side sleeps twice as long: were both equal, a communication stream that did not wait would
  sleep as long as the writes it should wait for and could read them just in time.
  tests/unit/test_comm_worker.py replays the calls with stream semantics on CPU and shows a
  removed wait reading before the write."""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable
from typing import Any

import torch

from . import device_clock

cuda = torch.cuda

# jobs submitted and not yet done, over every worker of this process: the collective audit
# records whether a sync was in flight when a collective was issued
_in_flight = 0
_in_flight_lock = threading.Lock()


# the process's mode, set once per worker by the trainer from dist.comm_thread
_threaded = True


def configure(threaded: bool) -> None:
    """Threaded (the default) or inline communication for the workers built after this call."""
    global _threaded
    _threaded = bool(threaded)


def delay_cycles() -> int:
    """GPU cycles slept on each stream before its work (ACCO_COMM_DELAY_CYCLES; 0: none)."""
    return int(os.environ.get("ACCO_COMM_DELAY_CYCLES") or 0)


def jobs_in_flight() -> int:
    return _in_flight


def _count_in_flight(delta: int) -> None:
    global _in_flight
    with _in_flight_lock:
        _in_flight += delta


def highest_stream_priority() -> int:
    """The device's highest stream priority (CUDA: lower numbers are higher). A build without
    Stream.priority_range gets -1, which CUDA clamps to the highest the device has."""
    priority_range = getattr(cuda.Stream, "priority_range", None)
    if priority_range is None:
        return -1
    _least, greatest = priority_range()
    return int(greatest)


class CommJob:
    def __init__(self, fn: Callable[[], Any], ready_event=None):
        self.fn = fn
        self.ready_event = ready_event  # a torch.cuda.Event recorded by the compute stream, or None
        self.done = threading.Event()
        self.result: Any = None
        self.error: BaseException | None = None

    def is_done(self) -> bool:
        return self.done.is_set()

    def wait(self, timeout: float | None = None) -> Any:
        if not self.done.wait(timeout):
            raise TimeoutError(f"communication job did not finish within {timeout} s")
        if self.error is not None:
            raise RuntimeError("communication thread failed") from self.error
        return self.result


class CommWorker:
    _STOP = object()

    def __init__(self, device: torch.device, name: str = "acco-comm", threaded: bool | None = None):
        self.device = device
        self.threaded = _threaded if threaded is None else threaded
        self.delay = delay_cycles() if device.type == "cuda" else 0
        self.stream = None
        self._thread: threading.Thread | None = None
        if not self.threaded:
            return
        self.stream = cuda.Stream(device=device, priority=highest_stream_priority()) if device.type == "cuda" else None
        self._queue: queue.Queue = queue.Queue()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def delay_writes(self) -> None:
        """Called by the compute side just before it writes what the next job reads (the
        communication buffer): with delays on, the current stream sleeps first, so those writes land
        late and a job that did not wait for them would read stale data (a no-op otherwise)."""
        if self.threaded and self.stream is not None and self.delay:
            cuda._sleep(2 * self.delay)

    def submit(self, fn: Callable[[], Any]) -> CommJob:
        if not self.threaded:
            return self._run_inline(fn)
        ready = None
        if self.stream is not None:
            # recorded on the submitting thread's current stream, before the job can start
            ready = cuda.Event()
            ready.record(cuda.current_stream(self.device))
        job = CommJob(fn, ready)
        _count_in_flight(1)
        self._queue.put(job)
        return job

    def _run_inline(self, fn: Callable[[], Any]) -> CommJob:
        """The job at once, on this thread and its current stream: done when `submit` returns."""
        job = CommJob(fn)
        _count_in_flight(1)
        self._execute(job)  # no stream: the job's function alone
        return job

    def _execute(self, job: CommJob) -> None:
        try:
            job.result = self._run(job)
        except BaseException as exc:  # surfaced to the compute side by job.wait()
            job.error = exc
        finally:
            _count_in_flight(-1)
            job.done.set()

    def _run(self, job: CommJob) -> Any:
        if self.stream is None:
            return job.fn()
        with cuda.device(self.device), cuda.stream(self.stream):
            self.stream.wait_event(job.ready_event)
            if self.delay:  # the results come late: the compute side must wait for them
                cuda._sleep(self.delay)
            result = job.fn()
        # the host waits for the stream before `done`: the compute side needs no event of its own.
        # Once per sync, a timeout past dist.step_timeout_s on NCCL (device_clock.wait_for)
        if device_clock.wait_limited():
            end = cuda.Event()
            end.record(self.stream)
            device_clock.wait_for(end, "a sync on the communication stream")
        else:
            self.stream.synchronize()
        return result

    def _loop(self) -> None:
        while True:
            job = self._queue.get()
            if job is self._STOP:
                return
            self._execute(job)

    def close(self, timeout: float = 30) -> None:
        if self._thread is None:
            return
        self._queue.put(self._STOP)
        self._thread.join(timeout=timeout)
