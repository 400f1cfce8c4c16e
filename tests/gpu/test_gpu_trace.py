"""Issue 30 points 1-2 on a real GPU (marked `gpu`, skipped without CUDA; tests/unit/test_device_clock.py
proves the same on CPU with a stand-in device): a traced micro-batch puts no host sync on the
compute side (torch.cuda.set_sync_debug_mode("error") around a traced round's micro-batches and
its step boundary), a traced deterministic ACCO run on one GPU syncs the host only on the
communication thread (its per-step reads, README "Host syncs on GPU"), and its spans carry the
device's durations, not the enqueue time."""

from __future__ import annotations

import threading
import warnings
from contextlib import contextmanager

import torch
import torch.distributed as dist
from torch import nn

from acco.engine import device_clock
from acco.engine.comm_worker import CommWorker
from acco.engine.compute import MicroBatchRunner
from acco.engine.flat import FlatModel
from acco.engine.rounds import RoundEngine, StopRule, run_acco
from acco.engine.sharded_adamw import ShardedAdamW
from acco.engine.sync import Syncer
from acco.engine.trace import COMM, COMPUTE, TraceRecorder
from tests.helpers.run_if import gpu, needs_cuda

pytestmark = [gpu, needs_cuda]

SLEEP_CYCLES = 2_000_000  # device work per micro-batch far longer than its enqueueing (~1 ms)
SYNC_WARNING = "synchronizing CUDA operation"


class Batches:
    """The k-th micro-batch, already on the device (no host-to-device copy to wait for)."""

    def __init__(self, device: torch.device):
        self.x = torch.randn(16, 64, generator=torch.Generator().manual_seed(0)).to(device)

    def batch(self, k: int) -> torch.Tensor:
        return self.x


def loss_fn(model: nn.Module, batch: torch.Tensor) -> torch.Tensor:
    torch.cuda._sleep(SLEEP_CYCLES)  # device-bound work the host queues in microseconds
    return (model(batch).float() ** 2).mean()


@contextmanager
def world_of_one(backend: str):
    """A one-rank process group for the engine's collectives (left as found)."""
    mine = not dist.is_initialized()
    if mine:
        dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1)
    try:
        yield dist.new_group([0], backend=backend)
    finally:
        if mine:
            dist.destroy_process_group()


def acco_engine(device: torch.device, tracer: TraceRecorder, group, accum: int) -> RoundEngine:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 256), nn.GELU(), nn.Linear(256, 64)).to(device)
    flat = FlatModel(model, 1, dtype=torch.bfloat16, device=device)
    opt = ShardedAdamW(flat.take_master_shard(), flat.decay_ranges, lambda step, micro_batches: 1e-3)
    buffer = torch.zeros_like(flat.params)
    syncer = Syncer(buffer, opt, 0, 1, group, tracer)
    runner = MicroBatchRunner(
        model, loss_fn, Batches(device), tracer, autocast_dtype=torch.bfloat16, device_type=device.type
    )
    return RoundEngine(flat, syncer, CommWorker(device), runner, accum, adaptive=False, tracer=tracer)


@contextmanager
def sync_debug(mode: str):
    torch.cuda.set_sync_debug_mode(mode)
    try:
        yield
    finally:
        torch.cuda.set_sync_debug_mode("default")


@contextmanager
def sync_warnings_by_thread():
    """The threads that issued a synchronizing CUDA operation (sync debug mode "warn"), one entry
    per operation: catch_warnings' record mode does not say which thread warned."""
    threads: list[str] = []

    def note(message, category, filename, lineno, file=None, line=None):
        if SYNC_WARNING in str(message):
            threads.append(threading.current_thread().name)

    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = note
        with sync_debug("warn"):
            yield threads


def reference_sleep_us(device: torch.device) -> float:
    """The device time of one SLEEP_CYCLES kernel, timed by its own event pair."""
    begin = device_clock.mark(True)
    torch.cuda._sleep(SLEEP_CYCLES)
    end = device_clock.mark(True)
    device_clock.wait(end)
    return device_clock.elapsed_us(begin, end)


def test_traced_micro_batches_never_sync_the_host():
    device = torch.device("cuda")
    tracer = TraceRecorder(0)
    with world_of_one("nccl") as group:
        engine = acco_engine(device, tracer, group, accum=4)
        engine.runner.run_one()  # kernels loaded, autocast caches warm: outside the check
        torch.cuda.synchronize()
        with sync_debug("error"):
            for _ in range(8):  # a traced round's micro-batches and its step boundary
                engine.runner.run_one()
            tracer.at_step(2)
        engine.comm.close()
    busy_s = engine.runner.busy_s  # waits for them: after the check
    tracer.resolve(block=True)
    spans = [e for e in tracer.events if e["tid"] == COMPUTE and e["name"] == "fwd+bwd"]
    assert len(spans) == 9
    sleep_us = reference_sleep_us(device)
    assert all(e["dur"] >= 0.9 * sleep_us for e in spans)  # device work, not the enqueueing
    assert busy_s * 1e6 >= 0.9 * 9 * sleep_us


def test_a_traced_acco_step_syncs_the_host_only_on_the_communication_thread():
    device = torch.device("cuda")
    tracer = TraceRecorder(0)
    with world_of_one("nccl") as group:
        warm = acco_engine(device, TraceRecorder(0, enabled=False), group, accum=4)
        run_acco(warm, StopRule.steps(1), lambda t, res: None)  # kernels, NCCL: outside the check
        warm.comm.close()
        engine = acco_engine(device, tracer, group, accum=4)
        torch.cuda.synchronize()
        with sync_warnings_by_thread() as threads:
            run_acco(engine, StopRule.steps(3), lambda t, res: tracer.at_step(t + 2))
        engine.comm.close()
    assert threading.main_thread().name not in threads  # the compute side never waited for the device
    assert threads  # the check sees syncs: the sync's own read of its counts, on its thread
    tracer.resolve(block=True)
    sleep_us = reference_sleep_us(device)
    compute = [e for e in tracer.events if e["tid"] == COMPUTE and e["name"].startswith("fwd+bwd")]
    assert compute and all(e["dur"] >= 0.9 * sleep_us for e in compute)
    syncs = {e["name"] for e in tracer.events if e["tid"] == COMM}
    assert {"sync (estimate)", "sync (commit)", "reduce_scatter", "all_gather"} <= syncs
