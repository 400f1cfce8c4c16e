"""experiments/reproduce.py runs again what is missing, and also a completed run whose saved
config.yaml no longer matches the experiment's files (a changed rate or budget): stale results must
not pass for the experiment's. Only planning here: nothing is trained."""

import importlib.util
import json
import os

import yaml

from acco.config.experiments import changed_keys
from tests.helpers.paths import ROOT

_spec = importlib.util.spec_from_file_location("reproduce", os.path.join(ROOT, "experiments", "reproduce.py"))
assert _spec is not None and _spec.loader is not None
reproduce = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(reproduce)


def _complete(out_dir: str, cfg: dict) -> None:
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "config.yaml"), "w") as f:
        yaml.safe_dump(cfg, f)
    with open(os.path.join(out_dir, "summary.json"), "w") as f:
        json.dump({"status": "completed"}, f)


def test_changed_keys_ignores_bookkeeping_and_keys_added_later():
    saved = {"optim": {"lr": 1e-3}, "train": {"steps": 100}, "overwrite": True, "experiment": {"runs": []}}
    now = {
        "optim": {"lr": 1e-3},
        "train": {"steps": 100, "new_key": 1},
        "overwrite": False,
        "experiment": {"runs": [1]},
    }
    assert changed_keys(saved, now) == []
    now["optim"]["lr"] = 6e-4
    now["link"] = {"rate_mbit": 400}  # the saved run predates the key: not evidence of a change
    assert changed_keys(saved, now) == ["optim.lr"]
    saved["link"] = {"rate_mbit": 50, "runtime": {"mode": "netns"}}
    assert changed_keys(saved, now) == ["link.rate_mbit", "optim.lr"]


def test_a_completed_run_made_from_other_settings_is_run_again(tmp_path):
    base = [f"results_root={tmp_path}"]
    run = ["method=acco", "seed=0", "train.steps=150"]
    plan = reproduce.plan_run("fig5", "cpu", base, run)
    assert not plan["complete"] and plan["stale"] == []  # nothing there yet
    cfg = reproduce.compose(["experiment=fig5/cpu", *base, *run])
    _complete(plan["out_dir"], dict(cfg, overwrite=True))  # as train.py saves it under reproduce
    plan = reproduce.plan_run("fig5", "cpu", base, run)
    assert plan["complete"] and plan["stale"] == []
    cfg["optim"]["lr"] = cfg["optim"]["lr"] * 2  # the experiment's file had another rate then
    cfg["link"]["rate_mbit"] = 50
    _complete(plan["out_dir"], cfg)
    plan = reproduce.plan_run("fig5", "cpu", base, run)
    assert not plan["complete"] and plan["stale"] == ["link.rate_mbit", "optim.lr"]
