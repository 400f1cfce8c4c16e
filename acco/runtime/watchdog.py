"""A rank's own watchdog: a thread that ends the process when training makes no progress (no
micro-batch computed, no step committed) for `timeout_s`.

A rank blocked in a collective fails sooner, by the collective's timeout (dist.step_timeout_s); this
catches the rank that is itself stuck outside any collective (a deadlock, a stuck device), which
nothing else would end when no launcher of ours watches it (srun without --kill-on-bad-exit,
torchrun without an elastic agent that notices). Paused around the long steps that are not
training (checkpoints, evaluation)."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from contextlib import contextmanager


class Watchdog:
    def __init__(
        self,
        progress: Callable[[], object],
        timeout_s: float,
        on_stall: Callable[[str], None],
        poll_s: float | None = None,
        on_progress: Callable[[object], None] | None = None,
    ):
        """`on_progress(value)`: called on the watchdog's thread when it sees progress (at most once
        per poll), e.g. to leave a note the launcher reads (acco.runtime.files.note_progress)."""
        self.progress = progress  # a value that changes whenever training moves on
        self.timeout_s = float(timeout_s)
        self.on_stall = on_stall  # called (on the watchdog thread) with the reason
        self.on_progress = on_progress
        self.poll_s = poll_s if poll_s is not None else min(5.0, self.timeout_s / 4)
        self._paused = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> Watchdog:
        self._thread = threading.Thread(target=self._loop, name="acco-watchdog", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    @contextmanager
    def paused(self):
        self._paused += 1
        try:
            yield
        finally:
            self._paused -= 1

    def _loop(self) -> None:
        last, since = self.progress(), time.monotonic()
        while not self._stop.wait(self.poll_s):
            now = self.progress()
            if now != last or self._paused:
                if now != last and self.on_progress is not None:
                    self.on_progress(now)
                last, since = now, time.monotonic()
                continue
            if time.monotonic() - since > self.timeout_s:
                self.on_stall(f"made no training progress for {self.timeout_s:g} s: stuck outside any collective")
                return


def exit_on_stall(rank: int, out_dir: str) -> Callable[[str], None]:
    """The stall action of a worker: say so, leave a failure note, end the process at once."""

    def stall(reason: str) -> None:
        from .files import write_failure

        message = f"rank {rank}: {reason}"
        print(f"error: {message}", file=sys.stderr, flush=True)
        try:
            write_failure(out_dir, rank, message)
        finally:
            os._exit(1)

    return stall
