"""CUDA-specific measurements for `make gpu-check` (experiments/gpu_check.py): one rank's real
trainer (acco/train/trainer.py: flat bf16 buffers, fp32 master shard, the communication thread and its
CUDA stream) built in this process, instrumented with CUDA events.

- Overlap: an event pair on the compute stream around every micro-batch (forward + backward), and
  one on the communication stream around every sync (recorded on the thread's own stream, so the
  first completes once the stream has waited for the gradients, the last once its final kernel is
  done). Their GPU-clock intervals give the fraction of each sync's span during which the compute
  stream was inside a micro-batch. CPU-side trace spans cannot show this: a span ends when the host
  returns, not when the stream has run the work.
- Throughput: fwd+bwd micro-batches of the real model at a given sequence length and micro-batch
  size, timed with CUDA events after warm-up; tokens/s and model-FLOPs utilisation
  MFU = 6·Ψ·tokens/s / peak (6Ψ per token: the usual model-FLOPs count, attention not included);
  and the allocator's peak beside acco/train/memory.py's estimate for the same run.

Everything runs on CPU too (no events, wall-clock instead), which is how the CPU test suite keeps
this code honest; the numbers only mean something on a GPU."""

from __future__ import annotations

import os
import time

import torch

from ..engine.trace import interval_overlap

# bf16 dense peak per GPU, TFLOP/s (vendor datasheets: SXM/HGX parts unless named); matched by
# substring of torch.cuda.get_device_name(), most specific first. ACCO_PEAK_TFLOPS overrides.
PEAK_BF16_TFLOPS = [
    ("H100 PCIe", 756.0),
    ("H100 NVL", 835.0),
    ("GH200", 989.4),
    ("H200", 989.4),
    ("H100", 989.4),
    ("A100", 312.0),
    ("L40S", 362.1),
    ("A10G", 70.0),
]


def peak_tflops(device_name: str) -> tuple[float | None, str]:
    """(bf16 dense peak in TFLOP/s, where the figure comes from) for a GPU name."""
    env = os.environ.get("ACCO_PEAK_TFLOPS")
    if env:
        return float(env), "ACCO_PEAK_TFLOPS"
    for key, value in PEAK_BF16_TFLOPS:
        if key.lower() in device_name.lower():
            return value, f"datasheet bf16 dense peak of {key}"
    return None, f"no bf16 peak known for {device_name!r}: set ACCO_PEAK_TFLOPS"


def covered(intervals: list[tuple[float, float]], by: list[tuple[float, float]]) -> float:
    """Total length of `intervals` (one stream's syncs: disjoint) that lies inside the union of `by`."""
    return interval_overlap(intervals, by)


class Timeline:
    """Start/end marks of spans on the stream current where they are taken (CUDA events), or on
    the host clock on CPU."""

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"
        self.device = device
        if self.cuda:
            torch.cuda.synchronize(device)
            self.base = torch.cuda.Event(enable_timing=True)
            self.base.record()
        self.t0 = time.perf_counter()
        self.spans: dict[str, list] = {}

    def mark(self):
        if self.cuda:
            ev = torch.cuda.Event(enable_timing=True)
            ev.record()  # on the calling thread's current stream
            return ev
        return time.perf_counter()

    def wrap(self, name: str, fn):
        spans = self.spans.setdefault(name, [])

        def timed(*args, **kwargs):
            start = self.mark()
            out = fn(*args, **kwargs)
            spans.append((start, self.mark()))  # list.append: safe from both threads
            return out

        return timed

    def intervals(self, name: str) -> list[tuple[float, float]]:
        """Seconds since the timeline began, on the GPU clock where there is one."""
        if self.cuda:
            torch.cuda.synchronize(self.device)
            return [
                (self.base.elapsed_time(s) / 1e3, self.base.elapsed_time(e) / 1e3) for s, e in self.spans.get(name, [])
            ]
        return [(s - self.t0, e - self.t0) for s, e in self.spans.get(name, [])]


# -- one rank's real trainer, in this process ------------------------------------------------------
def start_rank(overrides: list[str], rank: int = 0, world: int = 1, port: int | None = None, trace: bool = False):
    """Compose the config as experiments/train.py would, join the process group (NCCL on GPU) and
    build the task and the trainer (tracing on where `trace`). Returns (cfg, trainer)."""
    from ..config.experiments import compose
    from ..config.schema import typed
    from ..engine.trace import TraceRecorder
    from ..runtime.launch import DistEnv, free_port, init_process_group, pick_device
    from ..tasks import load_task_factory
    from ..train.trainer import Trainer

    cfg = compose(list(overrides))
    cfg["world_size"] = world
    view = typed(cfg)  # what the task and the trainer read (acco.run.worker.run_rank's conversion)
    # not exported to os.environ: a later subprocess would take them for torchrun's
    env = DistEnv(rank, world, rank, world, "127.0.0.1", port or free_port(), "local")
    device = pick_device(view.device, rank, shared=view.dist.backend == "gloo")
    init_process_group(env, device, view.dist.timeout_s, view.dist.backend)
    os.makedirs(view.out_dir, exist_ok=True)
    task = load_task_factory(view.task)(view, rank, world, device)
    trainer = Trainer(view, task, rank, world, device, TraceRecorder(rank, enabled=trace), None)
    return cfg, trainer


