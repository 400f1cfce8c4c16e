"""Every config value checked up front: a table of bad configs, each with the one-line message that
names the problem and the fix. The table runs through the same compose + validate as the entry
point (in process: fast); a few go through experiments/train.py to check exit code 2, one line,
nothing written (tests/integration/test_bad_input.py does the same for its cases).

Here the tests that start processes (marked integration); the in-process ones are in
tests/unit/test_validation.py."""

from __future__ import annotations

import pytest

from tests.helpers.runs import run_train


@pytest.mark.integration
@pytest.mark.parametrize(
    "args,message",
    [
        (["+train.stepz=5"], "unknown key 'train.stepz'"),
        (["world_size=2", "fault.hang_rank=2", "fault.at_step=1"], "fault.hang_rank=2 but there are only 2 ranks"),
        (["resume=/nonexistent/run"], "resume=/nonexistent/run: no such folder"),
    ],
)
def test_entry_point_exits_2_with_one_line(tmp_path, args, message):
    out = tmp_path / "run"
    proc = run_train([*args, f"out_dir={out}"], expect=2, timeout=120)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], proc.stderr
    assert not out.exists()
