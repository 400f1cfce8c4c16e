"""`train.precision`: the dtype of a run's compute and low-precision storage.

    auto  bf16 on GPU, fp32 on CPU
    bf16  bf16 autocast compute for every method; the flat methods (ddp flat, dpu, wp, acco) keep
          parameters, gradients and the communication buffer in bf16 with an fp32 master shard,
          the torch DDP baseline keeps fp32 parameters and gradients (PyTorch's own mixed precision)
    fp32  everything in fp32

Older configs said `train.bf16: true|false` (bf16 on GPU only); they read as auto / fp32.

`train.grad_dtype`: the flat methods' gradient accumulator and reduce-scatter (and so their
communication buffer) dtype, and the local methods' pseudo-gradient on the wire (diloco,
streaming_diloco: auto/fp32 reduces Δ in fp32 beside bf16 parameters, bf16 as torchft does, in the
parameters' dtype).

    auto  fp32 (the default): an fp32 accumulator and an fp32 reduce-scatter; in a bf16 run each
          micro-batch's gradient is rounded to bf16 once (the parameters' dtype) and summed in fp32,
          as the torch DDP baseline does, so compared methods move gradients in the same dtypes
          (an adaptive round sums up to 64 x accum micro-batches: in bf16 each sum would round)
    fp32  the same, said explicitly
    bf16  the storage dtype of train.precision (bf16 runs: bf16, each micro-batch added in bf16 and
          each ring hop of the reduce-scatter rounded to bf16: the paper's bf16 buffers, half the
          bytes on the wire; fp32 runs keep fp32, an accumulator is never narrower than the
          parameters)

Whatever the accumulator, the parameters come back in their own dtype: the all-gather sends the
parameters' dtype (bf16 in a bf16 run), not the accumulator's.

The torch DDP baseline accumulates in fp32 whatever this says (its parameters are fp32)."""

from __future__ import annotations

from contextlib import contextmanager

import torch

PRECISIONS = ("auto", "bf16", "fp32")
GRAD_DTYPES = ("auto", "bf16", "fp32")
DTYPE_NAMES = {torch.bfloat16: "bf16", torch.float32: "fp32", torch.float16: "fp16", torch.float64: "fp64"}


def precision_name(train_cfg: dict, device_type: str) -> str:
    """ "bf16" or "fp32" for a run's train section on a device type ("cpu" or "cuda")."""
    choice = train_cfg.get("precision")
    if choice is None:  # a config from before train.precision
        choice = "auto" if train_cfg.get("bf16", True) else "fp32"
    if choice not in PRECISIONS:
        raise ValueError(f"train.precision must be one of {', '.join(PRECISIONS)}, got {choice!r}")
    if choice == "auto":
        return "bf16" if str(device_type).startswith("cuda") else "fp32"
    return choice


def compute_dtype(train_cfg: dict, device: torch.device) -> torch.dtype:
    return torch.bfloat16 if precision_name(train_cfg, device.type) == "bf16" else torch.float32


def grad_dtype(train_cfg: dict, device: torch.device) -> torch.dtype:
    """The flat methods' gradient accumulator and reduce dtype (train.grad_dtype)."""
    choice = train_cfg.get("grad_dtype") or "auto"
    if choice not in GRAD_DTYPES:
        raise ValueError(f"train.grad_dtype must be one of {', '.join(GRAD_DTYPES)}, got {choice!r}")
    if choice == "bf16":
        return compute_dtype(train_cfg, device)  # the storage dtype: fp32 in an fp32 run
    return torch.float32  # auto, fp32


def dtype_name(dtype: torch.dtype) -> str:
    return DTYPE_NAMES.get(dtype, str(dtype).removeprefix("torch."))


def precision_report(backend) -> dict:
    """summary.json's `precision` block: the dtype of each buffer of a run's backend (what it
    computes in, stores its parameters in, holds one micro-batch's gradient in, accumulates
    micro-batches in, reduces and all-gathers in, and its optimizer's master and moments)."""
    return backend.precision_report()


@contextmanager
def parameters_in(model: torch.nn.Module, dtype: torch.dtype):
    """For the block, the model's trainable parameters of another dtype are replaced, in their
    modules' slots, by copies in `dtype` (tied weights: one copy); the originals come back after.

    Not `p.data = p.data.to(dtype)`: a change of dtype through `.data` gives the parameter a new
    AccumulateGrad node, and PyTorch DDP's reducer, whose hooks sit on the old one, would silently
    stop all-reducing that parameter's gradients. Only for no-grad use (evaluation)."""
    replaced, copies = [], {}
    for module in model.modules():
        for name, p in list(module._parameters.items()):
            if p is None or not p.requires_grad or p.dtype == dtype:
                continue
            if id(p) not in copies:
                copies[id(p)] = torch.nn.Parameter(p.detach().to(dtype), requires_grad=False)
            replaced.append((module, name, p))
            module._parameters[name] = copies[id(p)]
    try:
        yield
    finally:
        for module, name, p in replaced:
            module._parameters[name] = p
