"""DiLoCo (Douillard et al. 2023, arXiv 2311.08105): an inner AdamW per worker, and every
sync_every inner steps an outer Nesterov step on the averaged pseudo-gradient, waited for."""

from dataclasses import dataclass

from .settings import MISSING, Check, MethodConfig, setting
from .spec import LOCAL, MethodSpec


@dataclass
class LocalMethod(MethodConfig):  # conf/method/diloco.yaml, streaming_diloco.yaml
    # each by its check; together, as a schedule that can run, by check_schedule
    sync_every: int = setting(MISSING, Check("int", 1))  # H: inner steps between two syncs of a fragment
    fragments: int = setting(MISSING, Check("int", 1))  # F: contiguous pieces of the model, synchronised in turn
    # τ: inner steps a fragment's sync runs beside (0: not overlapped)
    overlap_steps: int = setting(MISSING, Check("int", 0))
    mixing: float = setting(MISSING, Check("number", 0.0, 1.0))  # α: θ <- α·θ + (1 - α)·φ when a sync lands
    outer_lr: float = setting(MISSING, Check("number", 0.0, above=True))  # the outer SGD's learning rate
    outer_momentum: float = setting(MISSING, Check("number", 0.0, 0.999999))  # its Nesterov momentum, below 1


SPEC = MethodSpec(
    name="diloco",
    label="DiLoCo",
    backend=LOCAL,
    schedule="local_rounds",
    # each inner step agrees on the counts; the outer syncs are named per fragment
    # (fragment_kind)
    sync_kinds=("local",),
    table1_row="diloco",
    local=True,
    sends="pseudo-gradients",
    reference="local",
    config=LocalMethod,
    config_schema="schema_local",
)
