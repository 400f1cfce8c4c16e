"""The inline communication mode (dist.comm_thread=false, acco/engine/comm_worker.py): the
sequential reference `make gpu-check` compares threaded runs against bit for bit.

Here the tests in-process; those that start processes (marked integration) are in
tests/integration/test_comm_inline.py."""

from __future__ import annotations

import threading

import pytest
import torch

from acco.engine import comm_worker
from acco.engine.comm_worker import CommWorker


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