def stop_rank(trainer) -> None:
    import torch.distributed as dist

    trainer.close()
    trainer.release()
    dist.destroy_process_group()


def storage(trainer) -> dict:
    """What the run keeps in which dtype, and on which stream the communication thread works."""
    from ..train.backend_flat import FlatBackend

    out: dict[str, object] = {"device": str(trainer.device)}
    backend = trainer.backend
    if isinstance(backend, FlatBackend):
        out.update(
            {
                "params": str(backend.flat.params.dtype),
                "grads": str(backend.flat.grads.dtype),
                "buffer": str(backend.buffer.dtype),
                "master": str(backend.opt.master.dtype),
                "exp_avg": str(backend.opt.exp_avg.dtype),
            }
        )
        stream = backend.comm.stream
        out["comm_stream"] = None if stream is None else int(stream.cuda_stream)
        if trainer.device.type == "cuda":
            out["compute_stream"] = int(torch.cuda.current_stream(trainer.device).cuda_stream)
    else:
        first = backend.torch_ddp.params[0]
        out.update({"params": str(first.dtype), "grads": str(first.grad.dtype) if first.grad is not None else None})
    out["compute_dtype"] = str(trainer.compute_dtype)
    return out


def measure_overlap(overrides: list[str], rank: int = 0, world: int = 1, port: int | None = None) -> dict:
    """Train the configured run with every micro-batch and sync timed on its own stream; the
    fraction of the syncs' time (all but the last, which has no compute beside it) that lies
    inside micro-batches."""
    cfg, trainer = start_rank(overrides, rank, world, port)
    try:
        timeline = Timeline(trainer.device)
        trainer.runner.run_one = timeline.wrap("compute", trainer.runner.run_one)
        syncer = getattr(trainer.backend, "syncer", None)  # the flat engine's (PyTorch DDP has none)
        if syncer is not None:
            syncer.sync = timeline.wrap("sync", syncer.sync)
        trainer.train()
        info = storage(trainer)  # after training: PyTorch DDP's gradients exist from the first backward
        compute, syncs = timeline.intervals("compute"), timeline.intervals("sync")
    finally:
        stop_rank(trainer)
    inner = syncs[:-1]
    sync_s = sum(e - s for s, e in inner)
    overlap = covered(inner, compute) / sync_s if sync_s > 0 else None
    return {
        "method": cfg["method"]["name"],
        "impl": cfg["method"].get("impl"),
        "rank": rank,
        "world": world,
        "model": cfg["model"]["name"],
        "micro_batches": len(compute),
        "syncs": len(syncs),
        "compute_s": sum(e - s for s, e in compute),
        "sync_s": sync_s,
        "overlap_fraction": overlap,
        "clock": "cuda events" if trainer.device.type == "cuda" else "host",
        "storage": info,
        "compute_spans": compute,
        "sync_spans": syncs,
    }


