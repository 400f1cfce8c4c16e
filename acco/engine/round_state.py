"""What a round engine carries from one committed step into the next, as one value each: the flat
engine's (ddp flat, dpu, wp, acco) and the local methods' (diloco, streaming_diloco). A checkpoint
saves `state_dict()` (the keys a checkpoint has always held, so an older one loads), a resume reads
it back with `from_state_dict`; the engine copies the tensors into its own buffers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch


@dataclass
class RoundState:
    """A flat round engine's state between two committed steps (the parameters, the same on every
    rank, are saved once beside it)."""

    opt: dict  # this rank's optimizer shard
    runner: dict  # the data position (the micro-batch runner's state)
    rounds_micro_batches: list[int]  # this rank's micro-batches in each round so far
    grads: torch.Tensor | None = None  # the gradients the next round sends (dpu, wp, acco carry them)
    clock: dict | None = None  # the virtual clock's (clock.mode=virtual)

    def state_dict(self) -> dict[str, Any]:
        state: dict[str, Any] = {
            "opt": self.opt,
            "runner": self.runner,
            "rounds_micro_batches": list(self.rounds_micro_batches),
        }
        if self.grads is not None:
            state["grads"] = self.grads
        if self.clock is not None:
            state["clock"] = self.clock
        return state

    @classmethod
    def from_state_dict(cls, state: dict) -> RoundState:
        return cls(
            opt=state["opt"],
            runner=state["runner"],
            rounds_micro_batches=list(state["rounds_micro_batches"]),
            grads=state.get("grads"),
            clock=state.get("clock"),
        )


@dataclass
class InFlightSync:
    """A fragment's outer step taken before a checkpoint whose result has not landed yet: it lands
    after inner step `lands_after`, also in the resumed run."""

    fragment: int
    lands_after: int
    staging: torch.Tensor  # φ'_f, the fragment's new global parameters

    def state_dict(self) -> dict[str, Any]:
        return {"fragment": self.fragment, "lands_after": self.lands_after, "staging": self.staging}

    @classmethod
    def from_state_dict(cls, state: dict) -> InFlightSync:
        return cls(int(state["fragment"]), int(state["lands_after"]), state["staging"])


@dataclass
class LocalRoundState:
    """A local method's worker state between two inner steps (φ, the same on every rank, is saved
    once beside it)."""

    inner: dict  # θ_w (fp32) and its AdamW moments: this worker's own
    momentum: list[torch.Tensor]  # the outer momentum's shards, one per fragment
    last_start: list[int]  # the inner step after which each fragment's sync last started
    runner: dict
    rounds_micro_batches: list[int]
    in_flight: InFlightSync | None = None
    clock: dict | None = None

    def state_dict(self) -> dict[str, Any]:
        return {
            "in_flight": None if self.in_flight is None else self.in_flight.state_dict(),
            "inner": self.inner,
            "momentum": list(self.momentum),
            "last_start": list(self.last_start),
            "runner": self.runner,
            "rounds_micro_batches": list(self.rounds_micro_batches),
            **({"clock": self.clock} if self.clock is not None else {}),
        }

    @classmethod
    def from_state_dict(cls, state: dict) -> LocalRoundState:
        flight = state.get("in_flight")
        return cls(
            inner=state["inner"],
            momentum=list(state["momentum"]),
            last_start=list(state["last_start"]),
            runner=state["runner"],
            rounds_micro_batches=list(state["rounds_micro_batches"]),
            in_flight=None if flight is None else InFlightSync.from_state_dict(flight),
            clock=state.get("clock"),
        )
