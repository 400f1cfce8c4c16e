"""The virtual clock (clock.mode=virtual, acco/engine/virtual_clock.py): the model's arithmetic, and
real runs whose metrics.csv times are the model's while their losses are real.

c = one micro-batch's seconds, a = train.accum, m = one sync's seconds:
    DDP step a·c + m; deterministic ACCO round max(a·c, m) (a committed step is two rounds);
    adaptive ACCO round max(a, ⌈m/c⌉) micro-batches; a rank k times slower costs k·c per micro-batch,
    DDP waits for it, adaptive fast ranks fit more micro-batches beside the sync.

Here the tests that start processes (marked integration); the in-process ones are in
tests/unit/test_virtual_clock.py."""

from __future__ import annotations

import csv
import os

import pytest

from acco.engine.sync import SyncKind
from acco.engine.virtual_clock import ClockSettings, flat_sync_costs
from tests.helpers.runs import SMALL_LM, load_run, run_train


# -- real runs on the virtual clock ---------------------------------------------------------------------
def read_metrics(out: str) -> list[dict]:
    with open(os.path.join(out, "metrics.csv")) as f:
        return list(csv.DictReader(f))


def walls(out: str) -> list[float]:
    return [float(r["wall_time_s"]) for r in read_metrics(out)]


VIRTUAL = [*SMALL_LM, "world_size=2", "clock.mode=virtual", "clock.micro_batch_s=0.25"]


@pytest.mark.integration
def test_virtual_clock_bad_input_exits_2_before_any_worker(tmp_path):
    out = tmp_path / "run"
    proc = run_train(["clock.mode=virtual", "clock.sync_s=1.0", f"out_dir={out}"], expect=2, timeout=120)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: clock.mode=virtual needs"), proc.stderr
    assert not out.exists()


@pytest.mark.integration
def test_adaptive_acco_with_a_slow_rank_runs_on_the_model_and_reruns_identically(tmp_path):
    """c = 0.25 s, rank 1 twice slower, m = 1 s, accum 2. Prologue: rank 0 at 0.5, rank 1 at 1.0;
    the estimate sync runs 1.0-2.0: rank 0 fits 6 micro-batches from 0.5, rank 1 its 2; from then
    on every round starts together and lasts m: rank 0 fits 4, rank 1 2. Committed steps end at
    3, 5, 7, 9 s and each sums 12 micro-batches (the real sync's count equals the model's)."""
    runs = []
    for i in range(2):
        out = str(tmp_path / f"acco{i}")
        args = ["method=acco", "train.steps=4", "train.accum=2", "train.deterministic=false", "clock.sync_s=1.0"]
        run_train([*VIRTUAL, *args, "hetero.slow_rank=1", "hetero.factor=2", f"out_dir={out}"])
        runs.append(out)
    rows = read_metrics(runs[0])
    assert walls(runs[0]) == [3.0, 5.0, 7.0, 9.0]
    assert [int(r["micro_batches"]) for r in rows] == [12] * 4
    run = load_run(runs[0])["summary"]
    assert run["total_wall_time_s"] == 9.0
    assert [r["round_micro_batches"] for r in run["per_rank"]] == [[2, 6, 4, 4, 4, 4, 4, 4], [2] * 8]
    assert run["clock"] == {
        "mode": "virtual",
        "micro_batch_s": 0.25,
        "sync_s": {"estimate": 1.0, "commit": 1.0},
        "optimizer_step_s": 0.0,
        "link": {"rate_mbit": 0.0, "delay_ms": 0.0, "used": False, "emulated": False},
        "world_size": 2,
        "backward_share": pytest.approx(2 / 3),
        "source": "config",
    }
    assert run["link"]["mode"] == "none" and "not emulated" in run["link"]["note"]
    assert "slowdown" not in open(os.path.join(runs[0], "trace.json")).read()  # no sleep on the slow rank
    assert read_metrics(runs[1]) == rows  # the same times and losses, to the last digit


