"""The collective audit (issue 30 point 8): train.audit_collectives=true leaves every collective a
rank issues in collectives.rank<r>.jsonl, and every method's run passes the checks that matter once
the training group is NCCL: the same sequence per group on every rank, an NCCL group used by one
thread at a time and never by the main thread while a sync is in flight, only CPU tensors on gloo
groups. On CPU every group is gloo; the audit records which ones would be NCCL on a GPU.

Here the tests that start processes (marked integration); the in-process ones are in
tests/unit/test_audit.py."""

from __future__ import annotations

import pytest

from acco.engine.audit import audit_path, audit_problems, load_audit
from tests.helpers.runs import SMALL_LM, run_train

# one run per method at world 2, a checkpoint and an evaluation inside it
METHODS = {
    "ddp-torch": ["method=ddp", "train.steps=4"],
    "ddp-flat": ["method=ddp", "method.impl=flat", "train.steps=4"],
    "dpu": ["method=dpu", "train.steps=4"],
    "wp": ["method=wp", "train.steps=4"],
    "acco-deterministic": ["method=acco", "train.steps=4", "train.deterministic=true"],
    "acco-adaptive": ["method=acco", "train.steps=4", "train.deterministic=false"],
    "diloco": ["method=diloco", "method.sync_every=2", "train.steps=4"],
    "streaming_diloco": [
        "method=streaming_diloco",
        "method.sync_every=4",
        "method.fragments=2",
        "method.overlap_steps=1",
        "train.steps=6",
    ],
}


@pytest.mark.integration
@pytest.mark.parametrize("method", list(METHODS))
def test_every_method_passes_the_collective_audit(tmp_path, method):
    out = str(tmp_path / method)
    run_train(
        [
            *METHODS[method],
            *SMALL_LM,
            "world_size=2",
            "train.accum=1",
            "train.checkpoint_every=2",
            "train.eval_every=2",
            "train.eval_batches=1",
            "train.trace=false",
            "train.audit_collectives=true",
            f"out_dir={out}",
        ]
    )
    logs = {r: load_audit(audit_path(out, r)) for r in (0, 1)}
    assert audit_problems(logs) == []
    records = logs[0]
    # not vacuous: the training group (NCCL on a GPU) carried the gradients on this run, and the
    # checkpoints and evaluations used their gloo groups
    nccl_groups = {r["group"] for r in records if r["gpu_backend"] == "nccl"} - {"default"}
    assert len(nccl_groups) == 1, nccl_groups
    train = [r for r in records if r["group"] in nccl_groups]
    assert any("float32" in r["dtypes"] or "bfloat16" in r["dtypes"] for r in train)
    gloo_ops = {(r["group"].split(":")[0], r["op"]) for r in records if r["gpu_backend"] == "gloo"}
    assert ("checkpoint_group", "all_gather_object") in gloo_ops, gloo_ops
    if method == "ddp-torch":  # the reducer's bucket all-reduce, seen through the Python comm hook
        assert sum(r["op"] == "all_reduce" and r["dtypes"] == ["float32"] for r in train) >= 4
    else:  # the communication thread alone, each collective inside a job (the in-flight count works)
        assert {r["thread"] for r in train} == {"acco-comm"}
        assert all(r["pending"] for r in train)
