"""The same worker code under three starts: local spawn (the other tests), torchrun, and srun
(its SLURM_* environment, here set by hand for two tasks on this machine; the real Slurm cluster
runs it in the Slurm tests)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from acco.harness.launch import free_port, worker_start_method
from tests.helpers.paths import ROOT, TRAIN
from tests.helpers.runs import SMALL_LM, load_run

pytestmark = pytest.mark.integration  # every test here starts processes

ARGS = ["method=acco", *SMALL_LM, "train.steps=4", "train.deterministic=true"]


def test_local_workers_fork_on_cpu_and_spawn_for_cuda(monkeypatch):
    """auto: a CPU run forks its workers from the launcher (the model code imported once); a CUDA
    run spawns them (a forked child cannot use CUDA the parent touched); an explicit choice wins."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert worker_start_method("auto", "cpu") == "fork"
    assert worker_start_method("auto", "auto") == "fork"
    assert worker_start_method("spawn", "cpu") == "spawn"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert worker_start_method("auto", "auto") == "spawn"
    assert worker_start_method("auto", "cuda") == "spawn"
    assert worker_start_method("auto", "cpu") == "fork"


def test_torchrun(tmp_path):
    out = tmp_path / "run"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc-per-node=2",
            f"--master-port={free_port()}",
            TRAIN,
            *ARGS,
            f"out_dir={out}",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    summary = load_run(str(out))["summary"]
    assert summary["status"] == "completed" and summary["launcher"] == "torchrun"
    assert summary["world_size"] == 2 and summary["steps_completed"] == 4


def test_srun_environment(tmp_path):
    out = tmp_path / "run"
    port = free_port()
    job_id = port - 20000 if 20000 <= port < 40000 else port  # MASTER_PORT comes from the job id
    procs = []
    for rank in range(2):
        env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "MASTER_ADDR")}
        env.update(
            {
                "SLURM_PROCID": str(rank),
                "SLURM_LOCALID": str(rank),
                "SLURM_STEP_ID": "0",
                "SLURM_STEP_NUM_TASKS": "2",
                "SLURM_STEP_TASKS_PER_NODE": "2",
                "SLURM_STEP_NODELIST": "localhost",
                "SLURM_JOB_ID": str(job_id),
            }
        )
        if not 20000 <= port < 40000:
            env["MASTER_PORT"] = str(port)
        procs.append(
            subprocess.Popen(
                [sys.executable, TRAIN, *ARGS, f"out_dir={out}"],
                cwd=ROOT,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    errs = []
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-4000:]
        errs.append(err)
    summary = load_run(str(out))["summary"]
    assert summary["status"] == "completed" and summary["launcher"] == "slurm"
    assert summary["world_size"] == 2 and summary["steps_completed"] == 4
    # rank 0 ends the run's log with its closing line; the other ranks say nothing of it
    assert errs[0].strip().splitlines()[-1].startswith("acco: completed: 4/4 steps, train loss "), errs[0][-2000:]
    assert "acco: completed" not in errs[1]
