"""The state of an experiment's runs: Slurm's view (sacct) beside the results folder's."""

from __future__ import annotations

import json
import os
import subprocess
from typing import Any

from ..run.files import read_summary


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
    slurm_file = os.path.join(out_dir, "slurm.json")
    if os.path.exists(slurm_file):
        with open(slurm_file) as f:
            job = json.load(f)
        info["job_id"] = job["job_id"]
        info["slurm_state"], info["exit_code"] = sacct_state(job["job_id"])
        if info["slurm_state"] not in ("COMPLETED", "RUNNING", "PENDING", "REQUEUED"):
            info["log_tail"] = log_tail(job.get("stderr"))
    summary = read_summary(out_dir)
    if summary:
        info["result"] = summary.get("status", "?")
        info["steps"] = summary.get("steps_completed")
    return info
