"""The communication thread's CUDA contract (issue 30 points 6 and 9), proved on CPU with a stand-in
for torch.cuda that logs every call: the ready event is recorded on the submitting thread's stream
before the job is queued; the job runs inside device(d) and stream(s), after the stream has waited
on that event; the stream is synchronized before the job is marked done; the stream has the
device's highest priority. The `gpu` test checks the priority on a real device.

Here the tests on CPU; those that need a CUDA GPU (marked gpu) are in
tests/gpu/test_comm_worker.py."""

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

    def _sleep(self, cycles):
        self.note("sleep", cycles)

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


# -- the race check's delays (issue 42 point 3) ---------------------------------------------------------
def stream_times(log, drop_wait: bool = False) -> dict[str, float]:
    """Replay the logged calls with CUDA stream semantics: every call is queued at once on the
    stream current where it was made; a stream runs its calls in order, a sleep of c cycles takes c
    time units, `wait_event` holds the stream until the event's record has run. Returns when the
    buffer's write ("write") and the job's read ("job") run. `drop_wait`: as if the communication
    stream did not wait for the ready event."""
    clock: dict[str, float] = {}
    recorded: dict[int, float] = {}
    when: dict[str, float] = {}
    for entry in log:
        what, stream = entry[0], entry[-1]
        t = clock.get(stream, 0.0)
        if what == "sleep":
            t += entry[2]
        elif what == "record":
            recorded[id(entry[3])] = t
        elif what == "wait_event" and not drop_wait:
            t = max(t, recorded[id(entry[3])])
        elif what in ("write", "job"):
            when.setdefault(what, t)
        clock[stream] = t
    return when


def test_the_race_delay_lands_before_the_writes_and_a_missing_wait_would_read_before_them(fake, monkeypatch):
    """The rounds call delay_writes before filling the buffer: the compute stream sleeps (2N) before
    the write, the ready event after it; the communication stream waits on the event, sleeps N,
    then runs the job. Replayed with stream semantics, the job reads after the write; with the
    wait removed it would read before it, so the GPU check's bitwise comparison would see it."""
    monkeypatch.setenv("ACCO_COMM_DELAY_CYCLES", "1000")
    worker = CommWorker(torch.device("cuda", 0))
    buffer = torch.zeros(4)

    class Rounds:  # what acco/engine/rounds.py's _launch does, with the write logged
        comm = worker

        def launch(self):
            self.comm.delay_writes()
            fake.note("write")
            buffer.copy_(torch.ones(4))
            return self.comm.submit(lambda: fake.note("job") or buffer.clone())

    try:
        with fake.stream(fake.Stream(name="compute")):
            sent = Rounds().launch().wait(timeout=60)
    finally:
        worker.close()
    assert torch.equal(sent, torch.ones(4))
    order = [entry[0] for entry in fake.log if entry[0] in ("sleep", "write", "record", "wait_event", "job")]
    assert order == ["sleep", "write", "record", "wait_event", "sleep", "job"]
    sleeps = [entry[2] for entry in fake.log if entry[0] == "sleep"]
    assert sleeps == [2000, 1000]  # the compute side's sleep outlasts the communication side's
    waited = stream_times(fake.log)
    assert waited["job"] > waited["write"]
    missing = stream_times(fake.log, drop_wait=True)
    assert missing["job"] < missing["write"]  # a removed wait reads the buffer before it is written


def test_the_engine_calls_delay_writes_before_it_fills_the_buffer():
    """acco/engine/rounds.py and local_rounds.py: delay_writes comes before the buffer's writes."""
    import inspect

    from acco.engine import local_rounds, rounds

    launch = inspect.getsource(rounds.RoundEngine._launch)
    assert launch.index("delay_writes()") < launch.index("self.buffer.copy_")
    start = inspect.getsource(local_rounds.LocalEngine.start_sync)
    assert start.index("delay_writes()") < start.index("phi.copy_") < start.index("out=self.buffer")
