"""Each method's distributed run (deterministic mode, real GPT-Neo on the embedded corpus) equals
the single-process reference of its update rule, for 2 and 3 workers (3 pads the last shard)."""

from __future__ import annotations

import pytest

from tests.helpers.methods import METHODS, equals_reference, reference_run
from tests.helpers.rounding import rounding_mismatch
from tests.helpers.runs import load_run, run_train

pytestmark = pytest.mark.integration  # every test here starts processes

STEPS = 10


@pytest.fixture(scope="module")
def references():
    return {}


@pytest.mark.parametrize("world", [2, 3])
@pytest.mark.parametrize("method", list(METHODS))
def test_distributed_equals_reference(tmp_path, method, world, references):
    out = str(tmp_path / "run")
    run_train(reference_run(method, world, STEPS, out, "optim.schedule=cosine", "optim.warmup_steps=3"))
    run = load_run(out)
    assert run["summary"]["status"] == "completed" and run["summary"]["steps_completed"] == STEPS
    _, ref = equals_reference(out, run["cfg"], STEPS)  # its parameters and logged losses
    references[(method, world)] = ref.history[-1]
    # methods really differ from one another (so agreeing with the right one means something)
    ddps = {"ddp", "ddp_flat", "ddp_overlap"}  # one update rule
    others = [m for (m, w) in references if w == world and m != method and not {m, method} <= ddps]
    for other in others:
        assert rounding_mismatch(references[(other, world)], ref.history[-1]) is not None, (method, other)
