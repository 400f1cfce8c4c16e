"""CUDA-specific measurements for `make gpu-check`: one rank's real
trainer (Trainer: flat bf16 buffers, fp32 master shard, the communication thread and its
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
  and the allocator's peak beside the memory model's estimate for the same run.

Everything runs on CPU too (no events, wall-clock instead), which is how the CPU test suite keeps
this code honest; the numbers only mean something on a GPU."""

from __future__ import annotations

import os
import statistics
import time
from collections import Counter

import torch

from ..config.schema import RunView
from ..engine.trace import interval_overlap
from ..methods import get
from . import SOURCE_ROOT

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
    """Compose the config as the train command would, join the process group (NCCL on GPU) and
    build the task and the trainer (tracing on where `trace`). Returns (its typed view, trainer)."""
    from ..config.experiments import compose
    from ..config.schema import typed
    from ..engine.trace import TraceRecorder
    from ..tasks import load_task_factory
    from ..train.trainer import Trainer
    from .launch import DistEnv, cuda_allocator_settings, free_port, init_process_group, pick_device
    from .run.preflight import with_step_timeout

    cuda_allocator_settings()  # the production allocator setting (expandable segments), as a rank's
    cfg = compose(list(overrides))
    cfg["world_size"] = world
    # what the task and the trainer read; dist.step_timeout_s null: sized as a launched run's is
    view, problem = with_step_timeout(typed(cfg))
    if problem:
        raise ValueError(problem)
    # not exported to os.environ: a later subprocess would take them for torchrun's
    env = DistEnv(rank, world, rank, world, "127.0.0.1", port or free_port(), "local")
    device = pick_device(view.device, rank, shared=view.dist.backend == "gloo")
    init_process_group(env, device, view.dist.timeout_s, view.dist.backend, deterministic=view.train.deterministic)
    os.makedirs(view.out_dir, exist_ok=True)
    task = load_task_factory(view.task)(view, rank, world, device)
    trainer = Trainer(view, task, rank, world, device, TraceRecorder(rank, enabled=trace), None)
    return view, trainer


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


_sleep_rate: dict[str, float] = {}


def sleep_cycles_per_s(device: torch.device) -> float:
    """How many cycles torch.cuda._sleep spins per second on `device` (measured once, with events)."""
    key = str(device)
    if key not in _sleep_rate:
        cycles = 50_000_000
        torch.cuda.synchronize(device)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        torch.cuda._sleep(cycles)
        end.record()
        end.synchronize()
        _sleep_rate[key] = cycles / (start.elapsed_time(end) / 1e3)
    return _sleep_rate[key]


def stretched(fn, seconds: float, device: torch.device):
    """`fn` made about `seconds` longer on the stream it runs on: a sleep kernel first on a GPU (its
    stream is busy, the SMs stay free for the compute stream: a slow link's sync, emulated), a
    host sleep on CPU (the communication thread releases the GIL)."""
    if seconds <= 0:
        return fn
    if device.type == "cuda":
        cycles = int(seconds * sleep_cycles_per_s(device))

        def on_gpu(*args, **kwargs):
            torch.cuda._sleep(cycles)
            return fn(*args, **kwargs)

        return on_gpu

    def on_cpu(*args, **kwargs):
        time.sleep(seconds)
        return fn(*args, **kwargs)

    return on_cpu


def measure_overlap(
    overrides: list[str], rank: int = 0, world: int = 1, port: int | None = None, stretch_s: float = 0.0
) -> dict:
    """Train the configured run with every micro-batch and sync timed on its own stream; the
    fraction of the syncs' time (all but the last, which has no compute beside it) that lies
    inside micro-batches. `stretch_s`: each sync made that much longer on its stream (`stretched`)."""
    cfg, trainer = start_rank(overrides, rank, world, port)
    try:
        timeline = Timeline(trainer.device)
        trainer.runner.run_one = timeline.wrap("compute", trainer.runner.run_one)
        syncer = getattr(trainer.backend, "syncer", None)  # the flat engine's (PyTorch DDP has none)
        if syncer is not None:
            syncer.sync = timeline.wrap("sync", stretched(syncer.sync, stretch_s, trainer.device))
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


