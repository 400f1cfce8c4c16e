"""A model of family auto (conf/model/qwen2_tiny.yaml: a Qwen2 built through transformers' Auto
classes) trains under every method exactly as the single-process reference of its update rule does,
as the GPT-Neo runs of tests/integration/test_methods_vs_reference.py do (fewer steps, 2 workers:
what differs here is the model, not the methods)."""

from __future__ import annotations

import os

import pytest
import torch

from acco.train.reference import replay
from tests.helpers.methods import METHODS, reference_run
from tests.helpers.rounding import rounding_mismatch
from tests.helpers.runs import load_run, run_train

pytestmark = pytest.mark.integration  # every test here starts processes

STEPS = 6  # past DPU's 4 warm-up steps and the local methods' first sync (sync_every=4)


@pytest.mark.parametrize("method", list(METHODS))
def test_qwen2_equals_reference(tmp_path, method):
    out = str(tmp_path / "run")
    run_train(["model=qwen2_tiny", *reference_run(method, 2, STEPS, out)])
    run = load_run(out)
    assert run["summary"]["status"] == "completed" and run["summary"]["steps_completed"] == STEPS
    assert run["cfg"]["model"]["config"]["model_type"] == "qwen2"
    ref = replay(run["cfg"])
    mismatch = rounding_mismatch(torch.load(os.path.join(out, "final_params.pt")), ref.history[-1])
    assert mismatch is None, mismatch
