"""Results integrity: runs started at once into the same results root each get their own folder and
complete intact; a folder being written by a live run is refused; a local sweep skips the runs that
already have a completed result."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from acco.harness.lock import RunInUse, claim
from tests.helpers.paths import ROOT, TRAIN
from tests.helpers.runs import SMALL_LM, run_folders, run_train

pytestmark = pytest.mark.integration  # every test here starts processes

BASE = [*SMALL_LM, "world_size=2", "train.steps=4", "train.deterministic=true", "train.trace=false"]


def start(args):
    return subprocess.Popen(
        [sys.executable, TRAIN, *args], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


# few overrides: the default folder name lists them all
NAMED = [
    "model.config.hidden_size=64",
    "model.config.max_position_embeddings=32",
    "data.seq_len=32",
    "data.source.num_stories=1500",
    "data.tokenizer.vocab_size=384",
    "train.log_every=0",
    "world_size=2",
    "train.steps=4",
    "train.deterministic=true",
    "train.trace=false",
]


def test_two_runs_at_once_into_one_results_root(tmp_path):
    root = tmp_path / "results"
    # the same config twice, at the same moment: the same default folder name (time to the second)
    procs = [start(["method=acco", *NAMED, f"results_root={root}"]) for _ in range(2)]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-3000:]
    assert os.listdir(root) == ["runs"]  # nothing written outside the runs' own folders
    runs = sorted(os.listdir(root / "runs"))
    assert len(runs) == 2, runs
    for name in runs:
        folder = root / "runs" / name
        with open(folder / "summary.json") as f:
            summary = json.load(f)
        assert summary["status"] == "completed" and summary["steps_completed"] == 4
        lines = (folder / "metrics.csv").read_text().splitlines()
        assert [line.split(",")[0] for line in lines] == ["step", "1", "2", "3", "4"]
        assert not (folder / ".running").exists()
    # identical deterministic runs: identical results
    rows = [(root / "runs" / n / "metrics.csv").read_text().splitlines() for n in runs]
    assert [r.split(",")[4] for r in rows[0]] == [r.split(",")[4] for r in rows[1]]


def test_a_folder_being_written_is_refused(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        (out / ".running").write_text(json.dumps({"pid": holder.pid, "host": os.uname().nodename}))
        proc = run_train(["method=acco", *BASE, f"out_dir={out}"], expect=2, timeout=120)
        assert f"is being written by pid {holder.pid}" in proc.stderr
        assert sorted(os.listdir(out)) == [".running"]
        with pytest.raises(RunInUse):
            claim(str(out))
    finally:
        holder.kill()
        holder.wait()
    with claim(str(out)):  # the holder is gone: its claim is stale and taken over
        assert json.loads((out / ".running").read_text())["pid"] == os.getpid()
    assert not (out / ".running").exists()


def test_local_sweep_skips_completed_runs(tmp_path):
    root = tmp_path / "results"
    common = [
        "experiment=fig5/cpu",
        "method=acco",
        "train.steps=2",
        *SMALL_LM,
        "train.trace=false",
        f"results_root={root}",
    ]
    run_train(["-m", *common, "seed=0,1"])
    folders = run_folders(root)
    assert len(folders) == 2, folders  # the sweep's folder, results/sweeps/<experiment and settings>/
    before = [(f / "metrics.csv").stat().st_mtime_ns for f in folders]
    proc = run_train(["-m", *common, "seed=0,1"])  # the same sweep again: both runs are complete
    skipped = [
        ln for ln in proc.stderr.splitlines() if ln.startswith("run ") and ln.endswith(": skipped: already complete")
    ]
    assert len(skipped) == 2, proc.stderr
    assert "0 completed, 2 skipped" in proc.stderr
    assert run_folders(root) == folders
    assert [(f / "metrics.csv").stat().st_mtime_ns for f in folders] == before
    for name in folders:
        with open(name / "summary.json") as f:
            assert json.load(f)["status"] == "completed"
