"""launcher.max_requeues on the submitit path, on the local Slurm cluster of slurm/local-cluster/: a job
from acco's executor (acco/harness/slurm/dispatch.py make_executor) is requeued after each checkpoint signal
exactly max_requeues times, even above submitit's own default of 3; the profile's setup lines,
environment and extra #SBATCH options reach the job. (The generated sbatch scripts' own limit,
SLURM_RESTART_COUNT, is tested without a cluster in tests/integration/test_slurm_profile.py.)"""

from __future__ import annotations

import json
import time

import pytest

from tests.helpers.paths import ROOT
from tests.helpers.requeue_probe import RequeueProbe
from tests.helpers.slurm_cluster import job_state, output, run

pytestmark = pytest.mark.xdist_group("slurm")

MAX_REQUEUES = 4  # above submitit's default max_num_timeout (3), which the executor used to keep


def starts(notes) -> list[dict]:
    return [json.loads(line) for line in notes.read_text().splitlines()] if notes.exists() else []


@pytest.mark.integration
def test_submitit_job_requeued_max_requeues_times(cluster, tmp_path):
    from acco.config.experiments import compose
    from acco.harness.slurm.dispatch import make_executor

    cfg = compose(
        [
            "method=acco",
            "launcher=slurm_local",
            f"launcher.max_requeues={MAX_REQUEUES}",
            f"launcher.log_dir={tmp_path / 'logs'}",
            "launcher.setup=['echo acco-setup-ran']",
            # the job imports the probe from this checkout; ACCO_PROBE shows the profile's env arriving
            f"launcher.env=['PYTHONPATH={ROOT}','ACCO_PROBE=set']",
            "launcher.sbatch_options=['--comment=acco-requeue-probe']",
            f"out_dir={tmp_path / 'run'}",
        ]
    )
    shape = {"nodes": 1, "tasks_per_node": 1, "gpus_per_node": 0}
    notes = tmp_path / "starts.jsonl"
    job = make_executor(cfg, shape, "acco-requeue-probe").submit(RequeueProbe(str(notes)))
    text = job.paths.submission_file.read_text()
    assert "--comment=acco-requeue-probe" in text and "--open-mode=append" in text and "echo acco-setup-ran" in text

    signals, state, signalled = 0, "", 0.0
    deadline = time.monotonic() + 400
    try:
        while time.monotonic() < deadline:
            seen_state = job_state(job.job_id)
            if seen_state is None:  # no answer this time: ask again
                time.sleep(1)
                continue
            state, reason = seen_state
            if not state and job_state(job.job_id) == ("", ""):  # gone on a second look too
                break  # ended: not requeued any more
            # Slurm holds a requeued job ~2 min; released at once, it can be allocated before the node has
            # let go of the last start, and Slurm kills it ("Job credential revoked"): release after 5 s
            if state == "PENDING" and reason == "BeginTime" and time.monotonic() - signalled > 5:
                run(["scontrol", "update", f"JobId={job.job_id}", "StartTime=now"], timeout=30)
            elif state == "RUNNING" and len(starts(notes)) > signals:  # the probe is up: signal it
                proc = run(["scancel", "--signal=USR2", job.job_id], timeout=30)
                assert proc.returncode == 0, output(proc)
                signals, signalled = signals + 1, time.monotonic()
            time.sleep(0.5)
        else:
            pytest.fail(f"job {job.job_id} still {state} after {signals} signals: {starts(notes)}")
    finally:
        run(["scancel", job.job_id], timeout=30)

    seen = starts(notes)
    assert [s["restart"] for s in seen] == list(range(MAX_REQUEUES + 1)), seen
    assert signals == MAX_REQUEUES + 1 and {s["probe_env"] for s in seen} == {"set"}
    log = job.paths.stdout.read_text()  # appended to across the requeues (--open-mode=append)
    assert log.count("acco-setup-ran") == MAX_REQUEUES + 1, log[-3000:]


@pytest.mark.integration
def test_a_job_sbatch_refuses_is_one_line_and_leaves_no_folder(cluster, tmp_path):
    """The cluster saying no to the profile (here a GPU resource the local nodes lack) is one
    `error:` line with sbatch's reason, exit 2, and no run folder, not a submitit traceback."""
    from tests.helpers.runs import SMALL_LM, run_train

    out = tmp_path / "refused"
    proc = run_train(
        [
            "method=acco",
            "world_size=1",
            "train.steps=2",
            *SMALL_LM,
            "launcher=slurm_local",
            "launcher.sbatch_options=['--gres=gpu:1']",
            f"out_dir={out}",
        ],
        expect=2,
        timeout=300,
    )
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert errors[0].startswith("error: sbatch refused the job: ") and "gres" in errors[0], errors[0]
    assert not out.exists()
