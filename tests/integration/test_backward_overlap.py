"""The backward-overlapped DDP's pieces, in process: the flat engine's gradient buckets
(acco/engine/flat.py BucketLayout) and their hooks (acco/engine/backward_overlap.py), PyTorch DDP's
bucketing as the model reads it, and the one rule of the step's time (acco/analytic/overlap.py)
that the virtual clock and the simulator share, with its arithmetic.

Here the tests that start processes (marked integration); the in-process ones are in
tests/unit/test_backward_overlap.py."""

from __future__ import annotations

import os

import pytest
import torch


@pytest.mark.integration
def test_in_bf16_the_overlapped_ddp_equals_the_blocking_one_and_gathers_bf16(tmp_path):
    """bf16 parameters beside fp32 gradients (train.grad_dtype=auto): the bucketed reduce-scatter sums
    each entry in the blocking flat DDP's ring order, and both all-gather the parameters in bf16
    through a view of their buffers (issue 42 point 5): the same final parameters, bit for bit."""
    from tests.helpers.runs import SMALL_LM, load_run, run_train

    common = [*SMALL_LM, "world_size=2", "train.steps=4", "train.accum=2", "train.deterministic=true"]
    common += ["train.precision=bf16", "train.save_final_params=true", "train.trace=false"]
    finals = {}
    for overlap in ("false", "true"):
        out = str(tmp_path / overlap)
        run_train(
            ["method=ddp", "method.impl=flat", f"method.overlap_backward={overlap}", "method.bucket_mb=0.01"]
            + common
            + [f"out_dir={out}"]
        )
        precision = load_run(out)["summary"]["precision"]
        assert (precision["grad_accum"], precision["reduce"], precision["all_gather"]) == ("fp32", "fp32", "bf16")
        finals[overlap] = torch.load(os.path.join(out, "final_params.pt"))
    assert torch.equal(finals["false"], finals["true"])
