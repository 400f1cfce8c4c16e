"""A model of family auto (conf/model/qwen2_tiny.yaml: a Qwen2 built through transformers' Auto
classes) trains under every method exactly as the single-process reference of its update rule does,
as the GPT-Neo runs of tests/integration/test_methods_vs_reference.py do (fewer steps, 2 workers:
what differs here is the model, not the methods)."""

from __future__ import annotations

import os

import pytest
import torch

from acco.train.reference import replay
from tests.helpers.methods import METHODS
from tests.helpers.rounding import rounding_mismatch
from tests.helpers.runs import SMALL_LM, load_run, run_train

pytestmark = pytest.mark.integration  # every test here starts processes

STEPS = 6  # past DPU's 4 warm-up steps and the local methods' first sync (sync_every=4)


@pytest.mark.parametrize("method", list(METHODS))
def test_qwen2_equals_reference(tmp_path, method):
    out = str(tmp_path / "run")
    run_train(
        [
            "model=qwen2_tiny",
            *METHODS[method],
            *SMALL_LM,
            "world_size=2",
            f"train.steps={STEPS}",
            "train.accum=2",
            "train.deterministic=true",
            "train.save_final_params=true",
            "optim.lr=2e-3",
            "optim.clip_norm=1.0",
            f"out_dir={out}",
        ]
    )
    run = load_run(out)
    assert run["summary"]["status"] == "completed" and run["summary"]["steps_completed"] == STEPS
    assert run["cfg"]["model"]["config"]["model_type"] == "qwen2"
    ref = replay(run["cfg"])
    mismatch = rounding_mismatch(torch.load(os.path.join(out, "final_params.pt")), ref.history[-1])
    assert mismatch is None, mismatch
