"""Issue 30 points 1-2, proved on CPU with a stand-in for torch.cuda (acco/engine/device_clock.py's
`cuda`): a stand-in device whose work finishes when the test says, not when the host queues it.
Spans and compute_busy_s get the device's durations, not the enqueue time; tracing puts no host
wait after a micro-batch; the adaptive extension waits only on the micro-batch before the last one
queued (one stays in flight); a heterogeneous worker's sleep is sized by its own micro-batch's
device time. tests/gpu/test_gpu_trace.py checks on a real GPU that a traced step has no hidden host
sync."""

from __future__ import annotations

import json
import threading
import time
from contextlib import contextmanager
from types import SimpleNamespace

import pytest
import torch
from torch import nn

from acco.engine import compute, device_clock
from acco.engine.compute import MicroBatchRunner
from acco.engine.rounds import RoundEngine
from acco.engine.trace import COMM, COMPUTE, TraceRecorder

FORWARD_MS, BACKWARD_MS = 50.0, 100.0  # the stand-in device's time for one micro-batch's passes


class FakeDevice:
    """torch.cuda as device_clock uses it. `clock_ms`: the device time the work queued so far
    ends at (an event recorded now completes then); `finished_ms`: how far the device has got
    (query); a host wait (Event.synchronize, synchronize) lets it catch up to what it waits for."""

    def __init__(self):
        self.clock_ms = 0.0
        self.finished_ms = 0.0
        self.waits: list[tuple] = []  # (event or "device", micro-batches queued so far)
        self.queued = 0  # micro-batches whose forward was queued
        self.recorded_on: list[str] = []  # the stream of each event recorded
        self.local = threading.local()
        fake = self

        class Event:
            def __init__(self, enable_timing=False):
                assert enable_timing
                self.t: float | None = None

            def record(self, stream=None):
                assert stream is None  # the recording thread's current stream
                self.t = fake.clock_ms
                fake.recorded_on.append(fake.current_stream())

            def query(self):
                return self.t is not None and self.t <= fake.finished_ms

            def synchronize(self):
                fake.waits.append((self, fake.queued))
                fake.finished_ms = max(fake.finished_ms, self.t)

            def elapsed_time(self, other):
                assert self.query() and other.query(), "elapsed_time of unfinished work"
                return other.t - self.t

        self.Event = Event

    def synchronize(self):
        self.waits.append(("device", self.queued))
        self.finished_ms = self.clock_ms

    def current_stream(self):
        return getattr(self.local, "stream", "compute")

    @contextmanager
    def stream(self, name):
        self.local.stream = name
        try:
            yield
        finally:
            self.local.stream = "compute"

    def work(self, ms: float) -> None:
        """Queue `ms` of device work: it returns at once, as a kernel launch does."""
        self.clock_ms += ms


@pytest.fixture
def fake(monkeypatch):
    device = FakeDevice()
    monkeypatch.setattr(device_clock, "cuda", device)
    return device


