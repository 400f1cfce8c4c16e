"""Runs dispatched to the real local Slurm cluster through submitit: ranks from Slurm, an
experiment's runs as one job array, a killed worker reported as failed in bounded time, and the
launcher's errors before anything is submitted."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from tests.helpers.paths import ROOT
from tests.helpers.runs import load_run, run_folders, run_train
from tests.helpers.runs import run_script as script

# the tests on the local Slurm cluster share one pytest-xdist worker (tests/conftest.py)
pytestmark = pytest.mark.xdist_group("slurm")

QUICK = ["data.source.num_stories=1500", "train.log_every=0", "launcher=slurm_local", "launcher.wait=true"]


@pytest.mark.integration
def test_acco_through_submitit_two_nodes_and_one_node(cluster, tmp_path):
    for layout, distinct_nodes in (("2x1", 2), ("1x2", 1)):
        run_train(
            [
                "experiment=fig5/cpu",
                "method=acco",
                f"layout={layout}",
                "train.steps=3",
                *QUICK,
                f"results_root={tmp_path}",
            ],
            timeout=300,
        )
        (out,) = [p for p in run_folders(tmp_path) if f"layout={layout}" in p.name]
        summary = load_run(str(out))["summary"]
        assert summary["status"] == "completed" and summary["launcher"] == "slurm"
        assert summary["world_size"] == 2 and summary["steps_completed"] == 3
        assert summary["slurm_job_id"] and (out / "slurm.json").exists()
        nodes = {r["node"] for r in summary["per_rank"]}
        assert len(nodes) == distinct_nodes and nodes <= {"n1", "n2", "n3", "n4"}, nodes
    # status.py shows the runs a user submitted by hand (not of the run list: under sweeps/), issue 41
    status = script("status.py", ["experiment=fig5/cpu", f"results_root={tmp_path}"], timeout=120)
    assert status.returncode == 0, status.stderr
    others = status.stdout.split("other runs of fig5/cpu under ", 1)[1]
    rows = [line for line in others.splitlines() if "layout=" in line]
    assert len(rows) == 2 and all("COMPLETED" in r and "completed" in r for r in rows), status.stdout


@pytest.mark.integration
def test_experiment_sweep_is_one_job_array_and_skips_completed_runs(cluster, tmp_path):
    # 1 of the experiment's 5 seeds: its 3 runs show one array and the skipping
    args = ["experiment=fig6/cpu", "experiment.runs.0.seed=[0]", "train.steps=2", *QUICK[:-1]]
    args.append(f"results_root={tmp_path}")
    proc = script("submit.py", [*args, "--wait"], timeout=400)
    assert proc.returncode == 0, proc.stderr[-3000:]
    ids = [line.split()[1].rstrip(":") for line in proc.stdout.splitlines() if line.startswith("submitted")]
    assert len(ids) == 3 and len({i.split("_")[0] for i in ids}) == 1, ids  # one array, 3 methods
    runs = run_folders(tmp_path)  # the 2-step runs: a results root of their own under sweeps/
    assert sorted(load_run(str(r))["summary"]["method"] for r in runs) == ["acco", "ddp", "wp"]
    assert all(load_run(str(r))["summary"]["status"] == "completed" for r in runs)
    again = script("submit.py", args, timeout=120)
    assert again.returncode == 0 and "are complete" in again.stdout
    status = script("status.py", args, timeout=120)
    *table, tally = status.stdout.strip().splitlines()
    assert sum("COMPLETED" in row for row in table) == 3 and sum("completed" in row for row in table) == 3, table
    assert tally == "3 runs; Slurm: 3 COMPLETED; results: 3 completed", tally


@pytest.mark.integration
def test_hydra_sweep_on_slurm_is_a_job_array_per_shape(cluster, tmp_path):
    """`-m ... launcher=slurm`: the sweep goes the way every submission does (planned and checked
    first, then one job array per shape), each run's job shaped by its layout; again: skipped."""
    base = ["-m", "experiment=fig5/cpu", "train.steps=2", *QUICK, f"results_root={tmp_path}"]
    proc = run_train([*base, "method=acco", "seed=0,1", "layout=1x2,2x1"], timeout=500)
    ids = [line.split()[1].rstrip(":") for line in proc.stderr.splitlines() if line.startswith("submitted")]
    arrays: dict[str, int] = {}
    for i in ids:
        arrays[i.split("_")[0]] = arrays.get(i.split("_")[0], 0) + 1
    assert sorted(arrays.values()) == [2, 2], proc.stderr  # an array per shape, 2 seeds each
    # the closing table (issue 41): every run's status, not only the job ids
    assert "sweep of 4 runs on Slurm" in proc.stderr and "4 completed, 0 skipped" in proc.stderr, proc.stderr
    runs = run_folders(tmp_path)  # the sweep's folder under sweeps/
    assert len(runs) == 4 and not (tmp_path / "cpu").exists()
    for out in runs:
        summary = load_run(str(out))["summary"]
        assert summary["status"] == "completed" and summary["launcher"] == "slurm", out.name
        assert summary["world_size"] == 2 and summary["steps_completed"] == 2
        nodes = {r["node"] for r in summary["per_rank"]}
        assert len(nodes) == (2 if "layout=2x1" in out.name else 1), (out.name, nodes)
    again = run_train([*base, "method=acco", "seed=0,1", "layout=1x2,2x1"], timeout=200)
    assert "submitted" not in again.stderr and "0 completed, 4 skipped" in again.stderr, again.stderr
    # bad input: one line, exit 2, nothing submitted (the run's 2x1 layout against world_size=4)
    bad = tmp_path / "bad"
    proc = run_train([*base[:-1], f"results_root={bad}", "method=acco", "layout=2x1", "world_size=4"], expect=2)
    assert proc.stderr.strip().startswith("error:") and "submitted" not in proc.stderr, proc.stderr
    assert not (bad / "cpu").exists() and not (bad / "sweeps").exists()