def measure_sync_debug(overrides: list[str], warmup_micro_batches: int = 4) -> dict:
    """Host syncs of a traced, deterministic ACCO run, found by torch.cuda.set_sync_debug_mode
    (issue 30 point 2): every synchronizing CUDA call warns, and each warning is filed by where it
    came from. `error` is set when one came from inside a micro-batch past the first step on the
    compute thread (the GPU would drain between micro-batches). "warn" rather than "error": the
    mode is process-wide, and the communication thread's stream synchronize before `done` is by
    design (acco/engine/comm_worker.py); it must not fail the compute side's check."""
    import threading
    import warnings

    cfg, trainer = start_rank(
        [*overrides, "train.steps=3", "train.accum=2", "train.deterministic=true", "train.trace=true"], trace=True
    )
    cuda = trainer.device.type == "cuda"
    main = threading.get_ident()
    state = {"calls": 0, "inside": False}
    found: dict[str, list[str]] = {}
    run_one = trainer.runner.run_one

    def checked(*args, **kwargs):
        state["calls"] += 1
        state["inside"] = state["calls"] > warmup_micro_batches
        try:
            return run_one(*args, **kwargs)
        finally:
            state["inside"] = False

    def show(message, category, filename, lineno, file=None, line=None):
        text = str(message)
        if "synchroniz" not in text:
            return
        if threading.get_ident() != main:
            where = "communication thread"
        elif state["inside"]:
            where = "micro-batch"
        elif state["calls"] <= warmup_micro_batches:
            where = "warm-up"
        else:
            where = "between micro-batches"
        found.setdefault(where, []).append(text.splitlines()[0][:300])

    trainer.runner.run_one = checked
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("always")
            warnings.showwarning = show
            if cuda:
                torch.cuda.set_sync_debug_mode("warn")
            try:
                trainer.train()
            finally:
                if cuda:
                    torch.cuda.set_sync_debug_mode("default")
    finally:
        stop_rank(trainer)
    inside = found.get("micro-batch", [])
    return {
        "method": cfg["method"]["name"],
        "checked": cuda,
        "micro_batches": state["calls"],
        "syncs": {where: len(msgs) for where, msgs in found.items()},
        "examples": {where: sorted(set(msgs))[:5] for where, msgs in found.items()},
        "error": f"{len(inside)} host syncs inside micro-batches: {inside[0]}" if inside else None,
    }


def measure_throughput(overrides: list[str], micro_batches: int = 10, warmup: int = 3, steps: int = 2) -> dict:
    """One rank of ddp (flat) on one device: `steps` full training steps (so the sync's memory is
    in the peak), then `micro_batches` timed fwd+bwd micro-batches after `warmup` more."""
    from ..train.memory import GB, breakdown, estimate, model_shape

    cfg, trainer = start_rank(
        [*overrides, "method=ddp", "method.impl=flat", f"train.steps={steps}", "train.accum=1", "world_size=1"]
    )
    device = trainer.device
    try:
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        trainer.train()
        run_one = trainer.runner.run_one
        for _ in range(warmup):
            run_one()
        timeline = Timeline(device)
        timed = timeline.wrap("compute", run_one)
        for _ in range(micro_batches):
            timed()
        spans = timeline.intervals("compute")
        peak = torch.cuda.max_memory_allocated(device) if device.type == "cuda" else None
        name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    finally:
        stop_rank(trainer)
    seconds = spans[-1][1] - spans[0][0]  # back to back: includes the host's gaps between them
    seq, mb = int(cfg["data"]["seq_len"]), int(cfg["data"]["micro_batch_size"])
    tokens_per_s = micro_batches * seq * mb / seconds
    params = model_shape(cfg).params
    peak_tf, peak_from = peak_tflops(name) if device.type == "cuda" else (None, "not a GPU")
    est = estimate(cfg, 1, gpu=device.type == "cuda")
    # the allocator sees neither the CUDA context nor NCCL's buffers: compare without the reserve
    est_alloc = est.training_bytes - est.items.get("CUDA context and NCCL (assumed)", 0.0)
    return {
        "model": cfg["model"]["name"],
        "params": params,
        "seq_len": seq,
        "micro_batch_size": mb,
        "device": name,
        "precision": str(trainer.compute_dtype),
        "micro_batches_timed": micro_batches,
        "seconds": seconds,
        "tokens_per_s": tokens_per_s,
        "model_tflops_per_s": 6 * params * tokens_per_s / 1e12,
        "peak_tflops": peak_tf,
        "peak_from": peak_from,
        "mfu": 6 * params * tokens_per_s / (peak_tf * 1e12) if peak_tf else None,
        "max_allocated_gb": None if peak is None else peak / GB,
        "estimated_allocated_gb": est_alloc / GB,
        "estimate": breakdown(est),
    }


def _overlap_rank(rank: int, overrides: list[str], world: int, port: int, out_dir: str) -> None:
    import json

    result = measure_overlap(overrides, rank, world, port)
    with open(os.path.join(out_dir, f"overlap_rank{rank}.json"), "w") as f:
        json.dump(result, f)


def measure_overlap_ranks(overrides: list[str], world: int, out_dir: str) -> list[dict]:
    """measure_overlap on `world` ranks, one process per rank (NCCL on GPU: one GPU per rank)."""
    import json

    import torch.multiprocessing as mp

    from ..runtime.launch import free_port

    if world == 1:
        return [measure_overlap(overrides)]
    os.makedirs(out_dir, exist_ok=True)
    mp.start_processes(
        _overlap_rank,
        args=(list(overrides), world, free_port(), out_dir),
        nprocs=world,
        join=True,
        start_method="spawn",
    )
    results = []
    for rank in range(world):
        with open(os.path.join(out_dir, f"overlap_rank{rank}.json")) as f:
            results.append(json.load(f))
    return results
