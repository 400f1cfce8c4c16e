"""The training process group's settings that a rank's own code needs, under any launcher (the
harness's own, torchrun around acco.Overlapped, srun): the run's timeouts in one
order, high-priority streams for the training collectives, deterministic CUDA kernels before the
first group."""

from __future__ import annotations

import os
from dataclasses import dataclass, replace

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class Timeouts:
    """Every wait that ends a training run whose peer is gone, in the order they fire, all sized
    from dist.step_timeout_s (itself sized from the run's estimated sync by the run's plan):

      host_wait_s   a rank waiting for a peer in a training collective gives up: on NCCL the host's
                    wait for a sync's device work, on gloo the
                    collective's own timeout; the rank reports it and, on NCCL, dumps the flight
                    recorder (the last collectives of every group) to <out_dir>/nccl_trace_rank_<r>
      collective_s  NCCL's watchdog aborts the communicators (and dumps, if no rank did): the
                    backstop for a wait the host never made; on gloo the same as host_wait_s
      watchdog_s    the rank's own watchdog ends a rank that made no progress at all (stuck
                    outside any collective): last, so a healthy rank waiting in a collective for a
                    dead peer is ended by that collective's timeout, named as such

    The first training step waits by the start-up timeout (dist.timeout_s) instead: its first
    collectives set up the communicators (NCCL) and may wait for the slowest rank's start-up."""

    startup_s: float
    host_wait_s: float
    collective_s: float
    watchdog_s: float

    @classmethod
    def of(cls, step_timeout_s: float, startup_s: float, nccl: bool) -> Timeouts:
        step = float(step_timeout_s)
        margin = max(60.0, 0.5 * step)
        collective = step + margin if nccl else step
        return cls(float(startup_s), step, collective, step + 2 * margin)

    def first_step(self) -> Timeouts:
        """The timeouts of the first training step: the start-up timeout at least, in the same order."""
        margin = self.watchdog_s - self.collective_s
        host = max(self.host_wait_s, self.startup_s)
        collective = max(self.collective_s, host + (self.collective_s - self.host_wait_s))
        watchdog = max(self.watchdog_s, collective + margin)
        return replace(self, host_wait_s=host, collective_s=collective, watchdog_s=watchdog)


def nccl_group_timeout(step_timeout_s: float) -> float:
    """NCCL's watchdog timeout for the training groups (Timeouts.collective_s): past the host's own
    wait (dist.step_timeout_s), so the run's failure path reports first and the watchdog is the backstop."""
    return Timeouts.of(step_timeout_s, 0.0, nccl=True).collective_s


def set_group_timeout(group, seconds: float) -> None:
    """A process group's timeout from now on (collectives already issued keep theirs)."""
    from datetime import timedelta

    from torch.distributed.distributed_c10d import _set_pg_timeout

    _set_pg_timeout(timedelta(seconds=seconds), group)


def deterministic_cuda() -> None:
    """torch's deterministic kernels on CUDA (cuBLAS needs a fixed workspace, read at its first
    call): before any NCCL group and any CUDA work, so everything built after sees the setting."""
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(True, warn_only=True)  # an op without one warns, not fails


def training_group_options(backend: str):
    """The training collectives' group options: on NCCL, high-priority streams for its kernels,
    so a collective overlapped with compute is scheduled ahead of the compute kernels (ACCO's
    point: the communication hides behind the computation). None (the default) elsewhere."""
    if backend != "nccl":
        return None
    options = dist.ProcessGroupNCCL.Options()
    options.is_high_priority_stream = True
    return options


FLIGHT_RECORDER_FILE = "TORCH_NCCL_DEBUG_INFO_TEMP_FILE"  # NCCL's own dump on a timeout: <prefix><rank>


def flight_recorder_path(rank: int, environ=None) -> str | None:
    """Where NCCL's flight recorder dumps rank `rank`'s last collectives on a timeout (the run's
    folder when the harness set it: nccl_error_handling); None: not set."""
    prefix = (os.environ if environ is None else environ).get(FLIGHT_RECORDER_FILE)
    return f"{prefix}{rank}" if prefix else None


def dump_flight_recorder(path: str) -> str | None:
    """The flight recorder's record (the last collectives of every group of this process, with
    their state and stack) written to `path` now, as NCCL's watchdog would at its timeout: a rank
    that gave up waiting first (Timeouts.host_wait_s) leaves it before it ends. The path, or None
    when it could not be written (no recorder in this build)."""
    try:
        from torch._C import _distributed_c10d

        data = _distributed_c10d._dump_fr_trace()  # type: ignore[attr-defined]
        with open(path, "wb") as f:
            f.write(data)
    except (ImportError, AttributeError, RuntimeError, OSError):
        return None
    return path
