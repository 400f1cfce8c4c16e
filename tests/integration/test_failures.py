"""Failures end the whole run: a rank killed with SIGKILL or hung outside any collective takes every
rank down within the issue's 60 s (no worker left behind), summary.json names the rank and the
reason, metrics.csv keeps every step completed before; a NaN in the loss stops the run at that
step and leaves the last good checkpoint."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from acco.train.checkpoint import verify
from tests.helpers.paths import ROOT, TRAIN
from tests.helpers.runs import SMALL_LM, run_train

BASE = [*SMALL_LM, "world_size=2", "train.deterministic=true", "train.steps=12", "train.trace=false"]


def summary(out) -> dict:
    with open(os.path.join(out, "summary.json")) as f:
        return json.load(f)


def metric_steps(out) -> list[int]:
    lines = (out / "metrics.csv").read_text().splitlines()[1:]
    return [int(line.split(",")[0]) for line in lines]


def worker_pids(parent: int) -> set[int]:
    try:
        with open(f"/proc/{parent}/task/{parent}/children") as f:
            return {int(p) for p in f.read().split()}
    except OSError:
        return set()


def run_to_failure(args: list[str], out, fault_step: int) -> tuple[subprocess.CompletedProcess, float, set]:
    """Run the launcher; returns (result, seconds from the fault step's metrics row to the
    launcher's exit, every child process seen)."""
    proc = subprocess.Popen(
        [sys.executable, TRAIN, *args], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    seen, fault_at = set(), None
    metrics_csv = out / "metrics.csv"
    deadline = time.time() + 300
    while proc.poll() is None and time.time() < deadline:
        seen |= worker_pids(proc.pid)
        if fault_at is None and metrics_csv.exists() and len(metrics_csv.read_text().splitlines()) > fault_step:
            fault_at = time.monotonic()
        time.sleep(0.1)
    _, err = proc.communicate(timeout=max(1, deadline - time.time()))
    ended = time.monotonic() - (fault_at or time.monotonic())
    return subprocess.CompletedProcess(proc.args, proc.returncode, "", err), ended, seen


def assert_no_process_left(pids: set[int]) -> None:
    time.sleep(0.5)
    alive = [p for p in pids if os.path.exists(f"/proc/{p}") and "zombie" not in _state(p)]
    assert not alive, f"processes left behind: {alive}"


def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/status") as f:
            return next((line for line in f if line.startswith("State:")), "").lower()
    except OSError:
        return "zombie"


@pytest.mark.integration
def test_kill_9_of_one_rank_ends_every_rank(tmp_path):
    out = tmp_path / "run"
    proc, ended_s, pids = run_to_failure(
        ["method=acco", *BASE, "fault.kill_rank=1", "fault.at_step=4", f"out_dir={out}"], out, fault_step=4
    )
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "rank 1 was killed by SIGKILL" in proc.stderr
    s = summary(out)
    assert s["status"] == "failed" and s["failed_rank"] == 1 and "SIGKILL" in s["error"]
    assert s["steps_completed"] == 4 and metric_steps(out) == [1, 2, 3, 4]
    assert ended_s < 60
    assert len(pids) >= 2
    assert_no_process_left(pids)


@pytest.mark.integration
def test_hung_rank_ends_every_rank(tmp_path):
    """Rank 1 stops outside any collective (PyTorch DDP: its peer waits inside DDP's all-reduce):
    the peer's training collective times out, the launcher stops the hung rank."""
    out = tmp_path / "run"
    proc, ended_s, pids = run_to_failure(
        ["method=ddp", *BASE, "fault.hang_rank=1", "fault.at_step=3", "dist.step_timeout_s=10", f"out_dir={out}"],
        out,
        fault_step=3,
    )
    assert proc.returncode == 1, proc.stderr[-3000:]
    s = summary(out)
    assert s["status"] == "failed" and s["failed_rank"] == 1 and "rank 1 hung" in s["error"], s
    assert any("rank 0" in e for e in s["rank_errors"])  # the peer's own account: its timeout
    assert s["steps_completed"] == 3 and metric_steps(out) == [1, 2, 3]
    assert ended_s < 60
    assert_no_process_left(pids)


@pytest.mark.integration
def test_nan_loss_stops_at_that_step_and_keeps_the_last_good_checkpoint(tmp_path):
    out = tmp_path / "run"
    proc = run_train(
        ["method=acco", *BASE, "train.checkpoint_every=2", "fault.nan_at_step=5", f"out_dir={out}"], expect=1
    )
    s = summary(out)
    assert s["status"] == "failed" and "non-finite" in s["error"] and "at step 5" in s["error"], s
    assert "non-finite" in proc.stderr
    assert metric_steps(out) == [1, 2, 3, 4, 5]
    ckpts = sorted(os.listdir(out / "checkpoints"))
    assert ckpts == ["step_00000002", "step_00000004"]  # nothing written at or after the bad step
    assert s["last_checkpoint"].endswith("step_00000004")
    assert verify(s["last_checkpoint"], world_size=2)["step"] == 4


def test_watchdog_ends_a_rank_stuck_outside_any_collective():
    """The rank's own watchdog (what ends a hung rank when no launcher of ours watches it): it
    fires when the progress value stops changing, not while it changes or while paused."""
    import threading

    from acco.runtime.watchdog import Watchdog

    fired = threading.Event()
    reasons = []

    def stall(reason):
        reasons.append(reason)
        fired.set()

    counter = [0]
    moving = Watchdog(lambda: counter[0], 0.3, stall, poll_s=0.02).start()
    for _ in range(40):  # progress keeps coming: no stall
        counter[0] += 1
        time.sleep(0.02)
    moving.stop()
    paused = Watchdog(lambda: 0, 0.3, stall, poll_s=0.02).start()
    with paused.paused():
        time.sleep(0.8)
    paused.stop()
    assert not fired.is_set()
    Watchdog(lambda: 0, 0.3, stall, poll_s=0.02).start()
    assert fired.wait(30)
    assert "made no training progress for 0.3 s" in reasons[0]


# -- NCCL's watchdog abort (issue 30 point 4): read as a peer timeout, not as the failed rank -----
def _aborts_after_a_while():  # NCCL's watchdog after dist.step_timeout_s: SIGABRT
    import faulthandler

    faulthandler.disable()  # quiet: the abort is expected
    time.sleep(0.3)
    os.abort()


def _hangs():
    time.sleep(120)


def _fails_on_its_own(out_dir):
    from acco.runtime.files import write_failure

    write_failure(out_dir, 1, "rank 1: RuntimeError: CUDA error: an illegal memory access was encountered")
    sys.exit(1)


def _supervised(targets) -> object:
    import multiprocessing

    from acco.harness.run.supervise import supervise

    ctx = multiprocessing.get_context("fork")
    processes = [ctx.Process(target=fn, args=args) for fn, args in targets]
    for p in processes:
        p.start()
    return supervise(processes, grace_s=1.0, poll_s=0.05)


def test_a_watchdog_aborted_rank_is_a_peer_timeout_not_the_failed_rank(tmp_path):
    """Real processes ended as NCCL ends them: rank 0 SIGABRTed by the watchdog while waiting for
    rank 1. The one to blame is rank 1, whether it hung (stopped by the launcher) or failed with
    its own report; only when every failed rank was aborted does the watchdog take the blame."""
    from acco.harness.run.supervise import diagnose, record_failure

    out = str(tmp_path)
    hung = _supervised([(_aborts_after_a_while, ()), (_hangs, ())])
    assert hung.exitcodes[0] == -6 and hung.stuck == [1]
    rank, why, _ = diagnose(hung, out, 10)
    assert rank == 1 and "rank 1 hung" in why, why

    failed = _supervised([(_aborts_after_a_while, ()), (_fails_on_its_own, (out,))])
    assert failed.exitcodes == [-6, 1] and not failed.stuck
    cfg = {"method": {"name": "acco"}, "dist": {"step_timeout_s": 10}, "train": {"steps": 5}}
    why = record_failure(out, cfg, 2, failed)
    s = summary(out)
    assert s["failed_rank"] == 1 and "illegal memory access" in s["error"], s
    assert "rank(s) 0 waited for it" in why and "SIGABRT" in why

    both = _supervised([(_aborts_after_a_while, ()), (_aborts_after_a_while, ())])
    rank, why, _ = diagnose(both, str(tmp_path / "no_reports"), 10)  # no rank's own report
    assert "NCCL's watchdog aborted rank(s) 0, 1" in why and "dist.step_timeout_s=10" in why, why


def test_other_signals_still_name_the_killed_rank(tmp_path):
    """SIGKILL (the OOM killer, a test's kill -9) beside a watchdog abort: the killed rank failed."""
    from acco.harness.run.supervise import Outcome, diagnose, is_peer_error

    rank, why, _ = diagnose(Outcome([-6, -9], first_failed=0), str(tmp_path), 10)
    assert rank == 1 and "killed by SIGKILL" in why
    # a rank's own report of NCCL's watchdog timeout (blocking wait raised it) is a peer's error
    assert is_peer_error("rank 0: DistBackendError: [PG 1] Watchdog caught collective operation timeout")
