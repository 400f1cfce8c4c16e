"""The state of an experiment's runs: Slurm's view (squeue, sacct) beside the results folder's, and
whether a run's job is still queued or running (then nothing may be submitted into its folder)."""

from __future__ import annotations

import json
import os
import subprocess
from typing import Any

from ...runtime.summary import read_summary


def sacct_state(job_id: str) -> tuple[str, str]:
    """(State, ExitCode) of a job from Slurm accounting, or ('UNKNOWN', '')."""
    try:
        out = subprocess.run(
            ["sacct", "-j", str(job_id), "-X", "-n", "-P", "-o", "JobID,State,ExitCode"],
            capture_output=True,
            text=True,
            timeout=20,
        ).stdout
    except (subprocess.SubprocessError, OSError):
        return "UNKNOWN", ""
    for line in out.splitlines():
        parts = line.split("|")
        if len(parts) == 3 and parts[0] == str(job_id):
            return parts[1].split()[0], parts[2]
    return "UNKNOWN", ""


# a job in one of these states still holds (or will hold) its run folder: submitting the run again
# would start a second job writing into it
ACTIVE_STATES = {
    "PENDING",
    "CONFIGURING",
    "RUNNING",
    "COMPLETING",
    "REQUEUED",
    "REQUEUE_HOLD",
    "REQUEUE_FED",
    "RESIZING",
    "SIGNALING",
    "STAGE_OUT",
    "SUSPENDED",
    "STOPPED",
}


def squeue_state(job_id: str) -> str | None:
    """The controller's own state of a job (up to date; sacct's record can lag behind it), or None
    when the controller no longer knows the job or cannot be asked."""
    try:
        proc = subprocess.run(
            ["squeue", "-h", "-j", str(job_id), "-t", "all", "-o", "%T"], capture_output=True, text=True, timeout=20
        )
    except (subprocess.SubprocessError, OSError):
        return None
    states = [line.strip() for line in proc.stdout.splitlines() if line.strip()]
    return states[0] if proc.returncode == 0 and states else None


def job_state(job_id: str) -> tuple[str, str]:
    """(State, ExitCode): squeue's state when the controller knows the job, else sacct's."""
    live = squeue_state(job_id)
    state, code = sacct_state(job_id)
    return (live, code if state == live else "") if live else (state, code)


def wait_until_ended(job_id: str, limit_s: float = 60.0, poll_s: float = 1.0) -> str:
    """Wait (at most `limit_s`) for a job to leave Slurm's active states; its last state seen.
    submitit returns a job's results once every task has written them, while srun and the batch
    step still wind down: a submission right after a wait that stopped there would find the job
    RUNNING and skip a run that has completed."""
    import time

    deadline = time.monotonic() + limit_s
    while True:
        state = squeue_state(job_id) or sacct_state(job_id)[0]
        if state not in ACTIVE_STATES or time.monotonic() >= deadline:
            return state
        time.sleep(poll_s)


def recorded_job(out_dir: str) -> dict | None:
    """What slurm.json says of the run's last submitted job (job_id, log paths, shape), or None."""
    try:
        with open(os.path.join(out_dir, "slurm.json")) as f:
            job = json.load(f)
    except (OSError, ValueError):
        return None
    return job if isinstance(job, dict) and job.get("job_id") else None


def active_job(out_dir: str) -> tuple[dict, str] | None:
    """(slurm.json's record, state) when the run's job is still queued or running, else None."""
    job = recorded_job(out_dir)
    if job is None:
        return None
    state = squeue_state(str(job["job_id"])) or sacct_state(str(job["job_id"]))[0]
    return (job, state) if state in ACTIVE_STATES else None


def log_tail(path: str | None, lines: int = 8) -> list[str]:
    if not path or not os.path.exists(path):
        return []
    with open(path, errors="replace") as f:
        return [line.rstrip() for line in f.readlines()[-lines:]]


def run_status(out_dir: str) -> dict:
    info: dict[str, Any] = {
        "out_dir": out_dir,
        "job_id": None,
        "slurm_state": "-",
        "exit_code": "",
        "result": "missing",
        "steps": None,
        "log_tail": [],
    }
    job = recorded_job(out_dir)
    summary = read_summary(out_dir)
    if job is None and summary and summary.slurm_job_id:  # a generated sbatch script's job: no slurm.json
        job = {"job_id": summary.slurm_job_id}
    if job is not None:
        info["job_id"] = job["job_id"]
        info["slurm_state"], info["exit_code"] = job_state(str(job["job_id"]))
        if info["slurm_state"] != "COMPLETED" and info["slurm_state"] not in ACTIVE_STATES:
            info["log_tail"] = log_tail(job.get("stderr"))
    if summary:
        info["result"] = summary.status or "?"
        info["steps"] = summary.steps_completed
    return info
