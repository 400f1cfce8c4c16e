"""trace.json: per rank a compute lane (each micro-batch) and a communication lane (each sync
stage); communication overlaps compute for dpu/wp/acco and never for ddp."""
from __future__ import annotations

import json
import os

import pytest

from acco.engine.trace import load_spans, overlap_us

from .conftest import SMALL_LM, load_run, run_train

CASES = {"acco": ["method=acco"], "dpu": ["method=dpu"], "wp": ["method=wp"],
         "ddp": ["method=ddp"], "ddp_flat": ["method=ddp", "method.impl=flat"]}


@pytest.mark.parametrize("case", list(CASES))
def test_trace_lanes_and_overlap(tmp_path, case):
    out = str(tmp_path / "run")
    world = 2
    run_train([*CASES[case], *SMALL_LM, f"world_size={world}", "train.steps=6", "train.accum=2",
               "train.deterministic=true", f"out_dir={out}"])
    path = os.path.join(out, "trace.json")
    with open(path) as f:
        data = json.load(f)
    meta = [e for e in data["traceEvents"] if e["ph"] == "M" and e["name"] == "thread_name"]
    assert {(e["pid"], e["args"]["name"]) for e in meta} == \
        {(r, lane) for r in range(world) for lane in ("compute", "communication")}
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
        if case.startswith("ddp"):
            assert overlap == 0.0, f"rank {rank}: ddp communication overlapped compute by {overlap} us"
        else:
            assert overlap > 0.0, f"rank {rank}: no overlap of communication with compute"
