"""Equal precision across compared methods (issue 30, point 3): `train.grad_dtype` sets the flat
methods' gradient accumulator and reduce-scatter dtype, and summary.json's `precision` block names
each buffer's dtype for every method. With train.grad_dtype=fp32 in a bf16 run the flat path
accumulates and reduces in fp32, as the torch DDP baseline does.

Here the tests in-process; those that start processes (marked integration) are in
tests/integration/test_grad_dtype.py."""

from __future__ import annotations

import pytest
import torch

from acco.config.experiments import compose
from acco.config.validate import ConfigError
from acco.engine.flat import FlatModel
from acco.harness.run.validate import validate
from acco.train import memory as me
from acco.train.precision import grad_dtype


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