# -- the overlap as a bound (issue 42 point 2) ---------------------------------------------------------
# A sync that lies inside compute spans proves nothing: a sync starved behind the compute kernels
# gets longer and still lies inside them. The check is on time instead, with the sync stretched
# (a sleep kernel on its stream: one GPU has no link to hide) to about a round's compute, where
# hiding it matters most: a sequential schedule then takes c + s per round, an overlapped one
# max(c, s). MARGIN is the room left for what a round adds besides (the host's launch gaps, the
# buffer copies in and out): reasoned, not measured; 1 + MARGIN stays far below the 2x a
# sequential round would take at c = s.
OVERLAP_MARGIN = 0.2


def _durations(spans: list) -> list[float]:
    return [e - s for s, e in spans]


def round_period(sync_spans: list) -> float:
    """The median time between successive syncs' ends, the first and last rounds left out (the
    prologue's, and the known last round's, which computes nothing)."""
    ends = [e for _, e in sync_spans]
    gaps = [b - a for a, b in zip(ends[1:-1], ends[2:-1])] or [b - a for a, b in zip(ends, ends[1:])]
    return statistics.median(gaps)


def _inside_sync(compute: list, syncs: list) -> list:
    return [(s, e) for s, e in compute if any(a < e and s < b for a, b in syncs)]


def overlap_bound(
    overrides: list[str], methods=("acco", "dpu", "wp"), steps: int = 8, accum: int = 2, margin: float = OVERLAP_MARGIN
) -> dict:
    """One rank (world 1: the sync's collectives are copies, the stretch is its communication):
    flat DDP timed alone, its sync stretched to a round's compute, then each overlapped method at
    the same stretch. Verdicts: flat DDP's round at least (c + s)(1 - margin) (it is sequential, as
    it should be); an overlapped method's round at most max(c, s)(1 + margin); its sync beside
    compute at most (1 + margin) x the sync alone (not starved); a micro-batch beside a sync at
    most (1 + margin) x one alone (not slowed)."""
    base = [*overrides, f"train.steps={steps}", f"train.accum={accum}", "train.deterministic=true"]
    flat = ["method=ddp", "method.impl=flat"]
    calib = measure_overlap([*flat, *base])
    mb0 = statistics.median(_durations(calib["compute_spans"][accum:]))
    s0 = statistics.median(_durations(calib["sync_spans"]))
    stretch_s = max(0.0, accum * mb0 - s0)  # the stretched sync ~ a round's compute
    ddp = measure_overlap([*flat, *base], stretch_s=stretch_s)
    mb_alone = statistics.median(_durations(ddp["compute_spans"][accum:]))
    c = accum * mb_alone
    s_alone = statistics.median(_durations(ddp["sync_spans"]))
    period = round_period(ddp["sync_spans"])
    rows: dict[str, dict] = {
        "ddp_flat": {
            "round_s": period,
            "bound_s": (c + s_alone) * (1 - margin),
            "holds": period >= (c + s_alone) * (1 - margin),
            "rule": "round >= (c + s)(1 - margin): sequential",
        }
    }
    for method in methods:
        # overlapped from the first step: no sequential warmup where the method has one
        extra = ["method.warmup_steps=0"] if "warmup_steps" in get(method).settings else []
        run = measure_overlap([f"method={method}", *extra, *base], stretch_s=stretch_s)
        period = round_period(run["sync_spans"])
        s_over = statistics.median(_durations(run["sync_spans"][1:-1] or run["sync_spans"]))
        beside = _inside_sync(run["compute_spans"], run["sync_spans"][:-1])
        mb_with = statistics.median(_durations(beside)) if beside else None
        checks = {
            "round": period <= max(c, s_alone) * (1 + margin),
            "sync_not_starved": s_over <= s_alone * (1 + margin),
            "compute_not_slowed": mb_with is None or mb_with <= mb_alone * (1 + margin),
        }
        rows[method] = {
            "round_s": period,
            "bound_s": max(c, s_alone) * (1 + margin),
            "sequential_s": c + s_alone,
            "sync_beside_compute_s": s_over,
            "micro_batch_beside_sync_s": mb_with,
            "checks": checks,
            "holds": all(checks.values()),
            "rule": "round <= max(c, s)(1 + margin); sync <= s(1 + margin); micro-batch <= alone (1 + margin)",
        }
    return {
        "clock": "cuda events" if calib["clock"] == "cuda events" else "host",
        "model": calib["model"],
        "accum": accum,
        "margin": margin,
        "micro_batch_alone_s": mb_alone,
        "round_compute_s": c,
        "sync_unstretched_s": s0,
        "stretch_s": stretch_s,
        "sync_alone_s": s_alone,
        "methods": rows,
        "holds": all(r["holds"] for r in rows.values()),
    }


