"""The inline communication mode (dist.comm_thread=false, acco/engine/comm_worker.py): the
sequential reference `make gpu-check` compares threaded runs against bit for bit."""

from __future__ import annotations

import os
import threading

import pytest
import torch

from acco.engine import comm_worker
from acco.engine.comm_worker import CommWorker
from tests.helpers.runs import SMALL_LM, run_train


def test_inline_submit_runs_the_job_on_the_callers_thread_before_returning():
    worker = CommWorker(torch.device("cpu"), threaded=False)
    seen = []
    job = worker.submit(lambda: seen.append(threading.current_thread()) or 7)
    assert seen == [threading.current_thread()] and job.is_done() and job.wait() == 7
    assert worker.stream is None and comm_worker.jobs_in_flight() == 0
    failing = worker.submit(lambda: 1 / 0)  # surfaced by wait(), as from the thread
    with pytest.raises(RuntimeError, match="communication thread failed"):
        failing.wait()
    worker.close()


def test_configure_sets_the_mode_of_workers_built_after_it():
    try:
        comm_worker.configure(False)
        assert CommWorker(torch.device("cpu")).threaded is False
    finally:
        comm_worker.configure(True)
    threaded = CommWorker(torch.device("cpu"))
    assert threaded.threaded is True
    threaded.close()


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
