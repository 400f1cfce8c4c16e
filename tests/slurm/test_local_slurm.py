"""The local Slurm cluster of slurm/local-cluster/ (start / stop / status) on this machine.

A session-scoped fixture (tests/helpers/slurm_cluster.py) runs `start` (which installs the Debian
packages on first use, so this needs root). The tests are skipped only when the packages cannot be
installed (`start` exits 3: not root with the packages missing, no apt-get, apt unreachable); any
other failure of `start` is a test failure. At the end the cluster is stopped again, unless it was
already running before the tests (a developer's cluster is left as it was). About 10 s with the
packages installed, ~35 s on a machine without them.
"""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from tests.helpers.slurm_cluster import output, run, sacct_fields, script

# every test here starts processes; the Slurm tests share one pytest-xdist worker (tests/conftest.py)
pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("slurm")]


def started(cmd: str = "start", timeout: float = 900) -> subprocess.CompletedProcess:
    proc = script(cmd, timeout=timeout)
    assert proc.returncode == 0, f"slurm/local-cluster/{cmd} failed: {output(proc)}"
    return proc


def idle_nodes() -> set[str]:
    proc = run(["sinfo", "-h", "-N", "-o", "%N %T"], timeout=20)
    assert proc.returncode == 0, output(proc)
    return {line.split()[0] for line in proc.stdout.splitlines() if line.split()[1:] == ["idle"]}


def wait_idle(n: int = 4, timeout: float = 30) -> set[str]:
    deadline = time.monotonic() + timeout
    while len(nodes := idle_nodes()) < n and time.monotonic() < deadline:
        time.sleep(0.2)
    return nodes


def sacct_state(job_id: str, want: str) -> tuple[str, str]:
    return tuple(sacct_fields(job_id, "State,ExitCode", want))


def sbatch_wait(args: list[str], cwd: str, timeout: float = 120) -> tuple[subprocess.CompletedProcess, str]:
    proc = run(["sbatch", "--wait", "--parsable", f"--chdir={cwd}", *args], timeout=timeout)
    job_id = proc.stdout.strip().splitlines()[0].split(";")[0] if proc.stdout.strip() else ""
    assert job_id.isdigit(), f"sbatch gave no job id: {output(proc)}"
    return proc, job_id


def test_four_idle_nodes(cluster):
    nodes = wait_idle(4)
    assert len(nodes) >= 4, f"idle nodes: {sorted(nodes)}"
    assert {"n1", "n2", "n3", "n4"} <= nodes


def test_two_node_job_ranks_on_two_virtual_nodes(cluster, tmp_path):
    job = tmp_path / "job.sh"
    job.write_text("#!/bin/bash\nsrun bash -c 'echo RANK $SLURM_PROCID $SLURM_NODEID $SLURMD_NODENAME'\n")
    out = tmp_path / "job.out"
    proc, job_id = sbatch_wait(["--nodes=2", "--ntasks-per-node=1", f"--output={out}", str(job)], cwd=str(tmp_path))
    assert proc.returncode == 0, output(proc)
    rows = sorted(line.split()[1:] for line in out.read_text().splitlines() if line.startswith("RANK "))
    assert [r[:2] for r in rows] == [["0", "0"], ["1", "1"]], out.read_text()
    names = [r[2] for r in rows]
    assert len(set(names)) == 2 and set(names) <= {"n1", "n2", "n3", "n4"}, names
    assert sacct_state(job_id, "COMPLETED") == ("COMPLETED", "0:0")


def test_failing_job_is_failed_in_accounting(cluster, tmp_path):
    proc, job_id = sbatch_wait([f"--output={tmp_path / 'fail.out'}", "--wrap", "exit 3"], cwd=str(tmp_path))
    assert proc.returncode == 3, output(proc)
    assert sacct_state(job_id, "FAILED") == ("FAILED", "3:0")


def test_start_while_running_only_reports(cluster):
    t0 = time.monotonic()
    proc = started()
    assert "already running" in proc.stdout
    assert time.monotonic() - t0 < 30
    assert script("status", timeout=60).returncode == 0


def test_stop_then_start_again(cluster, tmp_path):
    for _ in range(2):  # stop is idempotent
        proc = script("stop", timeout=120)
        assert proc.returncode == 0, output(proc)
    status = script("status", timeout=60)
    assert status.returncode != 0 and "running (pid" not in status.stdout, status.stdout
    pid_dir = os.path.join(os.environ.get("ACCO_SLURM_DIR", "/tmp/acco-slurm"), "pids")
    assert not os.path.isdir(pid_dir) or not os.listdir(pid_dir)

    started()
    assert len(wait_idle(4)) >= 4
    proc, job_id = sbatch_wait([f"--output={tmp_path / 'again.out'}", "--wrap", "true"], cwd=str(tmp_path))
    assert proc.returncode == 0, output(proc)
    assert sacct_state(job_id, "COMPLETED")[0] == "COMPLETED"
