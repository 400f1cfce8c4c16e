"""WP (weight prediction): DPU whose next round computes on predicted parameters, a tentative
second AdamW step with the same gradient; method.warmup_steps sequential steps first."""

from .dpu import WarmupMethod
from .spec import FLAT, MethodSpec

SPEC = MethodSpec(
    name="wp",
    label="WP",
    backend=FLAT,
    schedule="delayed_predict",
    sync_kinds=("commit", "commit+predict"),
    table1_row="wp",
    carries_gradients=True,
    overlapped=True,
    tentative_step=True,
    reference="delayed_predict",
    config=WarmupMethod,
    config_schema="schema_warmup",
)
