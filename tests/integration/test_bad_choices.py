"""An unknown value of a setting that selects code, through experiments/train.py: exit 2 with one
`error:` line naming the choices, before any worker starts (no traceback) and before any folder is
made under results_root (the in-process walk of every such setting: tests/unit/test_bad_choices.py)."""

from __future__ import annotations

import pytest

from tests.helpers.runs import run_train

pytestmark = pytest.mark.integration  # every test here starts a process


@pytest.mark.parametrize(
    "args,message",
    [
        (["model.family=qwen", "world_size=2", "train.steps=2"], "unknown model.family 'qwen'; choose one of: gpt_neo"),
        (
            ["model=qwen2_tiny", "model.config.model_type=qwen", "world_size=2"],
            "unknown model.config.model_type 'qwen'",
        ),
        (["data.source.generator=poems", "world_size=2"], "unknown data.source.generator 'poems'; choose one of:"),
    ],
)
def test_an_unknown_choice_exits_2_before_anything_starts(tmp_path, args, message):
    root = tmp_path / "results"
    proc = run_train([*args, f"results_root={root}"], expect=2, timeout=120)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    assert not root.exists()
