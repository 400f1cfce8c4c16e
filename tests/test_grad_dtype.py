"""Equal precision across compared methods (issue 30, point 3): `train.grad_dtype` sets the flat
methods' gradient accumulator and reduce-scatter dtype, and summary.json's `precision` block names
each buffer's dtype for every method. With train.grad_dtype=fp32 in a bf16 run the flat path
accumulates and reduces in fp32, as the torch DDP baseline does."""

from __future__ import annotations

import pytest
import torch

from acco.config.experiments import compose
from acco.config.validate import ConfigError
from acco.engine.flat import FlatModel
from acco.run.validate import validate
from acco.train import memory as me
from acco.train.precision import grad_dtype
from tests.helpers.runs import SMALL_LM, load_run, run_train


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(40, 64), torch.nn.LayerNorm(64), torch.nn.Linear(64, 9))


def _backward(flat: FlatModel, x: torch.Tensor) -> None:
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = flat.model(x).float().pow(2).mean()
    loss.backward()


def test_an_fp32_accumulator_sums_each_bf16_micro_batch_gradient_in_fp32():
    """Each micro-batch's gradient is rounded to bf16 once (the parameters' dtype) and the sum is
    kept in fp32; a bf16 accumulator rounds every sum (what the fp32 one avoids)."""
    torch.manual_seed(1)
    batches = [torch.randn(16, 40) for _ in range(4)]
    wide = FlatModel(_model(), 2, dtype=torch.bfloat16, grad_dtype=torch.float32)
    narrow = FlatModel(_model(), 2, dtype=torch.bfloat16)  # today's: bf16 accumulator
    assert wide.params.dtype == torch.bfloat16 and wide.grads.dtype == torch.float32
    assert torch.equal(wide.params, narrow.params)
    expected = torch.zeros_like(wide.grads)
    for x in batches:
        narrow.zero_grads()
        _backward(narrow, x)
        expected += narrow.grads.float()  # this micro-batch's bf16 gradient, summed in fp32
        _backward(wide, x)
        assert not wide.micro_grads.any()  # the hook moved it into the accumulator
    assert torch.equal(wide.grads, expected)
    narrow.zero_grads()
    for x in batches:
        _backward(narrow, x)
    assert not torch.equal(narrow.grads.float(), expected)  # bf16 sums round
    # the default (no grad_dtype) keeps one buffer and no micro-batch buffer
    assert narrow.micro_grads is None and narrow.grads.dtype == torch.bfloat16


def test_the_estimate_counts_the_fp32_accumulator_and_buffer():
    """bf16 parameters (2), the bf16 micro-batch gradient + fp32 accumulator (2 + 4), an fp32
    communication buffer (4); torch DDP and fp32 runs are unchanged by the setting."""
    for method in (["method=acco"], ["method=ddp", "method.impl=flat"]):
        cfg = compose([*method, "train.precision=bf16", "train.grad_dtype=fp32"])
        layout = me.state_layout(cfg, gpu=False)
        assert (layout.param_bytes, layout.grad_bytes, layout.buffer_bytes) == (2, 6, 4)
        cfg["train"]["grad_dtype"] = "auto"  # the default: fp32 gradients (issue 42 point 8)
        assert (layout.param_bytes, layout.grad_bytes, layout.buffer_bytes) == (2, 6, 4)
        cfg["train"]["grad_dtype"] = "bf16"  # the paper's bf16 buffers, asked for
        assert me.state_layout(cfg, gpu=False) is me.FLAT_BF16
    torch_ddp = compose(["method=ddp", "train.precision=bf16", "train.grad_dtype=fp32"])
    assert me.state_layout(torch_ddp, gpu=False) is me.TORCH_ZERO1
    for choice in ("fp32", "bf16"):  # CPU: fp32 everywhere already (an accumulator never narrows)
        fp32 = compose(["method=acco", f"train.grad_dtype={choice}"])
        assert me.state_layout(fp32, gpu=False) is me.FLAT_FP32
        assert grad_dtype(fp32["train"], torch.device("cpu")) == torch.float32


def test_a_bad_grad_dtype_is_one_error_line(tmp_path):
    cfg = compose(["train.grad_dtype=fp16"])
    cfg["out_dir"] = str(tmp_path / "run")
    with pytest.raises(ConfigError, match=r"train.grad_dtype must be one of auto, bf16, fp32, got 'fp16'"):
        validate(cfg)


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
