"""The typed configuration (acco/config/schema.py): every config file fits the schema, Hydra rejects
a misspelt key in a config file at composition, the command line gets one-line messages for
unknown keys and wrong types (where OmegaConf alone would convert `yes` to true), and a run's
config can be read with attribute access.

Here the tests that start processes (marked integration); the in-process ones are in
tests/unit/test_schema.py."""

from __future__ import annotations

import pytest

from tests.helpers.runs import run_train


@pytest.mark.integration
@pytest.mark.parametrize(
    "args,message",
    [
        (["data.seq_lenn=64"], "unknown key 'data.seq_lenn' (data.seq_lenn=64): did you mean data.seq_len?"),
        (["method.warmup_steps=3"], "method.warmup_steps is not a setting of method=acco"),
        (["overwrite=yes"], "overwrite must be true or false, got 'yes'"),
    ],
)
def test_entry_point_exits_2_with_one_line(tmp_path, args, message):
    out = tmp_path / "run"
    proc = run_train([*args, f"out_dir={out}"], expect=2, timeout=120)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], proc.stderr
    assert not out.exists()
