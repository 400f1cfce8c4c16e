"""A method defined outside acco is one module (tests/plugins/local_sgd.py: its spec, its settings with
their defaults as its config, its reference update) named by ACCO_METHODS: it trains at world size 2
and matches its own reference update, and the sweep's preview, the virtual clock and the simulator
know it, with no file of acco changed for it. tests/plugins/ddp_then_dpu.py is one on the flat engine,
whose schedule of rounds reads a setting of its own."""

from __future__ import annotations

import copy
import csv
import importlib
import os

import pytest
import torch

from acco import methods
from acco.train.reference import replay
from tests.helpers.methods import equals_reference
from tests.helpers.paths import ROOT
from tests.helpers.rounding import rounding_mismatch
from tests.helpers.runs import SMALL_LM, load_run, run_script, run_train

pytestmark = pytest.mark.integration  # every test here starts processes

PLUGIN = "tests.plugins.local_sgd"
STEPS = 6  # sync_every=4 (its default): an average after step 4, and one after the last


@pytest.fixture
def plugin_env(monkeypatch):
    """The runs' processes import the plugin: ACCO_METHODS names it, PYTHONPATH finds it."""
    monkeypatch.setenv(methods.PLUGINS_ENV, PLUGIN)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")])))


@pytest.fixture
def local_sgd():
    """The plugin registered in this process too (the reference replays here), removed afterwards."""
    spec = importlib.import_module(PLUGIN).SPEC
    methods.register(spec)
    yield spec
    methods.METHODS.pop(spec.name, None)


def test_a_plugin_method_trains_and_equals_its_reference(tmp_path, plugin_env, local_sgd):
    out = str(tmp_path / "run")
    deterministic = ["train.accum=2", "train.deterministic=true", "train.save_final_params=true", "optim.lr=2e-3"]
    run_train(["method=local_sgd", *SMALL_LM, "world_size=2", f"train.steps={STEPS}", *deterministic, f"out_dir={out}"])
    run = load_run(out)
    assert run["summary"]["status"] == "completed" and run["summary"]["steps_completed"] == STEPS
    assert run["cfg"]["method"] == {
        "name": "local_sgd",
        "sync_every": 4,
        "fragments": 1,
        "overlap_steps": 0,
        "mixing": 0.0,
        "outer_lr": 1.0,
        "outer_momentum": 0.0,
    }
    final, _ = equals_reference(out, run["cfg"], STEPS)
    # another update rule on the same run misses it (agreeing with its own rule means something)
    ddp = copy.deepcopy(run["cfg"])
    ddp["method"] = {"name": "ddp", "impl": "flat", "comm_hook": "allreduce"}
    ddp["method"] |= {"overlap_backward": False, "bucket_mb": None}
    assert rounding_mismatch(final, replay(ddp).history[-1]) is not None


FLAT_PLUGIN = "tests.plugins.ddp_then_dpu"


def test_a_flat_plugin_methods_schedule_reads_its_own_setting(tmp_path, plugin_env, monkeypatch):
    """DDP then DPU on the flat engine: its schedule reads method.ddp_steps from the settings the
    backend hands it, and the run matches its reference at that ddp_steps, not at another."""
    monkeypatch.setenv(methods.PLUGINS_ENV, FLAT_PLUGIN)
    spec = methods.register(importlib.import_module(FLAT_PLUGIN).SPEC)  # the reference replays here
    try:
        out = str(tmp_path / "run")
        deterministic = ["train.accum=2", "train.deterministic=true", "train.save_final_params=true", "optim.lr=2e-3"]
        run_train(
            ["method=ddp_then_dpu", "method.ddp_steps=3", *SMALL_LM, "world_size=2", "train.steps=5"]
            + [*deterministic, f"out_dir={out}"]
        )
        run = load_run(out)
        assert run["summary"]["status"] == "completed" and run["cfg"]["method"] == {"name": spec.name, "ddp_steps": 3}
        final = torch.load(os.path.join(out, "final_params.pt"))
        mismatch = rounding_mismatch(final, replay(run["cfg"]).history[-1])
        assert mismatch is None, mismatch
        for ddp_steps in (0, 2):  # another number of sequential steps is another run
            other = copy.deepcopy(run["cfg"])
            other["method"]["ddp_steps"] = ddp_steps
            assert rounding_mismatch(final, replay(other).history[-1]) is not None
    finally:
        methods.METHODS.pop(spec.name, None)


def test_a_plugin_method_is_in_the_sweep_preview(tmp_path, plugin_env):
    root = tmp_path / "results"
    proc = run_train(["-m", "method=local_sgd", "world_size=2", "train.steps=6", f"results_root={root}", "--plan"])
    assert "preview of a sweep of 1 job(s)" in proc.stdout and "Traceback" not in proc.stderr
    assert "plan: 1 runs, 0 complete (skipped), 1 to train" in proc.stdout
    assert "local_" in proc.stdout and "to train" in proc.stdout
    assert not root.exists() or not any(root.rglob("summary.json"))  # nothing ran


def test_a_plugin_methods_setting_is_checked_before_any_worker(tmp_path, plugin_env):
    out = tmp_path / "run"
    proc = run_train(["method=local_sgd", "method.sync_every=0", f"out_dir={out}"], expect=2, timeout=120)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "method.sync_every must be >= 1" in lines[0], proc.stderr
    assert not out.exists()


def test_a_plugin_method_runs_on_the_virtual_clock(tmp_path, plugin_env):
    """c = 0.25 s, accum 2: an inner step is 0.5 s; the average after step 4 costs clock.sync_s = 1 s,
    waited for (not overlapped)."""
    out = str(tmp_path / "run")
    virtual = ["world_size=2", "clock.mode=virtual", "clock.micro_batch_s=0.25", "clock.sync_s=1.0"]
    run_train([*SMALL_LM, *virtual, "method=local_sgd", "train.steps=4", "train.accum=2", f"out_dir={out}"])
    with open(os.path.join(out, "metrics.csv")) as f:
        assert [float(r["wall_time_s"]) for r in csv.DictReader(f)] == [0.5, 1.0, 1.5, 3.0]
    clock = load_run(out)["summary"]["clock"]
    assert clock["mode"] == "virtual" and clock["sync_s"]["fragment 0"] == 1.0


def test_a_plugin_method_is_in_the_simulators_rows(plugin_env):
    proc = run_script("simulate.py", ["--model", "125m"], timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert any(line.split()[:1] == ["local_sgd"] for line in proc.stdout.splitlines()), proc.stdout[-3000:]
