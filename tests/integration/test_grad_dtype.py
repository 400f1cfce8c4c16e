"""Equal precision across compared methods (issue 30, point 3): `train.grad_dtype` sets the flat
methods' gradient accumulator and reduce-scatter dtype, and summary.json's `precision` block names
each buffer's dtype for every method. With train.grad_dtype=fp32 in a bf16 run the flat path
accumulates and reduces in fp32, as the torch DDP baseline does.

Here the tests that start processes (marked integration); the in-process ones are in
tests/unit/test_grad_dtype.py."""

from __future__ import annotations

import pytest

from acco.train import memory as me
from tests.helpers.runs import SMALL_LM, load_run, run_train

BF16 = [
    *SMALL_LM,
    "world_size=2",
    "train.steps=2",
    "train.accum=2",
    "train.deterministic=true",
    "train.precision=bf16",
    "train.trace=false",
]


@pytest.mark.integration
def test_with_fp32_gradients_flat_ddp_accumulates_and_reduces_as_torch_ddp(tmp_path):
    """The precision block of every run, and the one setting under which the flat ddp and torch
    DDP runs accumulate and reduce in the same dtype; its memory equals the estimate byte for byte."""
    runs = {
        "torch": ["method=ddp", "method.impl=torch"],
        "flat_fp32": ["method=ddp", "method.impl=flat", "train.grad_dtype=fp32"],
        "flat_auto": ["method=ddp", "method.impl=flat"],
        "flat_bf16": ["method=ddp", "method.impl=flat", "train.grad_dtype=bf16"],
    }
    blocks, summaries = {}, {}
    for name, args in runs.items():
        out = str(tmp_path / name)
        run_train([*args, *BF16, f"out_dir={out}"])
        summaries[name] = load_run(out)
        assert summaries[name]["summary"]["status"] == "completed"
        blocks[name] = summaries[name]["summary"]["precision"]
    keys = {"compute", "parameters", "micro_batch_grad", "grad_accum", "reduce", "all_gather", "master", "moments"}
    assert all(set(b) == keys for b in blocks.values()), blocks
    assert blocks["torch"] == dict.fromkeys(keys - {"compute"}, "fp32") | {"compute": "bf16"}
    for key in ("compute", "grad_accum", "reduce", "master", "moments"):
        assert blocks["flat_fp32"][key] == blocks["torch"][key], key
    assert blocks["flat_fp32"]["parameters"] == "bf16"  # the flat path's storage is unchanged
    assert blocks["flat_fp32"]["all_gather"] == "bf16"  # the parameters come back in their own dtype
    # the default in bf16 is the baseline's fp32 accumulator and reduce; bf16 when asked for
    assert blocks["flat_auto"] == blocks["flat_fp32"]
    assert (blocks["flat_bf16"]["grad_accum"], blocks["flat_bf16"]["reduce"]) == ("bf16", "bf16")
    run = summaries["flat_fp32"]
    estimated = me.model_states(me.model_shape(run["cfg"]).groups, 2, me.state_layout(run["cfg"], gpu=False))
    keys4 = ("param_bytes", "grad_bytes", "comm_buffer_bytes", "optimizer_state_bytes")
    assert estimated == [{k: r[k] for k in keys4} for r in run["summary"]["per_rank"]]


@pytest.mark.integration
def test_the_local_methods_pseudo_gradient_moves_in_train_grad_dtype(tmp_path):
    """diloco in a bf16 run (issue 42 point 9): by default Δ is reduced in fp32 (as the flat methods'
    gradients), in bf16 (the parameters' dtype, as torchft) when asked for; the outer step's result
    φ' comes back in fp32 either way, and the memory equals the estimate byte for byte."""
    local = [*BF16, "method=diloco", "method.sync_every=2", "method.fragments=1"]
    local += ["train.samples=null", "train.tokens=null"]
    blocks = {}
    for choice in ("auto", "bf16"):
        out = str(tmp_path / choice)
        run_train([*local, f"train.grad_dtype={choice}", f"out_dir={out}"])
        run = load_run(out)
        assert run["summary"]["status"] == "completed"
        blocks[choice] = run["summary"]["precision"]
        layout = me.state_layout(run["cfg"], gpu=False)
        estimated = me.model_states(me.model_shape(run["cfg"]).groups, 2, layout)
        keys4 = ("param_bytes", "grad_bytes", "comm_buffer_bytes", "optimizer_state_bytes")
        assert estimated == [{k: r[k] for k in keys4} for r in run["summary"]["per_rank"]]
    assert (blocks["auto"]["parameters"], blocks["auto"]["reduce"], blocks["auto"]["all_gather"]) == (
        "bf16",
        "fp32",
        "fp32",
    )
    assert (blocks["bf16"]["parameters"], blocks["bf16"]["reduce"]) == ("bf16", "bf16")
