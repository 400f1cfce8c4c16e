"""A run longer than its job's time limit, on the local Slurm cluster of slurm/local-cluster/, laid
over two (virtual) nodes with real `srun --kill-on-bad-exit=1`: Slurm's signal before the limit makes
every rank checkpoint and stop together, the job is requeued, the requeued job resumes from that
checkpoint, and after as many segments as it takes the run completes — through a generated sbatch
script and through submitit. A rank killed outright (kill -9) ends the job once, as a failure, with
one line saying so, and no requeue."""

from __future__ import annotations

import csv
import json
import os
import signal
import sys

import pytest
import yaml

from acco.config.experiments import compose
from acco.harness.bench import SMALL_LM
from acco.harness.slurm.sbatch import sbatch_script
from tests.helpers.paths import ROOT
from tests.helpers.runs import run_train
from tests.helpers.slurm_cluster import follow_job, output, run, sacct_fields

# the tests on the local Slurm cluster share one pytest-xdist worker (tests/conftest.py)
pytestmark = [pytest.mark.xdist_group("slurm"), pytest.mark.integration]

# ~31 s of training on 2 idle cores (rank 0 made 6x slower: a step ~0.24 s): more than one segment
# holds, as a 1-minute job signalled 30 s before its limit trains at most ~25 s (Slurm may send the
# signal up to a minute early, even at once: a segment may stop after one step). On a loaded machine
# (CI: another test beside it) a segment trained 15-36 steps: 6 requeues allow 7 segments
STEPS = 130
RUN = [
    *SMALL_LM,
    "method=acco",
    "layout=2x1",
    f"train.steps={STEPS}",
    "train.trace=false",
    "train.log_every=0",
    "hetero.slow_rank=0",
    "hetero.factor=6",
    "launcher=slurm_local",
    "launcher.time_min=1",
    "launcher.signal_delay_s=30",
    "launcher.max_requeues=12",
]


def steps(out_dir) -> list[int]:
    with open(os.path.join(out_dir, "metrics.csv"), newline="") as f:
        return [int(row["step"]) for row in csv.DictReader(f)]


def summary(out_dir) -> dict:
    with open(os.path.join(out_dir, "summary.json")) as f:
        return json.load(f)


def submit_script(tmp_path, overrides: list[str]) -> tuple[str, str]:
    """A generated sbatch script of `overrides`, submitted: (job id, the run folder)."""
    out = str(tmp_path / "run")
    overrides = [*overrides, f"launcher.log_dir={tmp_path / 'logs'}", f"out_dir={out}"]
    cfg = compose(overrides)
    (tmp_path / "logs").mkdir()
    script = tmp_path / "job.sbatch"
    script.write_text(sbatch_script(overrides, cfg, cfg["launcher"], ROOT, sys.executable, environ=dict(os.environ)))
    proc = run(["sbatch", "--parsable", str(script)], timeout=60, cwd=str(tmp_path))
    assert proc.returncode == 0, output(proc)
    return proc.stdout.strip().split(";")[0], out


def job_log(tmp_path) -> str:
    return "".join(p.read_text() for p in sorted((tmp_path / "logs").glob("*")) if p.is_file())


def assert_resumed_to_completion(out: str, total: int = STEPS, nodes: int = 2) -> dict:
    s = summary(out)
    assert s["status"] == "completed" and s["steps_completed"] == total, s
    assert s["resumed_from_step"] and 0 < s["resumed_from_step"] < total, s
    assert steps(out) == list(range(1, total + 1))  # each step once, across the segments
    assert len({r["node"] for r in s["per_rank"]}) == nodes  # two (virtual) nodes
    return s


