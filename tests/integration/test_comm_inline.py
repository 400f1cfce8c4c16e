"""The inline communication mode (dist.comm_thread=false, acco/engine/comm_worker.py): the
sequential reference `make gpu-check` compares threaded runs against bit for bit.

Here the tests that start processes (marked integration); the in-process ones are in
tests/unit/test_comm_inline.py."""

from __future__ import annotations

import os

import pytest
import torch

from tests.helpers.runs import SMALL_LM, run_train


@pytest.mark.integration
@pytest.mark.parametrize(
    "method",
    [["method=acco"], ["method=streaming_diloco", "method.sync_every=4", "method.fragments=2"]],
    ids=["acco", "streaming_diloco"],
)
def test_inline_and_threaded_runs_end_bit_identical_on_two_ranks(method, tmp_path):
    finals = {}
    for thread in ("true", "false"):
        out = tmp_path / f"thread_{thread}"
        run_train(
            [
                *SMALL_LM,
                *method,
                "world_size=2",
                "train.steps=6",
                "train.deterministic=true",
                "train.save_final_params=true",
                "train.trace=false",
                f"dist.comm_thread={thread}",
                f"out_dir={out}",
            ]
        )
        finals[thread] = torch.load(os.path.join(out, "final_params.pt"))
    assert torch.equal(finals["true"], finals["false"])
