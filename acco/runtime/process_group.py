"""The training process group's settings that a rank's own code needs, under any launcher (the
harness's acco/harness/launch.py, torchrun around acco.Overlapped, srun): NCCL's watchdog timeout
past the run's own wait, high-priority streams for the training collectives, deterministic CUDA
kernels before the first group."""

from __future__ import annotations

import os

import torch
import torch.distributed as dist


def nccl_group_timeout(step_timeout_s: float) -> float:
    """NCCL's watchdog timeout for the training groups: past the host's own wait
    (dist.step_timeout_s), so the run's failure path reports first and the watchdog is the backstop."""
    return float(step_timeout_s) + max(60.0, 0.5 * float(step_timeout_s))


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
