"""The simulator's methods as the trainer spells them (acco/methods/variants.py): each result key
(the `method` column of its CSVs) and the trainer's method and settings it models. FSDP and
replicated DDP are modelled for comparison only: the trainer has no such method (method=None).

Every method of the registry is simulated: one the table does not name (a method registered
later, e.g. by a test) gets a variant of its own, keyed by its name, at the trainer's defaults, and
the schedule its spec's facts choose (`Modelled`): a local method DiLoCo's, an overlapped one the
rounds of DPU/WP/ACCO, any other DDP's."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from acco.methods import METHODS, get
from acco.methods.variants import OVERLAPPED_DDP, UnknownVariant, Variant, resolve_all

VARIANTS: tuple[Variant, ...] = (
    Variant("ddp", "ddp", (("method.impl", "flat"),), "DDP+ZeRO-1"),
    replace(OVERLAPPED_DDP, label="DDP+ZeRO-1, overlapped backward"),
    Variant("ddp_allreduce", None, (), "DDP (replicated), all-reduce in the backward"),
    Variant("fsdp", None, (), "FSDP FULL_SHARD (ZeRO-3), layer by layer"),
    Variant("fsdp_grad_op", None, (), "FSDP SHARD_GRAD_OP (ZeRO-2), layer by layer"),
    # the simulator's DPU and WP compute `accum` micro-batches a round, as deterministic runs do
    Variant("dpu", "dpu", (("train.deterministic", True),), "DPU"),
    Variant("wp", "wp", (("train.deterministic", True),), "WP"),
    Variant("acco", "acco", (("train.deterministic", True),), "ACCO (deterministic)"),
    Variant("acco_adaptive", "acco", (("train.deterministic", False),), "ACCO (adaptive)"),
    Variant("diloco", "diloco", (), "DiLoCo"),
    Variant("streaming_diloco", "streaming_diloco", (), "Streaming DiLoCo"),
)

# the schedules (sweep.py simulates each)
SEQUENTIAL = "sequential"  # accumulate, then sync and step (schedules.ddp)
BUCKETED = "bucketed"  # DDP whose buckets are reduced in the last backward (sweep.overlap_timing)
LAYERWISE = "layerwise"  # FSDP's collectives layer by layer
OVERLAPPED = "overlapped"  # each round's sync beside the next round's compute (schedules.overlapped)
LOCAL = "local"  # inner steps per worker, an outer sync every H (schedules.local)


@dataclass(frozen=True)
class Modelled:
    """What the simulator needs to know of one variant: its schedule and the facts that shape it."""

    variant: Variant
    label: str
    schedule: str
    table1_row: str  # TABLE1_FORMULAS's row of its memory per GPU
    rounds_per_step: int = 1  # rounds per committed step; each computes accum / rounds_per_step
    adaptive: bool = False  # overlapped rounds compute until their sync ends (train.deterministic=false)
    tentative_step: bool = False  # its sync also computes a step it does not commit (more optimizer bytes)
    replicated: bool = False  # no ZeRO: each bucket all-reduced, every GPU steps the whole model
    fragmented: bool = False  # local: the scenario's F fragments synced in turn, beside τ inner steps

    @property
    def key(self) -> str:
        return self.variant.key


# the variants the trainer has no method for: their schedule, Table 1's row (the fsdp rows are
# fsdp.memory_gb's, which adds no_sync's unsharded gradients)
_WITHOUT_METHOD = {
    "ddp_allreduce": Modelled(VARIANTS[2], VARIANTS[2].label, BUCKETED, "ddp", replicated=True),
    "fsdp": Modelled(VARIANTS[3], VARIANTS[3].label, LAYERWISE, "zero3"),
    "fsdp_grad_op": Modelled(VARIANTS[4], VARIANTS[4].label, LAYERWISE, "zero2"),
}


def table() -> tuple[Variant, ...]:
    """VARIANTS, then one variant at the trainer's defaults for every registered method they do not
    name (read when called: a method registered after import is simulated too)."""
    named = {v.method for v in VARIANTS}
    return VARIANTS + tuple(Variant(name, name, (), spec.label) for name, spec in METHODS.items() if name not in named)


def keys() -> tuple[str, ...]:
    """Every result key, in the table's order (`--methods`' default)."""
    return tuple(v.key for v in table())


def modelled(key: str) -> Modelled:
    """The facts of the variant keyed `key`, from its method's spec and its settings."""
    if key in _WITHOUT_METHOD:
        return _WITHOUT_METHOD[key]
    v = next((v for v in table() if v.key == key), None)
    if v is None or v.method is None:
        raise UnknownVariant(f"unknown method {key!r}: use one of {', '.join(keys())}")
    spec = get(v.method)
    label = v.label or spec.label
    if spec.local:
        return Modelled(v, label, LOCAL, spec.table1_row, fragmented=spec.fragmented)
    if spec.overlapped:
        adaptive = v.value("train.deterministic") is False
        return Modelled(v, label, OVERLAPPED, spec.table1_row, spec.rounds_per_step, adaptive, spec.tentative_step)
    schedule = BUCKETED if v.value("method.overlap_backward") else SEQUENTIAL
    return Modelled(v, label, schedule, spec.table1_row, tentative_step=spec.tentative_step)


def labels() -> dict[str, str]:
    """Each key's label, as the figures and tables write it."""
    return {key: modelled(key).label for key in keys()}


def resolve_keys(texts: Iterable[str]) -> list[str]:
    """The keys of what a user typed (`--methods`: keys or trainer spellings), in order, each once;
    an old key says its spelling once on stderr; an unknown one raises UnknownVariant, one line."""
    return resolve_all(texts, table(), tool="simulate")
