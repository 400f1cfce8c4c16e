"""Out of disk (issue 18), on a small tmpfs the test mounts: a run that cannot fit is refused before
it starts (exit 2, one line, nothing written); a disk that fills during the run stops every rank at
the checkpoint with one line and summary.json saying why (exit 1), keeps the previous checkpoint,
which resume=auto continues from once there is room; no temporary or partial file is left, and a
killed run's leftovers are swept by the next one."""

from __future__ import annotations

import glob
import json
import os
import subprocess

import pytest
import yaml

from acco.runtime.disk import sweep
from acco.train.checkpoint import list_checkpoints, verify
from acco.train.memory import checkpoint_bytes
from tests.helpers.runs import SMALL_LM, run_train

pytestmark = pytest.mark.integration  # every test here starts processes

RUN = [
    *SMALL_LM,
    "method=acco",
    "world_size=2",
    "train.deterministic=true",
    "train.steps=6",
    "train.checkpoint_every=2",
    "train.keep_checkpoints=2",
    "train.trace=false",
]
LEFTOVER_PATTERNS = ("**/.*.tmp-*", "**/.partial_step_*", "**/.trace.rank*.part", "**/.acco-reserve", "**/.model.*")


@pytest.fixture
def small_fs(tmp_path):
    """mount(size): a tmpfs of `size` at a fresh folder; remount(size) resizes it."""
    mnt = tmp_path / "fs"
    mnt.mkdir()

    def mount(size: str):
        proc = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mnt)], capture_output=True)
        if proc.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.decode().strip()}")
        return mnt

    def remount(size: str):
        subprocess.run(["mount", "-o", f"remount,size={size}", str(mnt)], check=True)

    yield mount, remount
    subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def leftovers(folder) -> list[str]:
    return sorted(p for pattern in LEFTOVER_PATTERNS for p in glob.glob(os.path.join(folder, pattern), recursive=True))


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("error:")]


def test_a_run_that_cannot_fit_is_refused_before_it_starts(small_fs):
    mnt = small_fs[0]("3m")
    out = mnt / "run"
    proc = run_train([*RUN, f"out_dir={out}"], expect=2)
    lines = error_lines(proc.stderr)
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    # the need, the free space, the fix
    assert "will write about" in lines[0] and "GB free" in lines[0] and "train.keep_checkpoints=1" in lines[0]
    assert os.listdir(mnt) == []  # nothing started, nothing written


def test_a_disk_that_fills_stops_the_run_and_the_last_checkpoint_resumes(small_fs, monkeypatch):
    mount, remount = small_fs
    mnt = mount("5m")  # one checkpoint (~3 MB: acco's pending gradients on both ranks) fits, two do not
    out = mnt / "run"
    monkeypatch.setenv("ACCO_DISK_CHECK", "0")  # the filesystem fills "behind the estimate's back"
    proc = run_train([*RUN, f"out_dir={out}"], expect=1)
    lines = error_lines(proc.stderr)
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "no space left on" in lines[0] and "checkpoint step_00000004 at step 4" in lines[0]
    with open(out / "summary.json") as f:
        summary = json.load(f)
    assert summary["status"] == "failed"
    assert summary["error"].startswith(f"no space left on {mnt} (tmpfs) while writing checkpoint step_00000004")
    assert "free " in summary["error"] and "resume=auto" in summary["error"]
    assert summary["steps_completed"] == 4
    assert summary["last_checkpoint"].endswith("step_00000002")
    assert leftovers(out) == []
    found = list_checkpoints(str(out / "checkpoints"))
    assert [step for step, _ in found] == [2]
    verify(found[0][1], 2)  # intact
    # the estimate's checkpoint is what was written (within the per-rank allowance for RNG state)
    with open(out / "config.yaml") as f:
        cfg = yaml.safe_load(f)
    written = sum(os.path.getsize(os.path.join(found[0][1], n)) for n in os.listdir(found[0][1]))
    assert written <= checkpoint_bytes(cfg, 2) <= written * 1.1

    # a run killed while writing leaves these: the next one sweeps them
    (out / ".summary.json.tmp-999-deadbeef").write_text("")
    (out / "checkpoints" / ".partial_step_00000004").mkdir()
    (out / "checkpoints" / ".partial_step_00000004" / "rank0.pt").write_bytes(b"x" * 1000)
    (out / ".trace.rank1.part").write_text("")
    remount("16m")
    monkeypatch.delenv("ACCO_DISK_CHECK")
    run_train([*RUN, f"out_dir={out}", "resume=auto"])
    with open(out / "summary.json") as f:
        summary = json.load(f)
    assert summary["status"] == "completed" and summary["resumed_from_step"] == 2
    assert summary["steps_completed"] == 6
    assert leftovers(out) == []


def test_sweep_removes_only_what_writers_leave(tmp_path):
    keep = ["summary.json", "metrics.csv", "checkpoints/step_00000002/model.pt", "model/config.json"]
    drop = [
        ".metrics.csv.tmp-12-0a1b2c3d",
        "failures/.rank1.json.tmp-12-0a1b2c3d",
        "checkpoints/.partial_step_00000004/rank0.pt",
        "checkpoints/step_00000002/.rank0.pt.tmp-12-0a1b2c3d",
        ".trace.rank0.part",
        ".acco-reserve",
        ".model.partial/config.json",
    ]
    for name in keep + drop:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x")
    sweep(str(tmp_path))
    assert leftovers(tmp_path) == []
    assert all((tmp_path / name).exists() for name in keep)
