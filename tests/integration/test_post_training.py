"""After the last step: a final evaluation longer than dist.timeout_s still ends the run completed,
the ranks share it and get what one process gets, and the trace is recorded in a window of steps
and merged by streaming (memory bounded however many events)."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import tracemalloc

import pytest

from acco.engine.trace import COMM, COMPUTE, TraceRecorder, load_spans, merge_trace_parts, write_part
from tests.helpers.paths import ROOT
from tests.helpers.runs import SMALL_LM, load_run, run_train

BASE = [*SMALL_LM, "train.deterministic=true", "train.accum=2"]
LAMBADA_LIKE = ["+final_eval.lambada_source.generator=lambada_like", "+final_eval.lambada_source.num_examples=40"]


# ----------------------------------------------------------------------------------------------
# the final evaluation
# ----------------------------------------------------------------------------------------------
@pytest.mark.integration
def test_final_evaluation_longer_than_the_collective_timeout_completes(tmp_path):
    # Rank 0's share sleeps 12 s, more than twice dist.timeout_s: before the post-training group,
    # rank 1 waited for rank 0's (then whole) evaluation on the default group and timed out, and
    # the run failed without summary.json's evaluation.
    out = tmp_path / "run"
    proc = run_train(
        [
            "method=acco",
            *BASE,
            "world_size=2",
            "train.steps=4",
            "final_eval.heldout=true",
            "final_eval.lambada=true",
            *LAMBADA_LIKE,
            "dist.timeout_s=5",
            "fault.final_eval_sleep_s=12",
            f"out_dir={out}",
        ]
    )
    assert "final evaluation slowed by 12 s" in proc.stderr
    summary = load_run(str(out))["summary"]
    assert summary["status"] == "completed" and summary["error"] is None
    assert set(summary["final_eval"]) == {"heldout", "lambada"}
    assert summary["final_eval"]["lambada"]["examples"] == 40
    assert summary["final_eval"] == json.loads((out / "eval.json").read_text())
    assert (out / "trace.json").exists() and not list(out.glob(".trace.rank*"))


def evaluate(out) -> subprocess.CompletedProcess:
    """experiments/evaluate.py on a run folder: the final evaluation again, from the saved model."""
    return subprocess.run(
        [sys.executable, os.path.join(ROOT, "experiments", "evaluate.py"), str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env=os.environ.copy(),
    )


@pytest.mark.integration
def test_ranks_share_the_final_evaluation_and_agree_with_one_process(tmp_path):
    out = tmp_path / "run"
    run_train(
        [
            "method=ddp",
            "method.impl=flat",
            *BASE,
            "world_size=3",
            "train.steps=3",
            "train.save_model=true",
            "final_eval.heldout=true",
            "final_eval.lambada=true",
            *LAMBADA_LIKE,
            f"out_dir={out}",
        ]
    )
    shared = load_run(str(out))["summary"]["final_eval"]
    # the saved model scored again in one process (experiments/evaluate.py rewrites eval.json)
    proc = evaluate(out)
    assert proc.returncode == 0, proc.stderr[-3000:]
    single = json.loads((out / "eval.json").read_text())
    assert shared["heldout"]["tokens"] == single["heldout"]["tokens"] > 0
    assert shared["lambada"]["examples"] == single["lambada"]["examples"] == 40
    assert shared["lambada"]["accuracy"] == single["lambada"]["accuracy"]
    for name, key in (("heldout", "loss"), ("heldout", "perplexity"), ("lambada", "perplexity")):
        assert shared[name][key] == pytest.approx(single[name][key], rel=1e-6), (name, key)


@pytest.mark.integration
def test_a_failed_final_evaluation_leaves_the_run_completed_and_saved(tmp_path):
    """Issue 29 (2): the model is saved before the final evaluation; an evaluation that fails (here
    on rank 1 only: rank 0 must not wait for it) leaves the training result `completed` with the
    evaluation's error, and experiments/evaluate.py redoes it from the saved model."""
    out = tmp_path / "run"
    proc = run_train(
        [
            "method=acco",
            *BASE,
            "world_size=2",
            "train.steps=3",
            "train.save_model=true",
            "final_eval.heldout=true",
            "final_eval.lambada=true",
            *LAMBADA_LIKE,
            "task=tests.helpers.final_eval_faults:lm_task_failing_final_eval",
            "+fail_final_eval_rank=1",
            f"out_dir={out}",
        ]
    )
    summary = load_run(str(out))["summary"]
    assert summary["status"] == "completed" and summary["error"] is None and summary["failed_rank"] is None
    assert summary["steps_completed"] == 3 and summary["final_eval"] is None
    assert summary["final_eval_error"].startswith(
        "FinalEvaluationError: rank 1: OSError: the evaluation data went away"
    )
    assert "redo it with experiments/evaluate.py" in proc.stderr
    assert (out / "model" / "config.json").exists() and not (out / "eval.json").exists()
    redo = evaluate(out)
    assert redo.returncode == 0, redo.stderr[-3000:]
    redone = json.loads((out / "summary.json").read_text())
    assert redone["final_eval"] == json.loads((out / "eval.json").read_text())
    assert redone["final_eval"]["lambada"]["examples"] == 40 and redone["final_eval_error"] is None
    assert redone["status"] == "completed" and redone["final_eval_by"] == "experiments/evaluate.py"