@pytest.mark.slow
@pytest.mark.integration
def test_killed_worker_fails_the_job_quickly(cluster, tmp_path):
    args = [
        "experiment=fig5/cpu",
        "method=acco",
        "seed=0",
        "layout=2x1",
        "train.steps=2000",
        *QUICK,
        f"results_root={tmp_path}",
        "fault.kill_rank=1",
        "fault.at_step=3",
    ]
    t0 = time.monotonic()
    proc = run_train(args, expect=1, timeout=300)
    assert time.monotonic() - t0 < 120, "the failure took too long to surface"
    assert "failed" in proc.stderr
    (out,) = run_folders(tmp_path)
    summary = load_run(str(out))["summary"]
    assert summary["status"] == "failed" and 1 <= summary["steps_completed"] < 2000
    status = script("status.py", args[:-2] + args[-2:], timeout=120)
    line = next(line for line in status.stdout.splitlines() if "fault.at_step=3" in line and "FAILED" in line)
    assert "failed" in line
    assert "|" in status.stdout  # the tail of the failed job's log


@pytest.mark.integration
def test_launcher_errors_before_submission(tmp_path):
    base = ["experiment=fig5/cpu", "method=acco", "launcher=slurm_local", f"results_root={tmp_path}"]
    proc = run_train([*base, "launcher.nodes=3"], expect=2)
    assert "3 nodes x" in proc.stderr and "world_size=2" in proc.stderr
    proc = run_train([*base, "launcher.gpus_per_node=4"], expect=2)
    assert "gpus_per_node=4" in proc.stderr and "tasks per node" in proc.stderr
    env = dict(os.environ, PATH="/usr/local/bin:/bin")  # no sbatch/sinfo here
    env["PATH"] = os.pathsep.join(
        p for p in env["PATH"].split(os.pathsep) if not os.path.exists(os.path.join(p, "sbatch"))
    )
    proc = subprocess.run(
        [sys.executable, os.path.join(ROOT, "experiments", "train.py"), *base],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 2 and "slurm/local-cluster/start" in proc.stderr, proc.stderr
    assert not any(tmp_path.iterdir())


def test_checkpoint_signal_requeues_with_resume_auto():
    """submitit calls checkpoint() on its preemption/time-limit signal; the requeued job gets the
    same run with resume=auto, a bounded number of times. (On the local cluster, `scancel
    --signal=USR2 <job>` requeued a running job this way; the training-state checkpoint that
    resume=auto continues from belongs to the reliability work.)"""
    from acco.config.experiments import compose
    from acco.harness.slurm.dispatch import SlurmRun

    cfg = compose(["experiment=fig5/cpu", "method=acco", "launcher=slurm_local"])
    first = SlurmRun(cfg).checkpoint()
    assert first.function.cfg["resume"] == "auto" and first.function.cfg["_requeues"] == 1
    assert first.function.cfg["out_dir"] == cfg["out_dir"]
    last = first.function
    for _ in range(cfg["launcher"]["max_requeues"] - 1):
        last = last.checkpoint().function
    assert last.checkpoint() is None  # no endless requeue loop