# `alone` (make test's second phase): beside the other tests a segment's start-up outlasted the signal
# and 12 requeues trained 42 steps. The per-test limit (pytest-timeout) is above follow_job's
@pytest.mark.alone
@pytest.mark.timeout(1700)
def test_a_time_limit_requeues_the_generated_script_and_the_run_completes(cluster, tmp_path):
    job, out = submit_script(tmp_path, RUN)
    states = follow_job(job, timeout=1500)  # up to 13 segments of a 1-minute job and their requeues
    log = job_log(tmp_path)
    assert sacct_fields(job, "State", want_state="COMPLETED") == ["COMPLETED"], (states, log[-4000:])
    assert_resumed_to_completion(out)
    # every segment but the last: each rank stopped by the signal at one agreed step, rank 0's exit
    # status 3 reached srun untouched (no task terminated under it), and the script requeued
    stops = [line for line in log.splitlines() if "stopped by SIGUSR1 at step" in line]
    segments = log.count("task 0: Exited with exit code 3")
    assert segments >= 1 and len(stops) == 2 * segments, log[-4000:]
    assert "Terminated" not in log and "not requeued" not in log, log[-4000:]
    # the ranks read the profile the script was made with (its step timeout, checks, preset)
    with open(os.path.join(out, "config.yaml")) as f:
        assert yaml.safe_load(f)["launcher"]["profile"] == "slurm_local"


# submitit's job process installs its USR2 handler only after it has imported submitit and unpickled
# the job: a signal before that ends the task (seen here, "task 1: User defined signal 2"). Slurm
# sends it up to a minute early, so this route is tried with a 2-minute limit (the signal no sooner
# than 30 s in) and a run 3 times as long (~93 s of training on idle cores: more than the ~85 s a first
# segment can train)
SUBMITIT_STEPS = 3 * STEPS
SUBMITIT_RUN = [*RUN, "launcher.time_min=2", f"train.steps={SUBMITIT_STEPS}"]


@pytest.mark.alone
@pytest.mark.timeout(1700)
def test_a_time_limit_requeues_through_submitit_and_the_run_completes(cluster, tmp_path):
    out = str(tmp_path / "run")
    args = [*SUBMITIT_RUN, "launcher.wait=false", f"launcher.log_dir={tmp_path / 'logs'}", f"out_dir={out}"]
    run_train(args, timeout=120)
    with open(os.path.join(out, "slurm.json")) as f:
        job = str(json.load(f)["job_id"])
    states = follow_job(job, timeout=1500)
    assert sacct_fields(job, "State", want_state="COMPLETED") == ["COMPLETED"], states
    assert_resumed_to_completion(out, SUBMITIT_STEPS)


def test_a_rank_killed_outright_fails_the_job_once(cluster, tmp_path):
    """kill -9 of rank 1: srun ends the step, the script says so in one line and does not requeue."""
    job, out = submit_script(tmp_path, [*RUN[:-4], "train.steps=100000", "launcher=slurm_local"])
    killed: list[int] = []

    def kill_rank_1():
        if killed or not os.path.exists(os.path.join(out, "metrics.csv")) or len(steps(out)) < 3:
            return
        for pid in rank_pids(job, 1):
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

    states = follow_job(job, timeout=300, on_running=kill_rank_1)
    assert killed, "rank 1 never ran"
    log = job_log(tmp_path)
    assert sacct_fields(job, "State", want_state="FAILED") == ["FAILED"], (states, log[-4000:])
    assert "acco: a rank was ended by signal" in log and "not requeued" in log, log[-4000:]
    assert "PENDING" not in states[states.index("RUNNING") :], states  # never requeued
    assert "stopped by SIGUSR1" not in log


def rank_pids(job: str, rank: int) -> list[int]:
    """The Python processes of `job`'s task `rank` (every virtual node is this machine)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                env = dict(v.split(b"=", 1) for v in f.read().split(b"\0") if b"=" in v)
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd = f.read()
        except OSError:
            continue
        if (
            env.get(b"SLURM_JOB_ID") == job.encode()
            and env.get(b"SLURM_PROCID") == str(rank).encode()
            and b"train.py" in cmd
            and not cmd.startswith(b"srun")
        ):
            found.append(int(entry))
    return found