def sync_source(filename: str, lineno: int) -> tuple[str, bool]:
    """Where a synchronizing call came from, as the sync-debug warning gives it (the innermost
    Python frame), and whether that is an installed library's code rather than this checkout's:
    (`transformers/models/...py:120`, True) or (`acco/engine/sync.py:81`, False)."""
    path = filename.replace(os.sep, "/")
    for marker in ("/site-packages/", "/dist-packages/"):
        if marker in path:
            return f"{path.split(marker, 1)[1]}:{lineno}", True
    root = SOURCE_ROOT.replace(os.sep, "/")  # the folder holding the acco package
    if path.startswith(root + "/"):
        return f"{path.removeprefix(root + '/')}:{lineno}", False
    return f"{path}:{lineno}", True  # a library installed elsewhere (a system Python's)


def measure_sync_debug(overrides: list[str], warmup_micro_batches: int = 4) -> dict:
    """Host syncs of a traced, deterministic ACCO run, found by torch.cuda.set_sync_debug_mode
    (issue 30 point 2): every synchronizing CUDA call warns, and each warning is filed by when it
    came (warm-up, inside a micro-batch, between them, on the communication thread) and by the
    source line that made it (the warning's own file and line: the model's, the engine's, torch's),
    so a sync in a model's forward is not read as the engine's. `error` is set when one came from
    inside a micro-batch past the first step on the compute thread (the GPU would drain between
    micro-batches), naming its source. "warn" rather than "error": the mode is process-wide, and
    the communication thread's stream synchronize before `done` is by design
    (the comm worker's); it must not fail the compute side's check."""
    import threading
    import warnings

    cfg, trainer = start_rank(
        [*overrides, "train.steps=3", "train.accum=2", "train.deterministic=true", "train.trace=true"], trace=True
    )
    cuda = trainer.device.type == "cuda"
    main = threading.get_ident()
    state = {"calls": 0, "inside": False}
    found: dict[str, list[str]] = {}  # when -> the source of each sync
    libraries: set[str] = set()  # the sources in installed libraries' code
    run_one = trainer.runner.run_one

    def checked(*args, **kwargs):
        state["calls"] += 1
        state["inside"] = state["calls"] > warmup_micro_batches
        try:
            return run_one(*args, **kwargs)
        finally:
            state["inside"] = False

    def show(message, category, filename, lineno, file=None, line=None):
        if "synchroniz" not in str(message):
            return
        if threading.get_ident() != main:
            where = "communication thread"
        elif state["inside"]:
            where = "micro-batch"
        elif state["calls"] <= warmup_micro_batches:
            where = "warm-up"
        else:
            where = "between micro-batches"
        source, library = sync_source(filename, lineno)
        found.setdefault(where, []).append(source)
        if library:
            libraries.add(source)

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
    sources = {where: dict(Counter(srcs).most_common()) for where, srcs in found.items()}
    inside = sources.get("micro-batch", {})
    # the check is the engine's: a sync from this checkout fails it; one from an installed library
    # (a model's forward in transformers, say) is named, not blamed on the engine
    ours = {src: n for src, n in inside.items() if src not in libraries}
    library = {src: n for src, n in inside.items() if src not in ours}
    error = None
    if ours:
        named = ", ".join(f"{src} ({n})" for src, n in ours.items())
        error = f"{sum(ours.values())} host syncs inside micro-batches, from {named}"
    return {
        "method": cfg["method"]["name"],
        "checked": cuda,
        "micro_batches": state["calls"],
        "syncs": {where: len(srcs) for where, srcs in found.items()},
        "sources": sources,
        "library_syncs_inside_micro_batches": library,
        "error": error,
    }