@pytest.mark.integration
def test_torch_ddp_waits_for_its_slowest_rank_and_a_real_run_says_real(tmp_path):
    """a = 2, c = 0.25 s, rank 1 four times slower, m = 0.5 s: each step 2 x 1.0 + 0.5 = 2.5 s."""
    out = str(tmp_path / "ddp")
    args = ["method=ddp", "method.impl=torch", "train.steps=3", "train.accum=2", "clock.sync_s=0.5"]
    run_train([*VIRTUAL, *args, "hetero.slow_rank=1", "hetero.factor=4", f"out_dir={out}"])
    assert walls(out) == [2.5, 5.0, 7.5]
    assert load_run(out)["summary"]["clock"]["sync_s"] == {"commit": 0.5}
    real = str(tmp_path / "real")
    run_train([*SMALL_LM, "world_size=2", "method=ddp", "train.steps=1", f"out_dir={real}"])
    assert load_run(real)["summary"]["clock"] == {"mode": "real"}


@pytest.mark.integration
@pytest.mark.parametrize("impl", ["torch", "flat"])
def test_ddp_on_the_link_model_overlaps_its_reduction_with_the_last_backward(tmp_path, impl):
    """c = 0.25 s, accum 2, 5 Mbit/s, buckets of 0.05 MiB: every step ends between the blocking step
    (2 x 0.25 + the whole sync, which torch DDP's first step, one bucket, takes) and 2 x 0.25 +
    the tail (what no overlap hides); the summary gives the step's model (the simulator reads it)."""
    out = str(tmp_path / impl)
    args = ["method=ddp", f"method.impl={impl}", "method.overlap_backward=true", "method.bucket_mb=0.05"]
    run_train([*VIRTUAL, *args, "train.steps=3", "train.accum=2", "link.rate_mbit=5", f"out_dir={out}"])
    clock = load_run(out)["summary"]["clock"]
    step = clock["ddp_step"]
    sync = clock["sync_s"]["commit"]
    assert len(step["ready"]) > 2 and sum(step["reduce_s"]) + step["tail_s"] == pytest.approx(sync)
    times = walls(out)
    steps = [b - a for a, b in zip([0.0, *times], times)]
    blocking, floor = 0.5 + sync, 0.5 + step["tail_s"]
    if impl == "torch":  # DDP's first step reduces one bucket of everything
        assert steps[0] == pytest.approx(blocking, abs=2e-4)  # (metrics.csv keeps 4 decimals)
    for s in steps[1:] if impl == "torch" else steps:
        assert floor < s < blocking - 0.01
    assert steps[2] == pytest.approx(steps[1], abs=2e-4)


@pytest.mark.integration
def test_wp_on_the_link_model_pays_its_warmup_step_then_overlaps(tmp_path):
    """Deterministic WP, warmup 1, accum 2, c = 0.25 s, the sync from the link model (5 Mbit/s,
    5 ms per ring step) + 0.05 s per optimizer step: step 1 a·c + m_commit; a prologue a·c; step 2
    max(a·c, m_predict) (the sync commits and predicts: two optimizer steps); step 3, the last,
    its sync alone."""
    out = str(tmp_path / "wp")
    args = ["method=wp", "method.warmup_steps=1", "train.steps=3", "train.accum=2", "train.deterministic=true"]
    link = ["link.rate_mbit=5", "link.delay_ms=5", "clock.optimizer_step_s=0.05"]
    run_train([*VIRTUAL, *args, *link, f"out_dir={out}"])
    summary = load_run(out)["summary"]
    buffer_bytes = summary["per_rank"][0]["comm_buffer_bytes"]
    settings = ClockSettings("virtual", 0.25, None, 0.05, rate_mbit=5.0, delay_ms=5.0)
    costs = flat_sync_costs(settings, [SyncKind.COMMIT, SyncKind.COMMIT_PREDICT], 2, buffer_bytes, 48, clip=False)
    assert summary["clock"]["sync_s"] == pytest.approx(costs)
    assert summary["clock"]["link"]["used"] is True
    commit, predict = costs["commit"], costs["commit+predict"]
    assert predict > 0.5  # the sync is longer than a round's compute: overlap saves a·c, not m
    step1 = 0.5 + commit
    step2 = step1 + 0.5 + max(0.5, predict)
    assert walls(out) == pytest.approx([step1, step2, step2 + predict], abs=1e-4)


