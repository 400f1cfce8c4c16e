"""Checkpoints and resume: a run continued from a checkpoint (after a crash, or after a checkpoint
signal) produces exactly the metrics and final parameters of the uninterrupted run, for every
method in deterministic mode; a truncated checkpoint (found before the workers start) or a corrupt
one (found by the rank reading its file) is reported and the previous complete one used."""

from __future__ import annotations

import csv
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
import torch

from tests.helpers.paths import ROOT, TRAIN
from tests.helpers.runs import SMALL_LM, run_train

pytestmark = pytest.mark.integration  # every test here starts processes

STEPS = 8
BASE = [
    *SMALL_LM,
    "world_size=2",
    "train.deterministic=true",
    f"train.steps={STEPS}",
    "train.save_final_params=true",
    "train.trace=false",
]
METHODS = {
    "ddp-torch": ["method=ddp", "method.impl=torch"],
    "ddp-flat": ["method=ddp", "method.impl=flat"],
    "dpu": ["method=dpu", "method.warmup_steps=1"],
    "wp": ["method=wp"],
    "acco": ["method=acco"],
    "diloco": ["method=diloco", "method.sync_every=4"],
    # a checkpoint at step 6 holds fragment 0's sync in flight (started after step 6, lands after 7)
    "streaming_diloco": ["method=streaming_diloco", "method.sync_every=4", "method.fragments=2"],
}
RESUME_FROM = {"acco": 3, "wp": 3, "streaming_diloco": 6}  # acco's and wp's step-6 checkpoints are damaged
CHECKPOINT_FILES = [".metadata", "__0_0.distcp", "__1_0.distcp", "manifest.json"]


def metrics(out) -> list[dict]:
    with open(os.path.join(out, "metrics.csv"), newline="") as f:
        return [{k: v for k, v in row.items() if k != "wall_time_s"} for row in csv.DictReader(f)]


def summary(out) -> dict:
    with open(os.path.join(out, "summary.json")) as f:
        return json.load(f)


def final_params(out) -> torch.Tensor:
    return torch.load(os.path.join(out, "final_params.pt"))


@pytest.fixture(scope="module")
def references(tmp_path_factory):
    """Uninterrupted runs, one per method (made on first use), checkpointing every 3 steps."""
    made = {}

    def get(name):
        if name not in made:
            out = tmp_path_factory.mktemp("ref") / name
            run_train([*METHODS[name], *BASE, "train.checkpoint_every=3", f"out_dir={out}"])
            made[name] = str(out)
        return made[name]

    return get


def crashed_copy(ref: str, dest, keep_step: int):
    """The reference's folder as a run that died after step 6 would leave it, minus the
    checkpoints newer than `keep_step`: rows past the checkpoint exist and must be recomputed."""
    shutil.copytree(ref, dest)
    for name in ("summary.json", "final_params.pt"):
        os.remove(os.path.join(dest, name))
    for entry in os.listdir(os.path.join(dest, "checkpoints")):
        if int(entry.split("_")[1]) > keep_step:
            shutil.rmtree(os.path.join(dest, "checkpoints", entry))
    return str(dest)


