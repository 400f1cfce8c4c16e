"""`train.precision`: the dtype of a run's compute and low-precision storage.

    auto  bf16 on GPU, fp32 on CPU
    bf16  bf16 autocast compute for every method; the flat methods (ddp flat, dpu, wp, acco) keep
          parameters, gradients and the communication buffer in bf16 with an fp32 master shard,
          the torch DDP baseline keeps fp32 parameters and gradients (PyTorch's own mixed precision)
    fp32  everything in fp32

Older configs said `train.bf16: true|false` (bf16 on GPU only); they read as auto / fp32."""

from __future__ import annotations

from contextlib import contextmanager

import torch

PRECISIONS = ("auto", "bf16", "fp32")


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
