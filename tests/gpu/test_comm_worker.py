"""The communication thread's CUDA contract (issue 30 points 6 and 9), proved on CPU with a stand-in
for torch.cuda that logs every call: the ready event is recorded on the submitting thread's stream
before the job is queued; the job runs inside device(d) and stream(s), after the stream has waited
on that event; the stream is synchronized before the job is marked done; the stream has the
device's highest priority. The `gpu` test checks the priority on a real device.

Here the tests that need a CUDA GPU (marked gpu); the on CPU ones are in
tests/unit/test_comm_worker.py."""

from __future__ import annotations

import torch

from acco.engine.comm_worker import CommWorker
from tests.helpers.run_if import gpu, needs_cuda


@gpu
@needs_cuda
def test_the_comm_stream_has_the_devices_highest_priority():
    worker = CommWorker(torch.device("cuda", 0))
    try:
        _least, greatest = torch.cuda.Stream.priority_range()
        assert worker.stream.priority == greatest
        x = torch.ones(1024, device="cuda")
        assert worker.submit(lambda: float(x.sum())).wait(timeout=60) == 1024.0
    finally:
        worker.close()
