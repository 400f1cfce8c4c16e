"""When a test can run: marks that skip it where the machine lacks what it needs (in the manner of
lightning-hydra-template's tests/helpers/run_if.py). The local Slurm cluster's own condition is its
fixture's (slurm_cluster.py: skipped when its packages cannot be installed)."""

from __future__ import annotations

import pytest
import torch

from acco.harness.testbed.link import netns_possible

CUDA = torch.cuda.is_available()
GPUS = torch.cuda.device_count() if CUDA else 0
gpu = pytest.mark.gpu  # make gpu-check's tests (experiments/gpu_check.py runs every file holding one)
needs_cuda = pytest.mark.skipif(not CUDA, reason="no CUDA GPU visible")
needs_two = pytest.mark.skipif(GPUS < 2, reason="2 ranks over NCCL need 2 GPUs (one device per rank)")

# the emulated interconnect (acco/harness/testbed): network namespaces and tc
needs_netns = pytest.mark.skipif(
    netns_possible() is not None, reason=f"network namespaces not possible here: {netns_possible()}"
)
