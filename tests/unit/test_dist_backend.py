"""dist.backend: auto (NCCL on CUDA, gloo on CPU), nccl, or gloo — on CUDA the training collectives
then run on host copies (acco/engine/collectives.py) and ranks may share a GPU, which is how make
gpu-check runs the world-2 reduce-scatter and all-gather on a machine with one GPU.

Here the tests in-process; those that start processes (marked integration) are in
tests/integration/test_dist_backend.py."""

from __future__ import annotations

import pytest
import torch

from acco.config.experiments import compose
from acco.config.validate import ConfigError
from acco.harness.launch import pick_device
from acco.harness.run.validate import validate


@pytest.mark.parametrize(
    "overrides,message",
    [
        (["dist.backend=mpi"], "dist.backend='mpi': use auto, nccl or gloo"),
        (["dist.backend=nccl", "device=cpu"], "dist.backend=nccl needs device=cuda"),
    ],
)
def test_a_bad_backend_is_one_error_line(overrides, message, tmp_path):
    cfg = compose(overrides)
    cfg["out_dir"] = str(tmp_path / "run")
    with pytest.raises(ConfigError, match=message):
        validate(cfg)


def test_gloo_lets_ranks_share_a_gpu(tmp_path, monkeypatch):
    for name in ("RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "SLURM_STEP_GPUS", "SLURM_JOB_GPUS", "SLURM_GPUS_PER_TASK"):
        monkeypatch.delenv(name, raising=False)
    cfg = compose(["world_size=2", "device=cuda"])
    cfg["out_dir"] = str(tmp_path / "run")
    with pytest.raises(ConfigError, match="2 ranks on this node but 1 GPU"):
        validate(cfg, cuda_available=True, gpus_here=1)
    cfg["dist"]["backend"] = "gloo"
    assert validate(cfg, cuda_available=True, gpus_here=1) == 2
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert pick_device("cuda", 1, 2, shared=True) == torch.device("cuda", 0)
    with pytest.raises(RuntimeError, match="2 ranks on this node but 1 GPU"):
        pick_device("cuda", 1, 2)
