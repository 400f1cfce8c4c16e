"""The trainer's own state in a checkpoint, one value (Lingua's TrainState): how far the run got
and what it needs to continue exactly (its RNG states). The backend's state sits beside it in the
same rank's part of the checkpoint; these keys are the ones checkpoints have always held, so an
older checkpoint resumes."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any


@dataclass
class TrainState:
    step: int  # committed steps
    samples: int  # samples in them, over every rank
    wall_s: float  # training time so far (the virtual clock's, on that clock)
    last_eval: float | None  # the last validation loss, if any
    rng: dict  # this rank's RNG states (acco.train.checkpoint.rng_state)

    def state_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def load_state_dict(self, state: dict) -> None:
        """Take the values of `state` (a checkpoint's part for this rank: other keys are the
        backend's and ignored here)."""
        self.step = int(state["step"])
        self.samples = int(state["samples"])
        self.wall_s = float(state["wall_s"])
        self.last_eval = state["last_eval"]
        self.rng = state["rng"]

    @classmethod
    def from_state_dict(cls, state: dict) -> TrainState:
        made = cls(0, 0, 0.0, None, {})
        made.load_state_dict(state)
        return made
