"""DDP + ZeRO-1, sequential: accumulate, then sync and step (the paper's baseline). method.impl=torch:
PyTorch's DDP + ZeroRedundancyOptimizer (the suite's default, which sends fp32 gradients, or the
comm_hook's); impl=flat: the same update on the flat engine, optionally overlapped with the backward."""

from .spec import FLAT, TORCH_DDP, MethodSpec

SPEC = MethodSpec(
    name="ddp",
    label="DDP",
    backend=FLAT,
    schedule="sequential",
    sync_kinds=("commit",),
    table1_row="zero1",  # the optimizer state is sharded (ZeRO-1) in both impls
    settings=("impl", "comm_hook", "overlap_backward", "bucket_mb"),
    send_dtype="train.grad_dtype (impl=flat); fp32, or the comm_hook's (impl=torch)",
    impls=(("torch", TORCH_DDP), ("flat", FLAT)),
    default_impl="torch",
)
