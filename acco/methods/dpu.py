"""DPU (delayed parameter update): a round's gradients are synced while the next round computes on
the parameters one step old; method.warmup_steps sequential steps first."""

from .spec import FLAT, MethodSpec

SPEC = MethodSpec(
    name="dpu",
    label="DPU",
    backend=FLAT,
    schedule="delayed",
    sync_kinds=("commit",),
    table1_row="dpu",
    settings=("warmup_steps",),
    carries_gradients=True,
    overlapped=True,
)