def allocator_peaks(device: torch.device) -> dict:
    """The caching allocator's peaks since the last reset, in GB: what tensors held (allocated),
    what it took from the device (reserved: every stream's pool), and its retries (a free of the
    cache and a second try: a run near the device's limit)."""
    from ..train.memory import GB

    if device.type != "cuda":
        return {"max_allocated_gb": None, "max_reserved_gb": None, "alloc_retries": None}
    return {
        "max_allocated_gb": torch.cuda.max_memory_allocated(device) / GB,
        "max_reserved_gb": torch.cuda.max_memory_reserved(device) / GB,
        "alloc_retries": int(torch.cuda.memory_stats(device).get("num_alloc_retries", 0)),
    }


def estimated_allocator_gb(cfg: RunView, gpu: bool = True) -> tuple[float, str]:
    """The memory model's `estimate` of what the allocator holds at the peak (the CUDA context
    and NCCL's buffers, which it does not see, taken out), in GB, and the estimate's breakdown."""
    from ..train.memory import GB, breakdown, estimate

    est = estimate(cfg, int(cfg["world_size"]), gpu=gpu)
    return (est.training_bytes - est.items.get("CUDA context and NCCL (assumed)", 0.0)) / GB, breakdown(est)


def measure_memory(overrides: list[str], method: tuple[str, ...] = ("method=acco",), steps: int = 3) -> dict:
    """One rank of `method` on one device for `steps` steps (estimate and commit rounds, their
    syncs beside the compute): the allocator's peaks against the memory estimate for the run."""
    cfg, trainer = start_rank([*overrides, *method, f"train.steps={steps}", "train.accum=1", "world_size=1"])
    device = trainer.device
    try:
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        trainer.train()
        peaks = allocator_peaks(device)
    finally:
        stop_rank(trainer)
    estimated, parts = estimated_allocator_gb(cfg, device.type == "cuda")
    return {
        "model": cfg["model"]["name"],
        "method": cfg["method"]["name"],
        "seq_len": int(cfg["data"]["seq_len"]),
        "micro_batch_size": int(cfg["data"]["micro_batch_size"]),
        **peaks,
        "estimated_allocated_gb": estimated,
        "estimate": parts,
    }


def measure_throughput(overrides: list[str], micro_batches: int = 10, warmup: int = 3, steps: int = 2) -> dict:
    """One rank of ddp (flat) on one device: `steps` full training steps (so the sync's memory is
    in the peak), then `micro_batches` timed fwd+bwd micro-batches after `warmup` more."""
    from ..train.memory import model_shape

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
        peaks = allocator_peaks(device)
        name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    finally:
        stop_rank(trainer)
    seconds = spans[-1][1] - spans[0][0]  # back to back: includes the host's gaps between them
    seq, mb = int(cfg["data"]["seq_len"]), int(cfg["data"]["micro_batch_size"])
    tokens_per_s = micro_batches * seq * mb / seconds
    params = model_shape(cfg).params
    peak_tf, peak_from = peak_tflops(name) if device.type == "cuda" else (None, "not a GPU")
    estimated, parts = estimated_allocator_gb(cfg, device.type == "cuda")
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
        **peaks,
        "estimated_allocated_gb": estimated,
        "estimate": parts,
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

    from .launch import free_port

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
