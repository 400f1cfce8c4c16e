"""The local Slurm cluster of slurm/local-cluster/ as a pytest fixture, for test modules that submit
real jobs. `cluster` (tests/conftest.py registers it for every module) is a session-scoped fixture
that runs `start` (installing the Debian packages on first use, so it needs root), skips the module
only when the packages cannot be installed (`start` exits 3), and stops the cluster at the end
unless it was already running before (a developer's cluster is left as it was)."""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from .paths import ROOT

SCRIPTS = os.path.join(ROOT, "slurm", "local-cluster")
CANNOT_INSTALL = 3  # start's exit code when the packages are missing and cannot be installed


def script(name: str, timeout: float = 120) -> subprocess.CompletedProcess:
    # through bash: works even if the executable bit got lost in a copy
    return subprocess.run(
        ["bash", os.path.join(SCRIPTS, name)], capture_output=True, text=True, timeout=timeout, env=os.environ.copy()
    )


def run(cmd: list[str], timeout: float = 60, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)


def output(proc: subprocess.CompletedProcess) -> str:
    return f"exit {proc.returncode}\n--- stdout ---\n{proc.stdout[-4000:]}\n--- stderr ---\n{proc.stderr[-4000:]}"


def sacct_fields(
    job_id: str, fields: str = "State,ExitCode", want_state: str = "COMPLETED", timeout: float = 30
) -> list[str]:
    """The job allocation's accounting fields, polled until its State is `want_state` (the record
    lands in slurmdbd a moment after `sbatch --wait` returns)."""
    deadline = time.monotonic() + timeout
    values: list[str] = []
    while time.monotonic() < deadline:
        proc = run(["sacct", "-j", job_id, "-X", "-n", "-P", "-o", fields], timeout=20)
        lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
        if proc.returncode == 0 and lines:
            values = lines[-1].split("|")
            if "State" not in fields.split(",") or values[fields.split(",").index("State")] == want_state:
                break
        time.sleep(0.3)
    return values


@pytest.fixture(scope="session")
def cluster():
    before = script("status", timeout=60)
    # a developer's cluster (any daemon this tool started) is left running afterwards
    was_running = before.returncode == 0 or "running (pid" in before.stdout
    t0 = time.monotonic()
    proc = script("start", timeout=900)
    if proc.returncode == CANNOT_INSTALL:
        pytest.skip(
            "the Slurm packages (slurm-wlm munge slurmdbd mariadb-server) cannot be installed "
            "on this machine: " + (proc.stderr.strip().splitlines() or ["?"])[-1]
        )
    assert proc.returncode == 0, f"slurm/local-cluster/start failed: {output(proc)}"
    yield {"was_running": was_running, "start_s": time.monotonic() - t0}
    if was_running:
        script("start", timeout=300)  # as it was: running (a no-op when it is)
    else:
        proc = script("stop", timeout=120)
        assert proc.returncode == 0, f"slurm/local-cluster/stop failed: {output(proc)}"


def job_state(job_id: str) -> tuple[str, str] | None:
    """(state, reason) from squeue; ("", "") once the job has left the queue; None when squeue did not
    answer (a busy controller times out: CI once read that as the job's end after 2 of 4 requeues)."""
    proc = run(["squeue", "-h", "-j", job_id, "-o", "%T|%r"], timeout=30)
    if proc.returncode != 0:
        return ("", "") if "Invalid job id" in proc.stderr else None
    lines = proc.stdout.strip().splitlines()
    state, _, reason = (lines[-1] if lines else "").partition("|")
    return state, reason


def follow_job(job_id: str, timeout: float, on_running=None) -> list[str]:
    """Wait until the job has left the queue, releasing each requeued start at once (Slurm holds a
    requeued job ~2 min, reason BeginTime; released 5 s after it was requeued: released at once, it
    can be allocated before the node has let go of the last start, and Slurm kills it: "Job
    credential revoked"). `on_running()` is called while it runs. Returns the states seen, in
    order, each once per change."""
    seen: list[str] = []
    held_since = None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state_reason = job_state(job_id)
        if state_reason is None:  # no answer this time: ask again
            time.sleep(1)
            continue
        state, reason = state_reason
        if not state and job_state(job_id) == ("", ""):  # gone on a second look too
            return seen
        if not seen or seen[-1] != state:
            seen.append(state)
        if state == "PENDING" and reason == "BeginTime":
            held_since = held_since or time.monotonic()
            if time.monotonic() - held_since > 5:
                run(["scontrol", "update", f"JobId={job_id}", "StartTime=now"], timeout=30)
        else:
            held_since = None
        if state == "RUNNING" and on_running is not None:
            on_running()
        time.sleep(0.5)
    run(["scancel", job_id], timeout=30)
    raise AssertionError(f"job {job_id} still in the queue after {timeout:.0f} s (states {seen})")
