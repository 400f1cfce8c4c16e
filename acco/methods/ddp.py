"""DDP + ZeRO-1, sequential: accumulate, then sync and step (the paper's baseline). method.impl=torch:
PyTorch's DDP + ZeroRedundancyOptimizer (the suite's default, which sends fp32 gradients, or the
comm_hook's); impl=flat: the same update on the flat engine, optionally overlapped with the backward."""

from dataclasses import dataclass, field

from .settings import MISSING, Check, MethodConfig, setting
from .spec import FLAT, TORCH_DDP, MethodSpec

# how PyTorch's DDP averages a gradient bucket (the torch DDP engine implements each)
COMM_HOOKS = ("allreduce", "reduce_scatter", "reduce_scatter_bf16")


@dataclass
class DdpMethod(MethodConfig):  # conf/method/ddp.yaml
    impl: str = MISSING  # torch (PyTorch DDP + ZeRO) | flat (the shared engine): the impls of its spec below
    # impl=torch: how DDP averages a gradient bucket, allreduce (PyTorch's own) | reduce_scatter
    # (reduce-scatter + all-gather, the minimal bytes) | reduce_scatter_bf16
    comm_hook: str = setting("allreduce", Check("choice", choices=COMM_HOOKS, default="allreduce"))
    # impl=flat: reduce-scatter gradient buckets during the last backward
    overlap_backward: bool = setting(False, Check("bool", default=False))
    # DDP's bucket_cap_mb; null: DDP's defaults (1 MiB first, then 25). `unit`: what the number counts,
    # which acco.Overlapped's refusal names
    bucket_mb: float | None = field(
        default=None, metadata={"check": Check("number", minimum=0.0, above=True, optional=True), "unit": "MiB"}
    )


SPEC = MethodSpec(
    name="ddp",
    label="DDP",
    backend=FLAT,
    schedule="sequential",
    sync_kinds=("commit",),
    table1_row="zero1",  # the optimizer state is sharded (ZeRO-1) in both impls
    send_dtype="train.grad_dtype (impl=flat); fp32, or the comm_hook's (impl=torch)",
    impls=(("torch", TORCH_DDP), ("flat", FLAT)),
    default_impl="torch",
    reference="sequential",
    config=DdpMethod,
    config_schema="schema_ddp",
    added_settings=(("overlap_backward", False), ("bucket_mb", None)),  # the backward overlap (issue 40)
)