# ----------------------------------------------------------------------------------------------
# the trace window
# ----------------------------------------------------------------------------------------------
def test_recorder_keeps_only_the_window():
    tracer = TraceRecorder(0, steps=(3, 5))
    for step in range(1, 2001):
        tracer.at_step(step)
        for lane in (COMPUTE, COMM):
            tracer.add("x", lane, 0.0, 1.0)
    assert len(tracer.events) == 3 * 2
    assert sorted({e["args"]["step"] for e in tracer.events}) == [3, 4, 5]
    everything = TraceRecorder(1)
    for step in (1, 2):
        everything.at_step(step)
        everything.add("x", COMPUTE, 0.0, 1.0, k=step)
    assert [e["args"] for e in everything.events] == [{"step": 1, "k": 1}, {"step": 2, "k": 2}]


@pytest.mark.integration
@pytest.mark.parametrize("method", [["method=acco"], ["method=ddp"]], ids=["acco", "ddp"])
def test_trace_window_records_the_work_of_its_steps(tmp_path, method):
    out = tmp_path / "run"
    world = 2
    run_train([*method, *BASE, f"world_size={world}", "train.steps=7", "train.trace_steps=[3,5]", f"out_dir={out}"])
    path = str(out / "trace.json")
    with open(path) as f:
        data = json.load(f)
    assert data["otherData"] == {"trace_steps": [3, 5]}
    lanes = {(e["pid"], e["args"]["name"]) for e in data["traceEvents"] if e["name"] == "thread_name"}
    assert lanes == {(r, lane) for r in range(world) for lane in ("compute", "communication")}
    spans = load_spans(path)
    assert {(e["pid"], e["tid"], e["args"]["step"]) for e in spans} == {
        (r, lane, s) for r in range(world) for lane in (COMPUTE, COMM) for s in (3, 4, 5)
    }
    with open(out / "metrics.csv") as f:
        rows = [r for r in csv.DictReader(f) if 3 <= int(r["step"]) <= 5]
    micro = [e for e in spans if e["tid"] == COMPUTE and "k" in e["args"]]  # one per micro-batch
    # the window's micro-batches, all ranks: those its metrics rows count (deterministic: equal
    # numbers per step, though acco's commit of step s adds G̃_s computed in the round before)
    assert len(micro) == sum(int(r["micro_batches"]) for r in rows)
    first_k = 2 * 2 if method == ["method=ddp"] else 2 * 2 + 2 + 4  # micro-batches before step 3
    for rank in range(world):
        ks = sorted(e["args"]["k"] for e in micro if e["pid"] == rank)
        assert ks == list(range(first_k, first_k + len(ks)))
    syncs = [e for e in spans if e["name"].startswith("sync")]
    assert len(syncs) == world * 3 * (2 if method == ["method=acco"] else 1)


def test_merge_streams_a_million_events(tmp_path):
    per_rank = 500_000

    def events(rank):
        for i in range(per_rank):
            yield {
                "name": "fwd+bwd",
                "ph": "X",
                "pid": rank,
                "tid": i % 2,
                "ts": 1.7e15 + i,
                "dur": 0.5,
                "cat": "compute",
                "args": {"step": i // 100, "k": i},
            }

    for rank in range(2):
        write_part(str(tmp_path / f".trace.rank{rank}.part"), events(rank))
    size = sum(p.stat().st_size for p in tmp_path.iterdir())
    assert size > 100 * 2**20
    tracemalloc.start()
    try:
        merge_trace_parts(str(tmp_path), 2, {"trace_steps": [0, 9999]})
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 * 2**20, f"the merge held {peak / 2**20:.1f} MiB of Python objects"  # ~1 MiB: one chunk
    assert sorted(os.listdir(tmp_path)) == ["trace.json"]
    # a valid Chrome trace, read line by line here (json.load of 1M events would take ~1 GB)
    with open(tmp_path / "trace.json") as f:
        head = f.readline()
        assert head.startswith("{") and head.rstrip().endswith('"traceEvents": [')
        count, last = 0, None
        for line in f:
            line = line.rstrip("\n")
            if line == "]}":
                break
            event = json.loads(line.rstrip(","))
            assert event["args"]["k"] == (count % per_rank)
            count, last = count + 1, line
        assert f.read() == "" and not last.endswith(",")
    assert count == 2 * per_rank
    small = tmp_path / "small"
    small.mkdir()
    for rank in range(3):  # rank 1 recorded nothing at all
        if rank != 1:
            write_part(
                str(small / f".trace.rank{rank}.part"),
                ({"name": "x", "ph": "X", "pid": rank, "tid": 0, "ts": t, "dur": 1.0} for t in range(3)),
            )
    merge_trace_parts(str(small), 3)
    assert [(e["pid"], e["ts"]) for e in load_spans(str(small / "trace.json"))] == [
        (r, t) for r in (0, 2) for t in range(3)
    ]


# ----------------------------------------------------------------------------------------------
# bad settings
# ----------------------------------------------------------------------------------------------
BAD = [
    (["train.trace_steps=[5,3]"], "train.trace_steps must be null or two steps"),
    (["train.trace_steps=[-1,3]"], "train.trace_steps must be null or two steps"),
    (["train.trace_steps=[4]"], "train.trace_steps must be null or two steps"),
    (["dist.final_timeout_s=0"], "dist.final_timeout_s must be > 0"),
    (["fault.final_eval_sleep_s=-1"], "fault.final_eval_sleep_s must be >= 0"),
    (
        ["world_size=2", "fault.final_eval_sleep_s=1", "fault.final_eval_sleep_rank=2"],
        "fault.final_eval_sleep_rank=2 but there are only 2 ranks",
    ),
]


@pytest.mark.integration
@pytest.mark.parametrize("args,message", BAD, ids=[" ".join(a) for a, _ in BAD])
def test_bad_post_training_settings_fail_fast(tmp_path, args, message):
    out = tmp_path / "run"
    proc = run_train([*args, f"out_dir={out}"], expect=2, timeout=120)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], proc.stderr
    assert not out.exists()
