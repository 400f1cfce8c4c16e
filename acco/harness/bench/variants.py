"""The bench's methods as the trainer spells them (acco/methods/variants.py): each key of its result
files (the `method` column) and the trainer's method and settings it runs, with the roles the bench
gives three of them. `--methods` takes a key or any trainer spelling; a spelling no key names runs as
itself, its spelling its key (`resolve`, open-ended)."""

from __future__ import annotations

from collections.abc import Iterable

from acco.methods import TORCH_DDP, MethodSpec, get
from acco.methods.variants import OVERLAPPED_DDP, Variant, parse, resolve_all, spelled

# the overlapped DDP's buckets on the bench's model: gptneo_tiny's share of DDP's 25 MiB buckets on
# GPT-Neo 125M (1/19), so a step has as many buckets as DDP's on the paper's model
TINY_BUCKET_MB = 0.11

VARIANTS: tuple[Variant, ...] = (
    # PyTorch DDP + ZeroRedundancyOptimizer at its best: each gradient bucket reduce-scattered and
    # all-gathered in bf16 (the minimal bytes, the gradient bytes ACCO sends, as NCCL's ring moves them;
    # gloo's all-reduce takes ~1.9x as long)
    Variant("ddp", "ddp", (("method.impl", "torch"), ("method.comm_hook", "reduce_scatter_bf16"))),
    # fp32 gradients
    Variant("ddp_rs_fp32", "ddp", (("method.impl", "torch"), ("method.comm_hook", "reduce_scatter"))),
    # PyTorch's default hook
    Variant("ddp_allreduce", "ddp", (("method.impl", "torch"), ("method.comm_hook", "allreduce"))),
    # our sequential ZeRO-1 (the reference)
    Variant("ddp_flat", "ddp", (("method.impl", "flat"),)),
    # our ZeRO-1 with its reduce-scatter bucket by bucket in the last backward: the DDP that hides
    # what it can, in buckets of TINY_BUCKET_MB
    OVERLAPPED_DDP.extended(("method.bucket_mb", TINY_BUCKET_MB)),
    Variant("dpu", "dpu", (("method.warmup_steps", 0),)),
    Variant("wp", "wp", (("method.warmup_steps", 0),)),
    Variant("acco", "acco"),
)
BY_KEY = {v.key: v for v in VARIANTS}

# the roles of three keys: the sequential flat ZeRO-1 calibrates the link and measures every bound's
# t_comp and t_sync; the targets are ACCO's, against the paper's baseline (PyTorch DDP + ZeRO-1)
REFERENCE = "ddp_flat"
SUBJECT = "acco"
BASELINE = "ddp"

# link bytes of one step relative to the flat ZeRO-1 sync's (reduce-scatter of the bf16 gradients +
# all-gather of the bf16 parameters: 2 x (N-1)/N x 2 bytes per parameter): PyTorch DDP +
# ZeroRedundancyOptimizer averages the gradients (2 (N-1)/N of the bucket: in bf16 with the
# reduce_scatter_bf16 hook, 1x; in fp32 with reduce_scatter or gloo's all-reduce, 2x), then
# broadcasts the updated fp32 partitions ((N-1)/N x 4 bytes per parameter: 1x more); by comm_hook
TORCH_HOOK_BYTES = {"reduce_scatter_bf16": 2.0, "reduce_scatter": 3.0, "allreduce": 3.0}
FLAT_BYTES = 1.0
# the overlapped flat ZeRO-1's bound: its reduce-scatter (half the flat sync's bytes) may hide in the
# last backward, its all-gather not: t_comp + t_sync / 2 at best
OVERLAPPED_BACKWARD_BYTES = 0.5


def variant(key: str) -> Variant:
    """The variant of a result key: the table's, or the spelling a run was given (open-ended)."""
    if key in BY_KEY:
        return BY_KEY[key]
    return spelled(*parse(key))


def spec(key: str) -> MethodSpec:
    method = variant(key).method
    assert method is not None  # every bench variant is a method the trainer runs
    return get(method)


def backend(key: str) -> str:
    """The trainer's backend that runs it (acco.methods: TORCH_DDP, FLAT or LOCAL)."""
    return spec(key).backend_for({"impl": variant(key).value("method.impl")})


def resolve_keys(texts: Iterable[str]) -> list[str]:
    """The keys of what a user typed (keys or trainer spellings), in order, each once; an old key
    says its spelling once; an unknown method raises acco.methods.variants.UnknownVariant."""
    return resolve_all(texts, VARIANTS, tool="bench", open_ended=True)


def sequential(key: str) -> bool:
    """A data-parallel method that syncs after its compute (a DDP): the baselines ACCO is held to."""
    s = spec(key)
    return not (s.overlapped or s.local)


def sync_bytes(key: str) -> float | None:
    """Its step's link bytes over the flat sync's (None: not a sequential method, bound by
    max(t_comp, t_sync)); a comm_hook the table does not price is None too."""
    if not sequential(key):
        return None
    v = variant(key)
    if backend(key) == TORCH_DDP:
        return TORCH_HOOK_BYTES.get(v.value("method.comm_hook"))
    return OVERLAPPED_BACKWARD_BYTES if v.value("method.overlap_backward") else FLAT_BYTES


def rounds_per_step(key: str) -> int:
    return spec(key).rounds_per_step
