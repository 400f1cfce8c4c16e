"""The train command in two calls (issue 52): `prepare(cfg) -> Run` checks the composed config and
decides how the run starts, writing nothing in the run folder; `launch(run)` starts it. Bad input
is one line and exit 2 from prepare, before any worker starts."""

from __future__ import annotations

import dataclasses
import json
import os

import pytest
from omegaconf import OmegaConf

from acco.config.experiments import compose
from acco.harness import entry
from acco.harness.entry import launch, prepare
from acco.harness.slurm import status

EXTERNAL = {"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "2"}
RUN = ["method=acco", "world_size=2", "train.steps=3"]


def composed(tmp_path, *extra: str) -> tuple[dict, list[str]]:
    overrides = [*RUN, *extra, f"out_dir={tmp_path / 'run'}", f"results_root={tmp_path}"]
    return compose(overrides), overrides


def test_a_local_run_is_prepared_checked_and_typed_with_nothing_written(tmp_path):
    run = prepare(*composed(tmp_path))
    assert (run.how, run.world, run.out_dir) == ("local", 2, str(tmp_path / "run"))
    assert run.view is not None and OmegaConf.is_readonly(run.view) and run.view.method.name == "acco"
    assert run.view.world_size == 2 and run.view._resume is None and run.env is None
    assert isinstance(run.view.dist.step_timeout_s, float)  # noted in the one view (null: sized)
    assert not os.path.exists(run.out_dir) or os.listdir(run.out_dir) == []
    with pytest.raises(dataclasses.FrozenInstanceError):
        run.world = 4


def test_under_torchrun_this_process_is_one_rank(tmp_path, monkeypatch):
    for key, value in {**EXTERNAL, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}.items():
        monkeypatch.setenv(key, value)
    run = prepare(*composed(tmp_path))
    assert run.how == "rank" and run.env is not None and (run.env.rank, run.env.world_size) == (0, 2)


def test_bad_input_is_one_line_and_exit_2_before_anything_starts(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        prepare(*composed(tmp_path, "train.accum=0"))
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err and "accum" in err
    assert not os.path.exists(tmp_path / "run")


def test_a_completed_sweep_job_is_skipped_in_one_line(tmp_path, capsys):
    out = tmp_path / "run"
    out.mkdir()
    (out / "summary.json").write_text(json.dumps({"status": "completed"}))
    run = prepare(*composed(tmp_path), multirun=True)
    assert run.how == "skip" and run.skip == f"skip (completed): {out}"
    assert launch(run) == 0
    assert capsys.readouterr().err == f"acco: skip (completed): {out}\n"
    assert prepare(*composed(tmp_path, "overwrite=true"), multirun=True).how == "local"


def test_a_slurm_run_whose_job_is_active_is_skipped_and_another_is_submitted(tmp_path, monkeypatch):
    out = tmp_path / "run"
    out.mkdir()
    (out / "slurm.json").write_text(json.dumps({"job_id": "77_1", "stdout": "/logs/77_1/77_1_0_log.out"}))
    monkeypatch.setattr(status, "squeue_state", lambda job: "RUNNING")
    run = prepare(*composed(tmp_path, "launcher=slurm"))
    assert run.how == "skip" and run.skip == f"skip (Slurm job 77_1 RUNNING): {out}"
    monkeypatch.setattr(status, "squeue_state", lambda job: "CANCELLED")
    run = prepare(*composed(tmp_path, "launcher=slurm"))
    assert run.how == "slurm" and run.world == 2 and run.view.resume == "auto"  # continues, never starts over
    submitted = []
    monkeypatch.setattr(entry, "submit_to_slurm", lambda view, world: submitted.append((view, world)) or 0)
    assert launch(run) == 0 and submitted == [(run.view, 2)]


def test_launch_starts_a_local_run_in_its_folder(tmp_path, monkeypatch):
    started = []
    monkeypatch.setattr(entry, "run_local", lambda view, world, out_dir: started.append((world, out_dir)) or 0)
    run = prepare(*composed(tmp_path))
    assert launch(run) == 0 and started == [(2, run.out_dir)]
