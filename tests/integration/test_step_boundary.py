"""No barrier between committed steps (issue 13): the ranks agree on checkpoint signals and
non-finite gradients inside the sync's own count all-reduce, so after a committed step a fast rank
goes straight on to its next round instead of waiting at the step boundary for the slowest rank."""

from __future__ import annotations

import os

import pytest

from acco.engine.trace import COMPUTE, load_spans
from tests.helpers.runs import SMALL_LM, run_train

STEPS = 6


def last_end_and_first_start(spans: list[dict]) -> tuple[dict, dict]:
    """Per committed step: when the rank's compute lane last worked on it (its micro-batches and a
    slowed worker's sleeps after them), and when it first started computing for it."""
    end: dict[int, float] = {}
    start: dict[int, float] = {}
    for e in spans:
        if e["tid"] != COMPUTE or e["name"] == "wait for sync":
            continue
        step = e["args"]["step"]
        end[step] = max(end.get(step, 0.0), e["ts"] + e["dur"])
        if e["cat"] == "compute":
            start[step] = min(start.get(step, float("inf")), e["ts"])
    return end, start


@pytest.mark.integration
def test_a_fast_rank_starts_its_next_step_before_a_slow_rank_ends_its_own(tmp_path):
    """One of two workers 4x slower, adaptive ACCO on an unlimited link. With a step barrier the
    fast rank could start committed step s+1 only after the slow rank had finished step s, at every
    boundary (the trace's clock is the machine's, shared by both ranks); without one it starts as
    soon as its sync has finished, while the slow rank is still in its last micro-batch or sleep.
    An ordering, not a duration: it holds on a loaded machine."""
    out = str(tmp_path / "run")
    run_train(
        [
            "method=acco",
            *SMALL_LM,
            "world_size=2",
            f"train.steps={STEPS}",
            "train.accum=1",
            "train.deterministic=false",
            "hetero.slow_rank=1",
            "hetero.factor=4",
            f"out_dir={out}",
        ]
    )
    path = os.path.join(out, "trace.json")
    fast_end, fast_start = last_end_and_first_start(load_spans(path, 0))
    slow_end, _ = last_end_and_first_start(load_spans(path, 1))
    boundaries = [s for s in range(1, STEPS) if s in slow_end and s + 1 in fast_start]
    assert len(boundaries) >= STEPS - 2, (sorted(slow_end), sorted(fast_start))
    ahead = [s for s in boundaries if fast_start[s + 1] < slow_end[s]]
    assert ahead, {s: (fast_start[s + 1] - slow_end[s]) / 1e3 for s in boundaries}
