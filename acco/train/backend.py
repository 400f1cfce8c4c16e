"""What the trainer needs from an implementation of data-parallel training: run the method's
schedule of committed steps, say whether the last step's gradient was finite, hand out and take
back its checkpoint state, the committed parameters θ_t, and its memory figures.

Two implementations: PyTorch's own DistributedDataParallel + ZeroRedundancyOptimizer (the paper's
ddp baseline, TorchDDPBackend) and the flat engine, on which every method is a schedule of rounds
(FlatBackend). Signals, checkpoint files, evaluation and metrics are the trainer's, the same for
both."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager

import torch

from ..engine.compute import MicroBatchRunner
from ..engine.rounds import StepCallback, StopRule
from ..engine.virtual_clock import VirtualClock


class Backend(ABC):
    runner: MicroBatchRunner | None  # the compute side: data position, micro-batch counts
    # the model's parameters are stored in the compute dtype (bf16 on the flat path); otherwise
    # evaluation rounds them to it for the block (evaluation_precision)
    parameters_in_compute_dtype: bool
    # gradients carried from one committed step into the next (dpu/wp/acco): part of a checkpoint
    carries_gradients: bool
    # clock.mode=virtual: the modelled time of every rank (VirtualClock); None: real time
    clock: VirtualClock | None = None

    @abstractmethod
    def run(self, until: StopRule, on_step: StepCallback, start: int) -> None:
        """Committed steps start, start+1, ... until `until` says the run is over; `on_step(t,
        result)` after each, at a step boundary (nothing in flight)."""

    @abstractmethod
    def carry_votes(self, votes: Callable[[], Sequence[float]]) -> None:
        """Send `votes()` (this rank's, a fixed length) with every step's counts: the ranks agree on
        them inside the collective they already share, with no barrier of their own."""

    @abstractmethod
    def take_agreed(self) -> tuple[bool, tuple[float, ...]]:
        """What every rank agreed on since the last committed step, alike on every rank: whether a
        synced gradient held inf/nan, and the votes summed over ranks (and over the step's syncs)."""

    def pending_grads_nonfinite(self) -> bool:
        """Whether the gradients carried into the next step hold inf/nan here (this rank only)."""
        return False

    @abstractmethod
    def state_dicts(self) -> tuple[dict, dict]:
        """(the state every rank shares: the parameters; this rank's own entries) at a step boundary."""

    @abstractmethod
    def load_state_dicts(self, shared: dict, own: dict) -> None:
        """Continue from what state_dicts() gave (read back from a checkpoint)."""

    @abstractmethod
    def committed_vector(self) -> torch.Tensor:
        """θ_t as an fp32 vector of the trainable parameters (same on every rank; may be collective)."""

    @abstractmethod
    def load_committed_into_model(self, vector: torch.Tensor | None = None) -> None:
        """Put θ_t into the model (collective unless `vector`, a committed_vector(), is given)."""

    @abstractmethod
    def committed_parameters(self) -> AbstractContextManager:
        """For the block, the model holds θ_t (collective on the flat path)."""

    @abstractmethod
    def memory_report(self) -> dict:
        """Bytes of optimizer state, parameters, gradients and communication buffer on this rank."""

    @abstractmethod
    def precision_report(self) -> dict:
        """The dtype of each of its buffers, by role (precision_report)."""

    @abstractmethod
    def round_micro_batches(self) -> list[int]:
        """This rank's micro-batches in each round so far."""

    def close(self, wait: bool = True) -> None:  # noqa: B027 (most backends have no thread)
        """Stop any thread of its own (after a failure it may be stuck: `wait` False)."""

    @abstractmethod
    def release(self) -> None:
        """Drop the references to process-group users, while their groups still exist."""