def runner_on(fake: FakeDevice, tracer: TraceRecorder, slowdown: float = 1.0) -> MicroBatchRunner:
    class DeviceWork(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            fake.queued += 1
            fake.work(FORWARD_MS)
            return x.clone()

        @staticmethod
        def backward(ctx, grad):
            fake.work(BACKWARD_MS)
            return grad

    def loss_fn(model, batch):
        return DeviceWork.apply(model(batch)).sum()

    stream = SimpleNamespace(batch=lambda k: torch.ones(1, 2))
    runner = MicroBatchRunner(nn.Linear(2, 1), loss_fn, stream, tracer, slowdown=slowdown, on_device=True)
    fake.waits.clear()  # the trace's anchor drains the device once, before training
    return runner


def test_traced_micro_batches_take_device_times_without_a_host_wait(fake, tmp_path):
    tracer = TraceRecorder(0)
    runner = runner_on(fake, tracer)
    for _ in range(6):
        runner.run_one()
    assert fake.waits == []  # traced, and not one host wait per micro-batch
    fake.finished_ms = 3 * (FORWARD_MS + BACKWARD_MS)  # the device has done half of them
    tracer.at_step(2)  # reads the finished spans' times, waits for none
    assert fake.waits == []
    assert len(tracer.events) == 3
    tracer.dump_part(str(tmp_path))  # the rest are waited for when the trace is written
    spans = sorted((e for e in tracer.events if e["tid"] == COMPUTE), key=lambda e: e["ts"])
    assert [e["dur"] for e in spans] == [(FORWARD_MS + BACKWARD_MS) * 1e3] * 6  # µs of device work
    gaps = [b["ts"] - a["ts"] for a, b in zip(spans, spans[1:])]
    assert gaps == pytest.approx([(FORWARD_MS + BACKWARD_MS) * 1e3] * 5)  # placed on the device's timeline
    assert [e["args"]["step"] for e in spans] == [1] * 6  # the step they were recorded in
    part = (tmp_path / ".trace.rank0.part").read_text()
    assert len(json.loads("[" + part + "]")) == len(tracer.metadata()) + 6
    assert runner.busy_s == pytest.approx(6 * (FORWARD_MS + BACKWARD_MS) / 1e3)  # compute_busy_s


def test_untraced_runs_still_count_device_busy_time(fake):
    runner = runner_on(fake, TraceRecorder(0, enabled=False))
    for _ in range(4):
        runner.run_one()
    assert fake.waits == []
    assert runner.busy_s == pytest.approx(4 * (FORWARD_MS + BACKWARD_MS) / 1e3)
    assert runner._last_backward_s == pytest.approx(BACKWARD_MS / 1e3)


def test_a_sync_span_times_the_communication_stream_s_work(fake):
    tracer = TraceRecorder(0)
    tracer.time_on_device()
    fake.waits.clear()  # the anchor's
    fake.recorded_on.clear()

    def job():  # as the communication thread runs a sync: on its own stream
        with fake.stream("comm"), tracer.span("sync (commit)", COMM):
            with tracer.span("reduce_scatter", COMM):
                fake.work(30.0)
            fake.work(5.0)

    thread = threading.Thread(target=job)
    thread.start()
    thread.join()
    assert tracer.events == []  # closed on the host, the work not done: nothing read yet
    tracer.at_step(2)
    assert tracer.events == []  # the device has not finished it: no wait, still unread
    fake.finished_ms = fake.clock_ms
    tracer.at_step(3)
    durations = {e["name"]: e["dur"] for e in tracer.events}
    assert durations == {"reduce_scatter": 30e3, "sync (commit)": 35e3}
    assert fake.recorded_on == ["comm"] * 4 and fake.waits == []


def test_the_adaptive_extension_waits_only_on_the_previous_micro_batch(fake):
    runner = runner_on(fake, TraceRecorder(0))
    syncer = SimpleNamespace(buffer=None)
    engine = RoundEngine(None, syncer, None, runner, accum=2, adaptive=True, tracer=runner.tracer)
    answers = iter([False, False, False, True])  # the sync is done at the 4th look
    job = SimpleNamespace(is_done=lambda: next(answers))
    assert engine._compute(2, job) == 5
    # before each look one micro-batch is still queued past the one waited for: the end of
    # micro-batch m-1 (device time 150 ms x m) while micro-batch m (the m+1-th) is queued
    mb_ms = FORWARD_MS + BACKWARD_MS
    assert [(event.t, queued) for event, queued in fake.waits] == [(mb_ms * (q - 1), q) for q in (2, 3, 4, 5)]
    assert all(fake.clock_ms > event.t for event, _ in fake.waits)
    fake.waits.clear()
    engine.adaptive = False
    assert engine._compute(2, job) == 2
    assert fake.waits == []  # a deterministic round never waits


def test_a_slow_worker_sleeps_for_its_own_micro_batch_s_device_time(fake, monkeypatch):
    sleeps = []
    monkeypatch.setattr(compute.time, "sleep", sleeps.append)
    runner = runner_on(fake, TraceRecorder(0), slowdown=3.0)
    runner.run_one()
    runner.run_one()
    mb_ms = FORWARD_MS + BACKWARD_MS
    assert sleeps == pytest.approx([2 * mb_ms / 1e3] * 2)  # (k-1) x its fwd+bwd on the device
    # it waited on the micro-batch it sizes (its end event), none other
    assert [(event.t, queued) for event, queued in fake.waits] == [(mb_ms, 1), (2 * mb_ms, 2)]
    assert runner.busy_s == pytest.approx(2 * mb_ms / 1e3)


def test_on_cpu_a_span_is_recorded_when_it_closes_with_host_times():
    tracer = TraceRecorder(0)
    assert tracer.anchor is None and tracer.mark().event is None
    before = tracer.now_us()
    with tracer.span("work", COMPUTE):
        pass
    (event,) = tracer.events
    assert event["ts"] >= before and event["dur"] >= 0.0


def test_the_torch_ddp_baseline_s_hooked_backward_is_timed_on_the_device(fake, monkeypatch, tmp_path):
    sleeps = []
    monkeypatch.setattr(compute.time, "sleep", sleeps.append)
    tracer = TraceRecorder(0)
    runner = runner_on(fake, tracer, slowdown=3.0)
    runner.run_one()  # a pure backward: its device time sizes the hooked one's estimate
    runner.run_one(hooked_backward=True)
    mb_ms = FORWARD_MS + BACKWARD_MS
    assert sleeps == pytest.approx([2 * mb_ms / 1e3] * 2)  # forward + the last pure backward
    tracer.dump_part(str(tmp_path))
    durations = {e["name"]: e["dur"] for e in tracer.events if e["name"] != "slowdown"}
    assert durations == {
        "fwd+bwd": mb_ms * 1e3,
        "fwd+bwd (fwd)": FORWARD_MS * 1e3,
        "bwd + all_reduce (DDP hooks)": BACKWARD_MS * 1e3,
    }
    assert runner.busy_s == pytest.approx(2 * mb_ms / 1e3)


# -- the bounded wait for device work (issue 42 point 4) ---------------------------------------------
class Pending:
    """A stand-in cuda.Event whose synchronize takes `seconds`; it is never polled."""

    def __init__(self, seconds: float):
        self.seconds, self.synchronized = seconds, False

    def query(self) -> bool:
        raise AssertionError("a bounded wait must not poll (it would take the GIL from the compute thread)")

    def synchronize(self) -> None:
        time.sleep(self.seconds)
        self.synchronized = True


def test_a_bounded_wait_blocks_once_and_raises_when_the_work_outlived_the_limit(monkeypatch):
    from acco.engine import device_clock as dc

    monkeypatch.setattr(dc, "_wait_limit_s", None)
    unbounded = Pending(0.0)
    dc.wait_for(unbounded, "x")
    assert unbounded.synchronized
    dc.configure_waits(5.0)
    try:
        quick = Pending(0.0)
        dc.wait_for(quick, "x")  # within the limit: returns
        assert quick.synchronized
        dc.configure_waits(0.05)
        with pytest.raises(dc.DeviceWaitTimeout, match=r"a sync timed out: 0 s, more than dist.step_timeout_s=0.05 s"):
            dc.wait_for(Pending(0.2), "a sync")
    finally:
        dc.configure_waits(None)
