"""Fault injection for the failure tests (cfg.fault): a rank killed, hung or signalled after a
committed step, or a loss that turns NaN from a given step on."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class FaultPlan:
    """cfg.fault's step-boundary faults: after committed step `at_step`, rank `kill_rank` is
    killed, `hang_rank` hangs, `signal_rank` gets `signal`."""

    at_step: int | None = None
    kill_rank: int | None = None
    hang_rank: int | None = None
    signal_rank: int | None = None
    signal: str | None = None

    @classmethod
    def of(cls, fault: Mapping[str, Any]) -> FaultPlan:
        keys = ("at_step", "kill_rank", "hang_rank", "signal_rank", "signal")
        return cls(**{key: fault.get(key) for key in keys})

    def inject(self, step: int, rank: int) -> None:
        """After committed step `step`: what the plan asks of this rank at that step, if anything."""
        if self.at_step != step:
            return
        if self.kill_rank == rank:
            os.kill(os.getpid(), signal.SIGKILL)  # a worker dying mid-run
        if self.hang_rank == rank:
            while True:  # a worker stuck outside any collective (a deadlock, a stuck device)
                time.sleep(3600)
        if self.signal_rank == rank:
            os.kill(os.getpid(), getattr(signal, str(self.signal or "SIGUSR1")))


def nan_injecting(loss_fn, at_step: int, steps_done: Callable[[], int]):
    """`loss_fn`, whose loss turns NaN from the micro-batches computed after step at_step-1 was
    committed (ddp and acco commit them at step at_step, dpu and wp one step later).
    `steps_done()`: the committed steps so far; it must move on the main thread only, so which
    micro-batches turn NaN does not depend on the communication thread's timing."""

    def wrapped(model, batch):
        loss = loss_fn(model, batch)
        return loss * float("nan") if steps_done() >= at_step - 1 else loss

    return wrapped
