"""A sweep's preview, `experiments/train.py -m <overrides> --plan` (acco/harness/sweep_preview.py):
every job's folder, complete (skipped) or to train, and an ETA, for a local sweep and a Slurm one
(the job arrays it would submit); exit 0, no worker started, nothing submitted, nothing created
under results_root. `-m ... --cfg job` is one line pointing at it (before: a Hydra traceback)."""

from __future__ import annotations

import json
import os

import pytest

from tests.helpers.runs import run_train

pytestmark = pytest.mark.integration  # every test here starts a process


def every_path(root) -> set[str]:
    return {os.path.relpath(os.path.join(d, n), root) for d, dirs, files in os.walk(root) for n in dirs + files}


def results_with_a_complete_run(tmp_path):
    """results_root holding fig5's ddp_seed=0 as a completed run (its summary.json)."""
    root = tmp_path / "results"
    done = root / "cpu" / "fig5" / "ddp_seed=0"
    done.mkdir(parents=True)
    (done / "summary.json").write_text(json.dumps({"status": "completed", "total_wall_time_s": 30.0}))
    return root


def plan_line(stdout: str, folder: str) -> str:
    """The plan's line that ends the folder's name (a long name wraps in its column)."""
    (line,) = [ln for ln in stdout.splitlines() if ln.strip().split("  ")[0].endswith(folder)]
    return line


@pytest.mark.parametrize("launcher", ["local", "slurm_local"])
def test_a_sweep_preview_lists_every_job_and_runs_nothing(tmp_path, launcher):
    root = results_with_a_complete_run(tmp_path)
    before = every_path(root)
    args = ["-m", "experiment=fig5/cpu", "method=ddp", "seed=0,1", f"results_root={root}", f"launcher={launcher}"]
    proc = run_train([*args, "--plan"], timeout=300)
    out = proc.stdout
    assert "preview of a sweep of 2 job(s)" in out and "Traceback" not in proc.stderr
    assert "plan: 2 runs, 1 complete (skipped), 1 to train, ETA ~" in out
    assert "complete: skipped" in plan_line(out, "ddp_seed=0")
    assert "to train" in plan_line(out, "ddp_seed=1")
    assert every_path(root) == before  # no run folder, no Hydra sweep folder, no lock
    assert "local worker" not in proc.stderr  # no run started (run_local's line)
    assert not any(line.startswith("submitted ") for line in out.splitlines())  # no job (submit_planned's)
    if launcher == "slurm_local":  # what would be submitted, without Slurm here
        assert "Slurm: would submit 1 run(s) as 1 job array(s)" in out
        assert "job array 1: 1 run(s), 1 node(s) x 2 task(s)" in out
    assert max(len(line) for line in out.splitlines()) <= 120


def test_a_sweep_with_cfg_is_one_line_pointing_at_the_preview(tmp_path):
    proc = run_train(["-m", "experiment=fig5/cpu", "method=ddp,acco", "--cfg", "job"], expect=2, timeout=120)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "--plan" in lines[0], proc.stderr
