"""The trainer's and the round engines' carried state are one dataclass each (issue 52), and what
they save is what checkpoints have always held: a checkpoint written before they existed (the plain
dicts below are its rank parts, key for key) loads into them and is saved back unchanged."""

from __future__ import annotations

import torch

from acco.engine.round_state import InFlightSync, LocalRoundState, RoundState
from acco.train.train_state import TrainState

RNG = {"python": (3, (1, 2), None), "torch": torch.arange(4, dtype=torch.uint8)}


def test_the_trainers_state_keeps_the_checkpoints_keys():
    older = {"step": 7, "samples": 224, "wall_s": 6.25, "last_eval": None, "rng": RNG, "engine": {"x": 1}}
    state = TrainState.from_state_dict(older)  # the backend's keys beside it are not the trainer's
    assert state == TrainState(7, 224, 6.25, None, RNG)
    assert state.state_dict() == {k: v for k, v in older.items() if k != "engine"}
    assert list(state.state_dict()) == ["step", "samples", "wall_s", "last_eval", "rng"]
    state.load_state_dict({**older, "step": 8, "last_eval": 4.5})
    assert (state.step, state.last_eval) == (8, 4.5)


def test_the_flat_engines_state_keeps_the_checkpoints_keys():
    grads = torch.ones(6)
    older = {"opt": {"step": 3}, "runner": {"next_index": 12}, "rounds_micro_batches": [2, 2], "grads": grads}
    state = RoundState.from_state_dict(older)
    assert state.grads is grads and state.clock is None
    assert state.state_dict() == older  # no clock key where the run has no virtual clock
    sequential = {k: v for k, v in older.items() if k != "grads"}  # ddp: nothing carried
    assert RoundState.from_state_dict(sequential).state_dict() == sequential
    virtual = {**sequential, "clock": {"now": [1.0, 2.0]}}
    assert list(RoundState.from_state_dict(virtual).state_dict()) == ["opt", "runner", "rounds_micro_batches", "clock"]


def test_the_local_engines_state_keeps_the_checkpoints_keys():
    staging = torch.zeros(3)
    older = {
        "in_flight": {"fragment": 0, "lands_after": 7, "staging": staging},
        "inner": {"master": torch.zeros(3)},
        "momentum": [torch.zeros(2), torch.zeros(2)],
        "last_start": [6, 4],
        "runner": {"next_index": 14},
        "rounds_micro_batches": [1] * 7,
    }
    state = LocalRoundState.from_state_dict(older)
    assert state.in_flight == InFlightSync(0, 7, staging) and state.clock is None
    saved = state.state_dict()
    assert list(saved) == list(older) and saved["in_flight"] == older["in_flight"]
    assert saved["last_start"] == [6, 4] and saved["momentum"][1] is older["momentum"][1]
    landed = {**older, "in_flight": None, "clock": {"now": [0.5]}}
    assert LocalRoundState.from_state_dict(landed).state_dict() == landed