@pytest.mark.parametrize("name", list(METHODS))
def test_resume_equals_uninterrupted_run(references, tmp_path, name):
    """For acco the newest checkpoint (step 6) is also cut short, as by a crash while writing: it is
    reported before the workers start and the run resumes from step 3. For wp a file of the newest
    has bytes changed at the same size: the rank reading it finds it, and every rank goes back to
    step 3."""
    ref = references(name)
    assert sorted(os.listdir(os.path.join(ref, "checkpoints"))) == ["step_00000003", "step_00000006"]
    assert sorted(os.listdir(os.path.join(ref, "checkpoints", "step_00000006"))) == CHECKPOINT_FILES
    resume_from = RESUME_FROM.get(name, 3)
    out = crashed_copy(ref, tmp_path / "run", keep_step=6 if name in ("acco", "wp") else resume_from)
    newest = os.path.join(out, "checkpoints", "step_00000006", "__1_0.distcp")
    if name == "acco":
        with open(newest, "r+b") as f:
            f.truncate(os.path.getsize(newest) // 2)
    elif name == "wp":
        with open(newest, "r+b") as f:  # same size, different bytes, in a tensor's data
            f.seek(os.path.getsize(newest) * 2 // 3)
            f.write(b"\x00" * 16)
    proc = run_train([*METHODS[name], *BASE, "train.checkpoint_every=3", f"out_dir={out}", "resume=auto"])
    if name == "acco":
        assert "step_00000006 is unusable (__1_0.distcp is truncated" in proc.stderr, proc.stderr[-2000:]
    elif name == "wp":
        assert "step_00000006 is unusable: rank 1: __1_0.distcp is corrupt" in proc.stderr, proc.stderr[-2000:]
        assert "trying the previous one" in proc.stderr
    s = summary(out)
    assert s["status"] == "completed" and s["resumed_from_step"] == resume_from and s["steps_completed"] == STEPS
    assert metrics(out) == metrics(ref)
    assert torch.equal(final_params(out), final_params(ref))
    # each rank read its own file of the checkpoint it resumed from, and little else
    for rank, figures in enumerate(s["per_rank"]):
        load = figures["checkpoint_io"]["load"]
        assert load["path"].endswith(f"step_{resume_from:08d}")
        assert load["own_file_bytes"] == os.path.getsize(os.path.join(load["path"], f"__{rank}_0.distcp"))
        if name != "wp":  # wp's ranks also read the corrupt checkpoint's file before going back
            assert load["own_file_bytes"] <= load["bytes_read"] <= 1.1 * load["own_file_bytes"] + 65536


def worker_pids(parent: int) -> list[int]:
    """The launcher's worker processes (forked or spawned; not multiprocessing's resource tracker or
    fork server)."""
    with open(f"/proc/{parent}/task/{parent}/children") as f:
        children = [int(p) for p in f.read().split()]
    found = []
    for pid in children:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read()
            if b"resource_tracker" not in cmdline and b"forkserver" not in cmdline:
                found.append(pid)
        except OSError:
            continue
    return found


@pytest.mark.slow
def test_sigusr1_to_one_worker_mid_run(tmp_path):
    """A real SIGUSR1 from outside reaches one worker only: the ranks agree at the next step
    boundary, every rank writes its part of the checkpoint, the run stops as preempted (exit 3);
    resume=auto finishes it."""
    out = tmp_path / "run"
    # a slow rank stretches the run to several seconds so the signal lands mid-run
    args = ["method=acco", *BASE, "train.steps=30", "hetero.slow_rank=0", "hetero.factor=8", f"out_dir={out}"]
    proc = subprocess.Popen(
        [sys.executable, TRAIN, *args], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    metrics_csv = out / "metrics.csv"
    deadline = time.time() + 240
    while time.time() < deadline and proc.poll() is None:
        if metrics_csv.exists() and len(metrics_csv.read_text().splitlines()) >= 3:  # 2 steps done
            break
        time.sleep(0.05)
    workers = worker_pids(proc.pid)
    assert workers, "no worker processes"
    os.kill(workers[-1], signal.SIGUSR1)
    _, err = proc.communicate(timeout=240)
    assert proc.returncode == 3, err[-3000:]
    s = summary(out)
    assert s["status"] == "preempted" and 2 <= s["steps_completed"] < 30
    stopped = s["steps_completed"]
    assert s["last_checkpoint"].endswith(f"step_{stopped:08d}")
    assert sorted(os.listdir(s["last_checkpoint"])) == CHECKPOINT_FILES
    run_train([*args, "resume=auto"])
    s = summary(out)
    assert s["status"] == "completed" and s["resumed_from_step"] == stopped
    assert [int(r["step"]) for r in metrics(out)] == list(range(1, 31))


def test_unusable_checkpoints_stop_the_run_and_change_nothing(references, tmp_path):
    """The only checkpoint has bytes changed at the same size: the rank reading its file finds it,
    the run stops with one line (exit 1) and metrics.csv stays as it was. A different run's
    checkpoint is bad input: exit 2 before any worker starts, naming the setting that differs."""
    ref = references("acco")
    out = crashed_copy(ref, tmp_path / "run", keep_step=3)
    ckpt = os.path.join(out, "checkpoints", "step_00000003", "__0_0.distcp")
    with open(ckpt, "r+b") as f:  # same size, different bytes
        f.seek(os.path.getsize(ckpt) // 2)
        f.write(b"\x00" * 16)
    before = (tmp_path / "run" / "metrics.csv").read_bytes()
    proc = run_train([*METHODS["acco"], *BASE, f"out_dir={out}", "resume=auto"], expect=1, timeout=120)
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert "__0_0.distcp is corrupt" in errors[0] and "no older usable checkpoint" in errors[0]
    assert (tmp_path / "run" / "metrics.csv").read_bytes() == before
    # a different run's checkpoint is refused, naming the setting that differs
    proc = run_train(
        [*METHODS["acco"], *BASE, "optim.lr=0.001", f"out_dir={tmp_path / 'other'}", f"resume={ref}"],
        expect=2,
        timeout=120,
    )
    assert "belongs to a different run (optim.lr" in proc.stderr
    assert not (tmp_path / "other").exists()


def test_a_checkpoint_of_the_old_format_is_refused_in_one_line(references, tmp_path):
    """A checkpoint written before DCP (format 1: model.pt + rank<r>.pt) is not read: one line, exit
    2, before any worker starts."""
    ref = references("acco")
    out = crashed_copy(ref, tmp_path / "run", keep_step=3)
    manifest_path = os.path.join(out, "checkpoints", "step_00000003", "manifest.json")
    with open(manifest_path) as f:
        manifest = json.load(f)
    manifest["format"] = 1
    with open(manifest_path, "w") as f:
        json.dump(manifest, f)
    proc = run_train([*METHODS["acco"], *BASE, f"out_dir={out}", "resume=auto"], expect=2, timeout=120)
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "checkpoint format 1" in errors[0] and "resume=null overwrite=true" in errors[0]


# --- a save's cross-rank waits: dist.checkpoint_timeout_s, not the start-up timeout ------------------
def _save_with_a_slow_rank(rank: int, init_file: str, cfg: dict, out_dir: str, slow_s: float, queue) -> None:
    """One rank of a 2-rank save whose rank 1 writes its file `slow_s` late; the default group's
    timeout (dist.timeout_s) is 1 s, the checkpoint group's dist.checkpoint_timeout_s."""
    from datetime import timedelta

    import torch.distributed as dist

    from acco.config.schema import typed
    from acco.train import checkpoint, checkpoint_io

    try:
        dist.init_process_group(
            "gloo", init_method=f"file://{init_file}", rank=rank, world_size=2, timeout=timedelta(seconds=1)
        )
        group = checkpoint.checkpoint_group(typed(cfg), 2)
        write = checkpoint_io.HashingWriter.write_data

        def slow_write(self, plan, planner):
            time.sleep(slow_s)  # a large rank file on a slow filesystem
            return write(self, plan, planner)

        if rank == 1:
            checkpoint_io.HashingWriter.write_data = slow_write  # type: ignore[method-assign]
        own = {"x": torch.full((4,), float(rank))}
        saved = checkpoint.save(out_dir, 5, rank, 2, {"w": torch.ones(3)}, own, typed(cfg), group=group)
        queue.put((rank, "ok", saved.path))
    except Exception as exc:  # noqa: BLE001 - reported to the test
        queue.put((rank, "error", f"{type(exc).__name__}: {exc}"))


def test_checkpoint_save_waits_by_its_own_timeout(tmp_path):
    """A save in which one rank's write takes longer than dist.timeout_s (the start-up timeout, here
    1 s) completes: its waits are bounded by dist.checkpoint_timeout_s (here 60 s)."""
    import multiprocessing

    from acco.config.experiments import compose
    from acco.train.checkpoint import verify

    cfg = compose([*SMALL_LM, "method=acco", "world_size=2", "dist.checkpoint_timeout_s=60", f"out_dir={tmp_path}"])
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    args = (str(tmp_path / "init"), cfg, str(tmp_path), 4.0, queue)
    procs = [ctx.Process(target=_save_with_a_slow_rank, args=(rank, *args)) for rank in range(2)]
    for p in procs:
        p.start()
    results = sorted(queue.get(timeout=240) for _ in procs)
    for p in procs:
        p.join(timeout=60)
    assert [r[1] for r in results] == ["ok", "ok"], results
    manifest = verify(results[0][2], world_size=2, full=True)
    assert manifest["step"] == 5 and set(manifest["files"]) == {".metadata", "__0_0.distcp", "__1_0.distcp"}


def test_a_checkpoint_from_before_a_setting_existed_still_resumes():
    """A setting added later (train.grad_dtype) is absent from an older checkpoint's manifest: at its
    default the run is the same run and resumes; set otherwise, it is a different run. Reporting
    settings (train.audit_collectives) never make a run different."""
    from acco.config.experiments import compose
    from acco.train.checkpoint import _first_difference, identity, with_added_settings

    now = identity(compose(["method=acco"]))
    older = json.loads(json.dumps(now))
    del older["train"]["grad_dtype"]
    assert _first_difference(older, now) is not None  # as it was read before: refused
    assert _first_difference(with_added_settings(older), now) is None
    fp32 = identity(compose(["method=acco", "train.grad_dtype=fp32"]))
    assert "train.grad_dtype" in (_first_difference(with_added_settings(older), fp32) or "")
    assert identity(compose(["method=acco", "train.audit_collectives=true"])) == now


def test_a_ddp_checkpoint_from_before_the_backward_overlap_still_resumes():
    """method.overlap_backward, method.bucket_mb and clock.backward_share (issue 40) are absent from an
    older ddp checkpoint: at their defaults the same run, resumed; the overlapped ddp is another
    run (its optimizer shards are laid out by buckets)."""
    from acco.config.experiments import compose
    from acco.train.checkpoint import _first_difference, identity, with_added_settings

    now = identity(compose(["method=ddp", "method.impl=flat"]))
    older = json.loads(json.dumps(now))
    for key in ("overlap_backward", "bucket_mb"):
        del older["method"][key]
    del older["clock"]["backward_share"]
    assert _first_difference(older, now) is not None
    assert _first_difference(with_added_settings(older), now) is None
    overlapped = identity(compose(["method=ddp", "method.impl=flat", "method.overlap_backward=true"]))
    assert (_first_difference(with_added_settings(older), overlapped) or "").startswith("method.overlap_backward")
    acco = identity(compose(["method=acco"]))
    assert "overlap_backward" not in with_added_settings(acco)["method"]
