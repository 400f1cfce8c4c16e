"""A communication thread: runs one job at a time, in submission order, beside the compute side.

gloo releases the GIL inside its collectives, so on CPU the thread's all-reduce / reduce-scatter /
all-gather proceed while the main thread runs forward and backward passes. On GPU the thread
issues its work on its own CUDA stream; the stream first waits for an event recorded by the compute
stream (the gradients are in the buffer), and the job counts as done only once the stream has
drained, so the compute side may use the result as soon as `done` is set."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any

import torch


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

    def __init__(self, device: torch.device, name: str = "acco-comm"):
        self.device = device
        self.stream = torch.cuda.Stream(device=device) if device.type == "cuda" else None
        self._queue: queue.Queue = queue.Queue()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def submit(self, fn: Callable[[], Any]) -> CommJob:
        ready = None
        if self.stream is not None:
            ready = torch.cuda.Event()
            ready.record(torch.cuda.current_stream(self.device))
        job = CommJob(fn, ready)
        self._queue.put(job)
        return job

    def _run(self, job: CommJob) -> Any:
        if self.stream is None:
            return job.fn()
        with torch.cuda.device(self.device), torch.cuda.stream(self.stream):
            self.stream.wait_event(job.ready_event)
            result = job.fn()
        self.stream.synchronize()
        return result

    def _loop(self) -> None:
        while True:
            job = self._queue.get()
            if job is self._STOP:
                return
            try:
                job.result = self._run(job)
            except BaseException as exc:  # surfaced to the compute side by job.wait()
                job.error = exc
            finally:
                job.done.set()

    def close(self, timeout: float = 30) -> None:
        self._queue.put(self._STOP)
        self._thread.join(timeout=timeout)
