"""Rank 0's progress display and the optional Weights & Biases logging (offline).

Here the tests that start processes (marked integration); the in-process ones are in
tests/unit/test_progress.py."""

from __future__ import annotations

import csv
import glob
import json
import os

import pytest

from tests.helpers.runs import run_train


@pytest.mark.integration
def test_wandb_offline_run_records_every_metrics_row(tmp_path):
    pytest.importorskip("wandb")
    out = str(tmp_path / "run")
    proc = run_train(
        [
            "method=acco",
            "world_size=2",
            "train.steps=6",
            "train.deterministic=true",
            "logger=wandb",
            f"out_dir={out}",
            "train.log_every=0",
        ]
    )
    files = glob.glob(os.path.join(out, "wandb", "offline-run-*", "run-*.wandb"))
    assert len(files) == 1, os.listdir(out)
    raw = open(files[0], "rb").read()
    with open(os.path.join(out, "metrics.csv")) as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 6
    # history values are stored as JSON text inside the run's protobuf records
    assert b"train_loss" in raw and b"samples" in raw
    for row in rows:
        assert json.dumps(float(row["train_loss"])).encode() in raw, row
    assert json.load(open(os.path.join(out, "summary.json")))["status"] == "completed"
    # the launcher's closing line is the last thing the run says (issue 29, point 10)
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("acco: completed: 6/6 steps, train loss ") and last.endswith(f"-> {out}"), last
