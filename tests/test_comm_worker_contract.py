"""The communication thread's CUDA contract (issue 30 points 6 and 9), proved on CPU with a stand-in
for torch.cuda that logs every call: the ready event is recorded on the submitting thread's stream
before the job is queued; the job runs inside device(d) and stream(s), after the stream has waited
on that event; the stream is synchronized before the job is marked done; the stream has the
device's highest priority. The `gpu` test checks the priority on a real device."""

from __future__ import annotations

import threading
from contextlib import contextmanager

import pytest
import torch

from acco.engine import comm_worker
from acco.engine.comm_worker import CommJob, CommWorker

GREATEST = -5  # the stand-in device's highest priority (CUDA: lower is higher)


class FakeCuda:
    """torch.cuda as the communication thread uses it: Stream, Event, current_stream, device,
    stream. Every call goes to `log` as (what, thread name, details...)."""

    def __init__(self):
        self.log: list[tuple] = []
        self.local = threading.local()
        fake = self

        class Stream:
            def __init__(self, device=None, priority=0, name="comm"):
                self.device, self.priority, self.name = device, priority, name
                fake.streams.append(self)

            @staticmethod
            def priority_range():
                return 0, GREATEST

            def wait_event(self, event):
                fake.note("wait_event", self.name, event)

            def synchronize(self):
                fake.note("synchronize", self.name)

        class Event:
            def record(self, stream):
                fake.note("record", stream.name, self)

        self.streams: list[Stream] = []  # every stream made after this one
        self.Stream, self.Event = Stream, Event
        self.default = Stream(name="default")
        self.streams.clear()

    def note(self, what, *details):
        self.log.append((what, threading.current_thread().name, *details, self.current_device(), self.current().name))

    def current(self):
        return getattr(self.local, "stream", None) or self.default

    def current_device(self):
        return getattr(self.local, "device", None)

    def current_stream(self, device=None):
        return self.current()

    @contextmanager
    def device(self, d):
        before, self.local.device = self.current_device(), d
        try:
            yield
        finally:
            self.local.device = before

    @contextmanager
    def stream(self, s):
        before, self.local.stream = getattr(self.local, "stream", None), s
        try:
            yield
        finally:
            self.local.stream = before


@pytest.fixture
def fake(monkeypatch):
    cuda = FakeCuda()
    monkeypatch.setattr(comm_worker, "cuda", cuda)

    class LoggedJob(CommJob):  # `done` set is a logged call
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            done_set = self.done.set

            def logged_set():
                cuda.note("done")
                done_set()

            self.done.set = logged_set  # type: ignore[method-assign]

    monkeypatch.setattr(comm_worker, "CommJob", LoggedJob)
    return cuda


def index(log, what) -> int:
    return next(i for i, entry in enumerate(log) if entry[0] == what)


def test_a_job_runs_on_the_comm_stream_after_the_ready_event_and_is_done_after_the_stream_drains(fake):
    d = torch.device("cuda", 1)
    worker = CommWorker(d)
    try:
        (comm,) = fake.streams
        assert (comm.device, comm.priority) == (d, GREATEST)  # point 6: the highest priority
        put = worker._queue.put
        worker._queue.put = lambda job: (fake.note("queued"), put(job))  # type: ignore[method-assign]
        compute = fake.Stream(name="compute")
        with fake.stream(compute):  # the submitting thread's current stream
            job = worker.submit(lambda: fake.note("job") or 42)
        assert job.wait(timeout=60) == 42
    finally:
        worker.close()
    log = fake.log
    me = threading.current_thread().name
    record, queued = log[index(log, "record")], log[index(log, "queued")]
    wait, run = log[index(log, "wait_event")], log[index(log, "job")]
    sync, done = log[index(log, "synchronize")], log[index(log, "done")]
    # the ready event: recorded on the submitting thread's stream, before the job is queued
    assert record[:3] == ("record", me, "compute") and index(log, "record") < index(log, "queued")
    assert queued[1] == me
    # the comm thread: the comm stream waits on that very event, inside device(d) and stream(s)
    assert wait[1:3] == ("acco-comm", comm.name)
    assert wait[3] is record[3] and wait[-2:] == (d, comm.name)
    # then the job, still inside both
    assert run[1] == "acco-comm" and run[-2:] == (d, comm.name)
    assert index(log, "queued") < index(log, "wait_event") < index(log, "job")
    # the host waits for the stream before the job counts as done
    assert sync[1:3] == ("acco-comm", comm.name) and done[1] == "acco-comm"
    assert index(log, "job") < index(log, "synchronize") < index(log, "done")


def test_a_cpu_worker_makes_no_cuda_call(fake):
    worker = CommWorker(torch.device("cpu"))
    try:
        assert worker.submit(lambda: 7).wait(timeout=60) == 7
    finally:
        worker.close()
    assert fake.streams == [] and [entry[0] for entry in fake.log] == ["done"]


def test_the_in_flight_count_covers_a_job_until_it_is_done(fake):
    worker = CommWorker(torch.device("cpu"))
    release = threading.Event()
    try:
        job = worker.submit(lambda: release.wait(60))
        assert comm_worker.jobs_in_flight() == 1
        release.set()
        job.wait(timeout=60)
        assert comm_worker.jobs_in_flight() == 0
    finally:
        release.set()
        worker.close()


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU visible")
def test_the_comm_stream_has_the_devices_highest_priority():
    worker = CommWorker(torch.device("cuda", 0))
    try:
        _least, greatest = torch.cuda.Stream.priority_range()
        assert worker.stream.priority == greatest
        x = torch.ones(1024, device="cuda")
        assert worker.submit(lambda: float(x.sum())).wait(timeout=60) == 1024.0
    finally:
        worker.close()
