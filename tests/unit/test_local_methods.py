"""diloco and streaming_diloco (acco/engine/local_rounds.py): where every micro-batch's gradient was
computed, and every inner and outer step, proven with the gradient oracle and a replay written here
with PyTorch's own AdamW (one per worker) and SGD(nesterov=True) (one per fragment); the schedule's
timetable; and the one-line errors for settings it cannot run.

Here the tests in-process; those that start processes (marked integration) are in
tests/integration/test_local_methods.py."""

from __future__ import annotations

import pytest

from acco.engine.local_rounds import LocalSchedule, check_schedule, fragment_bounds


# -- the timetable (in-process) -----------------------------------------------------------------
def test_fragments_sync_evenly_spaced_and_diloco_every_h_steps():
    diloco = LocalSchedule(sync_every=4)
    assert [s for s in range(1, 13) if diloco.starts_after(s)] == [4, 8, 12]
    streaming = LocalSchedule(sync_every=8, fragments=4, overlap_steps=1, mixing=0.5)
    starts = {s: streaming.starts_after(s) for s in range(1, 17) if streaming.starts_after(s)}
    assert starts == {2: [0], 4: [1], 6: [2], 8: [3], 10: [0], 12: [1], 14: [2], 16: [3]}
    # contiguous, covering the padded vector, each a multiple of the ranks
    assert fragment_bounds(40, 2, 2) == [(0, 20), (20, 40)]
    assert fragment_bounds(38, 2, 2) == [(0, 20), (20, 38)]
    bounds = fragment_bounds(3 * 101, 3, 4)
    assert bounds[0][0] == 0 and bounds[-1][1] == 303
    assert all(b1 == a2 for (_, b1), (a2, _) in zip(bounds, bounds[1:]))
    assert all((b - a) % 3 == 0 and b > a for a, b in bounds)


@pytest.mark.parametrize(
    "schedule,why",
    [
        (LocalSchedule(sync_every=6, fragments=4), "multiple of fragments"),
        (LocalSchedule(sync_every=8, fragments=4, overlap_steps=2), "overlap_steps (2)"),
        (LocalSchedule(sync_every=8, mixing=1.5), "mixing must lie in [0, 1]"),
        (LocalSchedule(sync_every=0), "must be >= 1"),
    ],
)
def test_impossible_schedules_are_named(schedule, why):
    assert why in check_schedule(schedule)
