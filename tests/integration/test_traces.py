"""trace.json: per rank a compute lane (each micro-batch) and a communication lane (each sync
stage); communication overlaps compute for dpu/wp/acco and never for ddp."""

from __future__ import annotations

import json
import os

import pytest

from acco.engine.trace import backward_overlap, load_spans, overlap_us
from tests.helpers.runs import SMALL_LM, load_run, run_train

pytestmark = pytest.mark.integration  # every test here starts processes

CASES = {
    "acco": ["method=acco"],
    "dpu": ["method=dpu"],
    "wp": ["method=wp"],
    "ddp": ["method=ddp"],
    "ddp_flat": ["method=ddp", "method.impl=flat"],
    # (16 sequences per micro-batch: a backward long enough to see the reduce-scatters start in it)
    "ddp_overlap": [
        "method=ddp",
        "method.impl=flat",
        "method.overlap_backward=true",
        "method.bucket_mb=0.05",
        "data.micro_batch_size=16",
    ],
}


@pytest.mark.parametrize("case", list(CASES))
def test_trace_lanes_and_overlap(tmp_path, case):
    out = str(tmp_path / "run")
    world = 2
    run_train(
        [
            *[a for a in SMALL_LM if not any(a.split("=")[0] == c.split("=")[0] for c in CASES[case])],
            *CASES[case],
            f"world_size={world}",
            "train.steps=6",
            "train.accum=2",
            "train.deterministic=true",
            f"out_dir={out}",
        ]
    )
    path = os.path.join(out, "trace.json")
    with open(path) as f:
        data = json.load(f)
    meta = [e for e in data["traceEvents"] if e["ph"] == "M" and e["name"] == "thread_name"]
    assert {(e["pid"], e["args"]["name"]) for e in meta} == {
        (r, lane) for r in range(world) for lane in ("compute", "communication")
    }
    summary = load_run(out)["summary"]
    for rank in range(world):
        compute = load_spans(path, rank, "compute")
        comm = load_spans(path, rank, "communication")
        assert compute and comm
        # one compute span per micro-batch (DDP's last backward is on the communication lane)
        forwards = [e for e in compute if e["name"].startswith("fwd+bwd")]
        assert len(forwards) == summary["per_rank"][rank]["micro_batches"]
        assert any(e["name"].startswith("sync") for e in comm)
        overlap = overlap_us(compute, comm)
        if case in ("ddp", "ddp_flat"):
            assert overlap == 0.0, f"rank {rank}: ddp communication overlapped compute by {overlap} us"
        else:
            assert overlap > 0.0, f"rank {rank}: no overlap of communication with compute"
        if case == "ddp_overlap":
            # every step's buckets were handed over during its last backward; the communication
            # thread started reduce-scattering them before that backward ended (on a loaded machine
            # it may be scheduled late in some steps: at least one step per rank shows it)
            buckets = [e for e in comm if e["name"].startswith("reduce_scatter (bucket")]
            early = 0
            for step in range(1, 7):
                mine = [e for e in buckets if e["args"]["step"] == step]
                last = max((e for e in compute if e["args"]["step"] == step), key=lambda e: e["ts"])
                assert len(mine) > 2, (rank, step)
                early += min(e["ts"] for e in mine) < last["ts"] + last["dur"]
            hidden = [r for r in backward_overlap(path) if r["rank"] == rank]
            assert len(hidden) == 6 and all(r["reduce_s"] > 0 for r in hidden)
            assert early >= 1 and sum(r["hidden_s"] > 0 for r in hidden) == early, (rank, early, hidden)


def test_metrics_rows_and_periodic_evaluation(tmp_path):
    import csv

    out = str(tmp_path / "run")
    run_train(
        [
            "method=wp",
            *SMALL_LM,
            "world_size=2",
            "train.steps=6",
            "train.accum=2",
            "train.eval_every=3",
            "train.eval_batches=2",
            f"out_dir={out}",
        ]
    )
    with open(os.path.join(out, "metrics.csv")) as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == [
        "step",
        "samples",
        "tokens",
        "wall_time_s",
        "train_loss",
        "lr",
        "micro_batches",
        "eval_loss",
        "grad_norm",
    ]
    assert [r["eval_loss"] != "" for r in rows] == [False, False, True, False, False, True]
    samples = [int(r["samples"]) for r in rows]
    assert samples == sorted(samples) and int(rows[-1]["tokens"]) == samples[-1] * 32
    assert all(int(r["micro_batches"]) >= 2 * 2 for r in rows)  # adaptive: at least accum per rank
    times = [float(r["wall_time_s"]) for r in rows]
    assert times == sorted(times)
    summary = load_run(out)["summary"]
    assert summary["final_eval_loss"] == pytest.approx(float(rows[-1]["eval_loss"]))
    assert summary["status"] == "completed" and summary["world_size"] == 2
    for rank in summary["per_rank"]:
        assert rank["optimizer_state_bytes"] > 0 and rank["peak_rss_bytes"] > 0
