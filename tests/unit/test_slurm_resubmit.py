"""Submitting a run to Slurm again never loses it: a run whose job is still queued or running is
skipped (no second job writing into its folder), an unfinished run continues from its newest
checkpoint, and only overwrite=true starts over (experiments/submit.py, train.py launcher=slurm,
reproduce.py --launcher slurm). The rules in-process; then the real thing on the local cluster:
submit, checkpoint, submit while it runs, scancel, submit again.

Here the rules in-process; the test on the local cluster is in
tests/slurm/test_slurm_resubmit.py."""

from __future__ import annotations

import json
import os
from types import SimpleNamespace

from acco.harness.entry import resubmission
from acco.harness.slurm import status


def _record(out_dir, job_id="77_1"):
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "slurm.json"), "w") as f:
        json.dump({"job_id": job_id, "stdout": f"/logs/{job_id}/{job_id}_0_log.out", "nodes": 1}, f)


def _summary(out_dir, state):
    with open(os.path.join(out_dir, "summary.json"), "w") as f:
        json.dump({"status": state}, f)


def _cfg(out_dir, **kw):
    return {"out_dir": str(out_dir), "overwrite": False, "resume": None, **kw}


def test_a_run_whose_job_is_queued_or_running_is_skipped_whatever_overwrite_says(tmp_path, monkeypatch):
    out = tmp_path / "run"
    _record(out)
    for state in ("PENDING", "RUNNING", "REQUEUED", "COMPLETING"):
        monkeypatch.setattr(status, "squeue_state", lambda job, s=state: s)
        for overwrite in (False, True):
            plan = resubmission(_cfg(out, overwrite=overwrite))
            assert plan.skip == "running" and plan.job["job_id"] == "77_1"
            assert plan.line() == f"skip (Slurm job 77_1 {state}): {out}"


def test_an_unfinished_run_resumes_a_completed_one_is_skipped_overwrite_starts_over(tmp_path, monkeypatch):
    out = tmp_path / "run"
    _record(out)
    monkeypatch.setattr(status, "squeue_state", lambda job: "CANCELLED")
    plan = resubmission(_cfg(out))
    assert plan.skip is None and plan.cfg["resume"] == "auto"  # cancelled, failed, out of requeues
    assert resubmission(_cfg(out, resume="/some/ckpt")).cfg["resume"] == "/some/ckpt"  # as asked
    assert resubmission(_cfg(out, overwrite=True)).cfg["resume"] is None  # starting over
    _summary(out, "completed")
    plan = resubmission(_cfg(out))
    assert plan.skip == "completed" and plan.line() == f"skip (completed): {out}"
    assert resubmission(_cfg(out, overwrite=True)).skip is None
    _summary(out, "failed")
    assert resubmission(_cfg(out)).cfg["resume"] == "auto"
    # never submitted (no slurm.json): resumes what a local run left, if anything
    assert resubmission(_cfg(tmp_path / "new")).cfg["resume"] == "auto"


def test_the_controller_state_wins_over_a_lagging_accounting_record(monkeypatch):
    monkeypatch.setattr(status, "squeue_state", lambda job: "CANCELLED")
    monkeypatch.setattr(status, "sacct_state", lambda job: ("RUNNING", "0:0"))
    assert status.job_state("5") == ("CANCELLED", "")
    monkeypatch.setattr(status, "squeue_state", lambda job: None)  # the controller forgot the job
    assert status.job_state("5") == ("RUNNING", "0:0")


def test_the_job_finds_its_checkpoint_itself_when_it_starts_and_when_it_is_requeued(tmp_path, monkeypatch):
    """The folder is prepared to resume (its checkpoints kept), and the job is sent resume=auto without
    the checkpoint resolved at submission: a requeued job would otherwise start from that one (or,
    with none then, from scratch) instead of from the newest."""
    from acco.harness.commands import submit as submit_py  # experiments/submit.py's module

    sent, prepared = [], []

    def fake_submit(cfgs, worlds, prepare):
        for cfg in cfgs:
            prepare(cfg)
            sent.append(cfg)
        return [SimpleNamespace(job_id=f"9_{i}") for i in range(len(cfgs))]

    monkeypatch.setattr("acco.harness.slurm.dispatch.submit", fake_submit)
    monkeypatch.setattr(submit_py, "prepare_out_dir", lambda out_dir, cfg: prepared.append(cfg.get("_resume")))
    out = str(tmp_path / "run")
    cfg = _cfg(out, resume="auto", _resume={"dir": f"{out}/checkpoints/step_00000004", "step": 4})
    planned = [submit_py.Planned("fig6/run", resubmission(cfg)._replace(cfg=cfg), 1)]
    submit_py.submit_planned(planned, None)
    assert prepared == [{"dir": f"{out}/checkpoints/step_00000004", "step": 4}]  # nothing deleted
    assert sent[0]["resume"] == "auto" and "_resume" not in sent[0]


def test_a_completed_run_whose_job_is_still_completing_is_complete_not_running(tmp_path, monkeypatch):
    out = tmp_path / "run"
    _record(out)
    _summary(out, "completed")
    monkeypatch.setattr(status, "squeue_state", lambda job: "COMPLETING")  # the tasks ended, Slurm cleans up
    assert resubmission(_cfg(out)).skip == "completed"
    monkeypatch.setattr(status, "squeue_state", lambda job: "RUNNING")  # a requeued job: still its folder's
    assert resubmission(_cfg(out)).skip == "running"


def test_a_wait_ends_when_slurm_says_the_job_has_ended_not_when_its_tasks_return(monkeypatch):
    """submitit's results() come back while srun winds down (the job still RUNNING): a submission
    right after `--wait` returned skipped a completed run as running (CI, 2026-12-05). The wait
    goes on until Slurm reports the job out of its active states, and gives up after its limit."""
    seen = iter(["RUNNING", "RUNNING", "COMPLETING", None])
    monkeypatch.setattr(status, "squeue_state", lambda job: next(seen))
    monkeypatch.setattr(status, "sacct_state", lambda job: ("COMPLETED", "0:0"))
    assert status.wait_until_ended("504_1", poll_s=0.0) == "COMPLETED"
    monkeypatch.setattr(status, "squeue_state", lambda job: "RUNNING")
    assert status.wait_until_ended("504_1", limit_s=0.05, poll_s=0.01) == "RUNNING"
