"""A node's host memory for a paper-scale GPU run (acco/train/host_memory.py): the dry run states it
per run beside GPU memory, with the checkpoint's save and resume time, and a profile whose
launcher.mem_gb is below it is refused in one line before submission."""

from __future__ import annotations

import pytest

from acco.config.experiments import compose
from acco.harness.run import plan as run_plan
from acco.harness.run.preflight import memory_problem
from acco.train.host_memory import HOST_BASELINE_BYTES, host_fit_problem, host_memory
from acco.train.memory import model_shape

FIG8 = ["experiment=fig8/paper", "method=acco"]


def test_the_node_peak_is_its_largest_phase_summed_over_its_ranks():
    one, two = (compose([*FIG8, f"layout={layout}"]) for layout in ("1x8", "2x4"))
    params = model_shape(one).params
    a, b = host_memory(one, 8, 8), host_memory(two, 8, 4)
    # every rank builds GPT-Neo 2.7B in fp32 on the host before it moves to its GPU
    assert a.peak_phase == "start" and a.peak_bytes == pytest.approx(8 * (HOST_BASELINE_BYTES + 4 * params))
    assert b.peak_bytes == pytest.approx(4 * (HOST_BASELINE_BYTES + 4 * params))
    assert a.phases["save"] < a.phases["start"] / 2  # a save streams its state piece by piece
    ddp = host_memory(compose([*FIG8[:1], "method=ddp", "layout=1x8"]), 8, 8)
    assert ddp.phases["resume"] > a.phases["resume"]  # ZeRO's moments are built on the host on resume
    final = host_memory(compose([*FIG8, "layout=1x8", "train.save_final_params=true"]), 8, 8)
    assert final.phases["end"] - a.phases["end"] == 4 * params  # rank 0's fp32 vector of θ_T


def test_a_profile_with_too_little_host_memory_is_refused_in_one_line():
    cfg = compose([*FIG8, "layout=1x8", "launcher=slurm", "launcher.mem_gb=64"])
    problem = memory_problem(cfg, 8)
    assert problem is not None and "\n" not in problem
    assert problem.startswith("fig8 run acco_layout=1x8: estimated ") and "exceeds launcher.mem_gb=64" in problem
    assert "set launcher.mem_gb=" in problem and "or null (whole nodes, --mem=0)" in problem
    assert memory_problem(compose([*FIG8, "layout=1x8", "launcher=slurm", "launcher.mem_gb=500"]), 8) is None
    assert host_fit_problem(compose([*FIG8, "layout=1x8", "launcher=slurm"]), 8, 8) is None  # --mem=0: whole node


def test_the_dry_run_states_host_memory_and_the_checkpoint_times():
    written: list[str] = []
    assert run_plan.dry_run(["fig8"], ["launcher=slurm", "launcher.mem_gb=64"], "paper", written.append) == 0
    lines = "\n".join(written).splitlines()
    header = next(line for line in lines if line.startswith("run "))
    assert {"host-GB/node", "ckpt-GB", "save-s", "resume-s"} <= set(header.split())
    col = header.split().index("host-GB/node")
    rows = [line.split() for line in lines if line.startswith(("acco_", "ddp_", "dpu_"))]
    assert len(rows) == 6 and all(float(r[col]) > 64 for r in rows if r[0].endswith("1x8"))
    refused = [line for line in lines if line.startswith("does not fit:") and "launcher.mem_gb=64" in line]
    assert len(refused) == 3  # the 1x8 runs: 8 ranks on a node need more than 64 GB
    assert any("host memory per node" in line for line in lines if line.startswith("assumptions:"))