@pytest.mark.integration
def test_diloco_and_streaming_diloco_on_the_virtual_clock(tmp_path):
    """accum 2, c = 0.25 s (an inner step 0.5 s), clock.sync_s = 2 s for the whole model.
    diloco, H = 2: every second step waits for its outer sync: 0.5, 3.0, 3.5, 6.0.
    streaming, H = 4, F = 2, τ = 1: fragment 0's sync (m0, its share of 2 s) starts after step 2
    and lands after step 3; after step 4, the last, fragment 1's sync, then fragment 0's once more."""
    out = str(tmp_path / "diloco")
    common = ["train.steps=4", "train.accum=2", "clock.sync_s=2.0"]
    run_train([*VIRTUAL, "method=diloco", "method.sync_every=2", *common, f"out_dir={out}"])
    assert walls(out) == [0.5, 3.0, 3.5, 6.0]
    out = str(tmp_path / "streaming")
    schedule = ["method.sync_every=4", "method.fragments=2", "method.overlap_steps=1"]
    run_train([*VIRTUAL, "method=streaming_diloco", *schedule, *common, f"out_dir={out}"])
    sync = load_run(out)["summary"]["clock"]["sync_s"]
    m0, m1 = sync["fragment 0"], sync["fragment 1"]
    assert m0 + m1 == pytest.approx(2.0) and sync["inner step counts"] == 0.0
    step3 = max(1.5, 1.0 + m0)
    assert walls(out) == pytest.approx([0.5, 1.0, step3, step3 + 0.5 + m1 + m0], abs=1e-4)


@pytest.mark.integration
def test_a_budget_bounds_the_adaptive_counts_the_clock_allows(tmp_path):
    """The run above with a budget of 150 samples (4 per micro-batch, 2 ranks) instead of 4 steps:
    a rank extends a round only while (its uncommitted micro-batches + 1) x 2 x 4 fit in the samples
    left, asked of every rank's model with that rank's own count. Step 3's estimate round (96
    samples done, 4 of rank 0's in its accumulator) lets rank 0 do its 2 only, so step 3 sums 10
    micro-batches; its commit round (6 of rank 0's in flight) and step 4's estimate round (136 done)
    none beyond 2. Times stay the model's: the rounds last the sync's 1 s either way."""
    out = str(tmp_path / "budget")
    args = ["method=acco", "train.steps=null", "train.samples=150", "train.accum=2", "clock.sync_s=1.0"]
    run_train([*VIRTUAL, *args, "hetero.slow_rank=1", "hetero.factor=2", f"out_dir={out}"])
    rows = read_metrics(out)
    assert [int(r["samples"]) for r in rows] == [48, 96, 136, 168]
    assert [int(r["micro_batches"]) for r in rows] == [12, 12, 10, 8]
    assert walls(out) == [3.0, 5.0, 7.0, 9.0]
    per_rank = load_run(out)["summary"]["per_rank"]
    assert [r["round_micro_batches"] for r in per_rank] == [[2, 6, 4, 4, 4, 2, 2, 2, 2], [2] * 9]


@pytest.mark.integration
def test_a_resumed_virtual_run_continues_the_clock(tmp_path):
    """The clock is part of a checkpoint: resumed at step 2, steps 3 and 4 have the uninterrupted
    run's times and losses."""
    ref = str(tmp_path / "ref")
    args = [*VIRTUAL, "method=acco", "train.steps=4", "train.accum=2", "clock.sync_s=1.0", "hetero.slow_rank=1"]
    args += ["hetero.factor=2", "train.checkpoint_every=2"]
    run_train([*args, f"out_dir={ref}"])
    out = str(tmp_path / "resumed")
    run_train([*args, f"out_dir={out}", f"resume={ref}/checkpoints/step_00000002"])
    assert read_metrics(out) == read_metrics(ref)[2:]
    assert load_run(out)["summary"]["total_wall_time_s"] == 9.0
