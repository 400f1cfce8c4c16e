"""DPU (delayed parameter update): a round's gradients are synced while the next round computes on
the parameters one step old; method.warmup_steps sequential steps first."""

from dataclasses import dataclass

from .settings import MISSING, Check, MethodConfig, setting
from .spec import FLAT, MethodSpec


@dataclass
class WarmupMethod(MethodConfig):  # conf/method/dpu.yaml, wp.yaml
    warmup_steps: int = setting(MISSING, Check("int", minimum=0))  # DDP steps before the delayed updates start


SPEC = MethodSpec(
    name="dpu",
    label="DPU",
    backend=FLAT,
    schedule="delayed",
    sync_kinds=("commit",),
    table1_row="dpu",
    carries_gradients=True,
    overlapped=True,
    reference="delayed",
    config=WarmupMethod,
    config_schema="schema_warmup",
)
