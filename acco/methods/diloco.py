"""DiLoCo (Douillard et al. 2023, arXiv 2311.08105): an inner AdamW per worker, and every
sync_every inner steps an outer Nesterov step on the averaged pseudo-gradient, waited for."""

from dataclasses import dataclass

from .settings import MISSING, MethodConfig
from .spec import LOCAL, MethodSpec


@dataclass
class LocalMethod(MethodConfig):  # conf/method/diloco.yaml, streaming_diloco.yaml
    # checked together, as a schedule that can run (acco/engine/local_rounds.py check_local_method)
    sync_every: int = MISSING  # H: inner steps between two syncs of a fragment
    fragments: int = MISSING  # F: contiguous pieces of the model, synchronised in turn
    overlap_steps: int = MISSING  # τ: inner steps a fragment's sync runs beside (0: not overlapped)
    mixing: float = MISSING  # α: θ <- α·θ + (1 - α)·φ when a sync lands
    outer_lr: float = MISSING  # the outer SGD's learning rate
    outer_momentum: float = MISSING  # its Nesterov momentum


SPEC = MethodSpec(
    name="diloco",
    label="DiLoCo",
    backend=LOCAL,
    schedule="local_rounds",
    # each inner step agrees on the counts; the outer syncs are named per fragment
    # (acco/engine/local_rounds.py fragment_kind)
    sync_kinds=("local",),
    table1_row="diloco",
    local=True,
    sends="pseudo-gradients",
    reference="local",
    config=LocalMethod,
    config_schema="schema_local",
)
