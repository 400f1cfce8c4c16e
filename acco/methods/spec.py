"""What the rest of the code needs to know about a method, as data: one frozen MethodSpec per
method (a module of this package each), looked up by name in the registry (this package's `get`).
Plain data, no torch, importing nothing else of acco: the bottom layer, so every other layer (the
config schema, the cost model, the plan on a submit host) can read it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from .settings import MethodConfig

# the backends the trainer builds (build_backend resolves these names)
TORCH_DDP = "torch_ddp"  # PyTorch's DistributedDataParallel + ZeroRedundancyOptimizer
FLAT = "flat"  # the flat engine: flat buffers, sharded AdamW, a communication thread
LOCAL = "local"  # the local methods' engine: an inner AdamW per worker, a sharded outer step


@dataclass(frozen=True)
class MethodSpec:
    """One method's facts. `schedule` names the schedule of rounds its backend runs
    (the flat and the local backends resolve it); `sync_kinds` are the values of
    acco.engine.sync.SyncKind its rounds launch (the virtual clock prices each)."""

    name: str  # method.name in conf/method/<name>.yaml
    label: str  # as the paper and the figures write it
    backend: str  # TORCH_DDP | FLAT | LOCAL; with `impls`, what an impl not listed there builds on
    schedule: str
    sync_kinds: tuple[str, ...]
    table1_row: str  # the row of TABLE1_FORMULAS a run of it measures
    settings: tuple[str, ...] = ()  # the method.* keys it reads beside `name` (default: its config's fields)
    rounds_per_step: int = 1  # rounds of compute per committed step (ACCO: an estimate and a commit)
    carries_gradients: bool = False  # a round's accumulated gradients wait for the next round's sync
    overlapped: bool = False  # rounds compute beside a sync (adaptive: more micro-batches than accum)
    tentative_step: bool = False  # a sync also computes a step it does not commit (ACCO, WP)
    local: bool = False  # a DiLoCo-type method: inner steps per worker, an outer step every few
    # local: by default its sync goes a fragment at a time, beside the next inner steps (Streaming DiLoCo)
    fragmented: bool = False
    sends: str = "gradients"  # what its syncs move between the ranks
    send_dtype: str = "train.grad_dtype"  # in which dtype (a setting's name, or a dtype)
    # method.impl -> backend, and the impl a config without one gets (only ddp has a choice)
    impls: tuple[tuple[str, str], ...] = ()
    default_impl: str | None = None
    # its update rule in the single-process reference (the reference's RULES; "": none)
    reference: str = ""
    # its settings' dataclass (a MethodConfig), and the name conf/method/<name>.yaml lists
    # first in its defaults to be checked against it (the schema's register() stores each)
    config: type = MethodConfig
    config_schema: str = "schema_acco"
    # settings its config gained after checkpoints were first written, each with the value that
    # means what such a checkpoint did: it still resumes a run that leaves them there
    # (with_added_settings)
    added_settings: tuple[tuple[str, Any], ...] = ()

    def __post_init__(self) -> None:
        if not self.settings:  # by default its settings dataclass's fields (beside `name`)
            object.__setattr__(self, "settings", tuple(f.name for f in fields(self.config) if f.name != "name"))

    @property
    def impl_names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.impls)

    def backend_for(self, options: Mapping[str, Any]) -> str:
        """The backend that runs it with these settings (conf/method/<name>.yaml, or cfg.method)."""
        if not self.impls:
            return self.backend
        return dict(self.impls).get(options.get("impl", self.default_impl), self.backend)
