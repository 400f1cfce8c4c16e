"""Submitting a run to Slurm again never loses it: a run whose job is still queued or running is
skipped (no second job writing into its folder), an unfinished run continues from its newest
checkpoint, and only overwrite=true starts over (experiments/submit.py, train.py launcher=slurm,
reproduce.py --launcher slurm). The rules in-process; then the real thing on the local cluster:
submit, checkpoint, submit while it runs, scancel, submit again.

Here the test on the local cluster; the rules in-process are in
tests/unit/test_slurm_resubmit.py."""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from acco.harness.slurm import status
from tests.helpers.runs import SMALL_LM
from tests.helpers.runs import run_script as dispatch_script

# -- on the local Slurm cluster -------------------------------------------------------------------

# one run of fig6 (acco, seed 0) on one rank; checkpoints every 2 steps; its folder named here (the
# small model's overrides would make the experiment's folder name too long)
RUN = [
    "experiment=fig6/cpu",
    "experiment.runs.0.method=[acco]",
    "experiment.runs.0.seed=[0]",
    "world_size=1",
    *SMALL_LM,
    "train.steps=12",
    "train.checkpoint_every=2",
    "dist.step_timeout_s=600",  # the hung rank's watchdog (2x) stays out of the test's way
    "launcher=slurm_local",
]
# the first job hangs after step 5 (checkpoints at 2 and 4): it stays RUNNING until cancelled
HANG = ["fault.hang_rank=0", "fault.at_step=5"]


def script(name, args, timeout=300):
    return dispatch_script(name, args, timeout=timeout)


def wait_until(what, check, timeout=180.0):
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(1.0)


def complete_checkpoints(out) -> list[int]:
    folder = out / "checkpoints"
    if not folder.is_dir():
        return []
    return sorted(
        int(p.name[5:]) for p in folder.iterdir() if p.name.startswith("step_") and (p / "manifest.json").exists()
    )


@pytest.mark.integration
@pytest.mark.xdist_group("slurm")
def test_resubmit_after_scancel_resumes_and_a_submit_while_running_starts_no_second_job(cluster, tmp_path):
    out = tmp_path / "run"
    args = [*RUN, f"results_root={tmp_path}", f"out_dir={out}"]
    first = script("submit.py", [*args, *HANG])
    assert first.returncode == 0, first.stderr[-3000:]
    (job_id,) = [line.split()[1].rstrip(":") for line in first.stdout.splitlines() if line.startswith("submitted")]
    try:
        wait_until("the first checkpoints", lambda: len(complete_checkpoints(out)) >= 2)
        assert status.active_job(str(out)) is not None

        # the same command while the job runs: one line, no second job
        again = script("submit.py", [*args, *HANG])
        assert again.returncode == 0, again.stderr[-3000:]
        assert f"skip (Slurm job {job_id} RUNNING): {out}" in again.stdout, again.stdout
        assert "submitted" not in again.stdout
        single = script("train.py", [*args, "method=acco", "seed=0"])  # one run through train.py: the same rule
        assert single.returncode == 0 and f"skip (Slurm job {job_id} RUNNING)" in single.stderr, single.stderr[-3000:]
        assert "submitted" not in single.stderr
        with open(out / "slurm.json") as f:
            assert json.load(f)["job_id"] == job_id
        shown = script("status.py", args)
        assert f"{job_id}" in shown.stdout, shown.stdout
        assert shown.stdout.strip().splitlines()[-1] == "1 runs; Slurm: 1 RUNNING; results: 1 missing", shown.stdout
    finally:
        subprocess.run(["scancel", job_id], capture_output=True, timeout=30)
    wait_until("the cancelled job to end", lambda: status.active_job(str(out)) is None)
    newest = complete_checkpoints(out)[-1]
    kept = (out / "metrics.csv").read_text().splitlines()[: newest + 1]  # header + steps up to it

    # the same command after the cancel (the fault left out): it continues from the checkpoint
    resumed = script("submit.py", [*args, "--wait"])
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    assert f"(resuming from step {newest})" in resumed.stdout, resumed.stdout
    with open(out / "summary.json") as f:
        summary = json.load(f)
    assert summary["status"] == "completed" and summary["resumed_from_step"] == newest
    assert summary["steps_completed"] == 12
    rows = (out / "metrics.csv").read_text().splitlines()
    assert rows[: newest + 1] == kept and [int(r.split(",")[0]) for r in rows[1:]] == list(range(1, 13))
    done = script("submit.py", args)
    assert done.returncode == 0 and "are complete" in done.stdout, done.stdout
