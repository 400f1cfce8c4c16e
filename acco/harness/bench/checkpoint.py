"""`make bench-checkpoint`: what a checkpoint costs each rank, for
ACCO and the paper's DDP (PyTorch DDP + ZeroRedundancyOptimizer), at world size 2, on a model large
enough (>= 300 M parameters) that the training state dominates the process.

Each method runs the real entry point twice: a 3-step run checkpointing every step, stopped after
step 2 by a checkpoint signal (as a Slurm time limit does), then `resume=auto`, which loads step 2's
checkpoint and finishes. The figures are what each rank measured of its own last save and of the
load (summary.json's per_rank checkpoint_io):

  state_bytes               the tensors of its part of the checkpoint (its own state, its share of
                            the parameters)
  peak_rss_save_over_state  (peak RSS during the save - RSS just before it) / state_bytes: the host
                            memory a save adds, as a share of what it writes (goal <= 0.25)
  resume_read_over_shard    bytes it read (read() calls, /proc/self/io rchar) during the load / its
                            own file's bytes (goal <= 1.1)
  save_s, load_s            seconds (on this shared machine: read them as orders of magnitude)

Beside them, DCP's asynchronous save (`async_save`) on the same bytes, measured in two processes of
their own: how long training would stall, and the host memory it adds."""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from datetime import date

from .. import SOURCE_ROOT, TRAIN

GOALS = {"peak_rss_save_over_state": 0.25, "resume_read_over_shard": 1.1}
# GPT-Neo, 24 layers of width 1024 (~302 M parameters with the small corpus's 384-token vocabulary),
# short sequences and micro-batches: the state is large, a step stays seconds on a CPU
LARGE_LM = [
    "model.config.hidden_size=1024",
    "model.config.num_layers=24",
    "model.config.num_heads=16",
    "model.config.intermediate_size=4096",
    "model.config.attention_types=[[[global,local],12]]",
    "model.config.window_size=32",
    "model.config.max_position_embeddings=64",
    "data.seq_len=64",
    "data.micro_batch_size=1",
    "data.source.num_stories=1500",
    "data.tokenizer.vocab_size=384",
]
METHODS = {
    "acco": ["method=acco"],
    "ddp": ["method=ddp", "method.impl=torch"],  # the paper's baseline: PyTorch DDP + ZeRO-1
}
COMMON = [
    "world_size=2",
    "train.accum=1",
    "train.deterministic=true",
    "train.threads=1",
    "train.checkpoint_every=1",
    "train.keep_checkpoints=1",
    "train.trace=false",
    "train.log_every=0",
    "train.eval_every=0",
]


def _train(args: list[str], timeout: float, ok: tuple[int, ...] = (0,)) -> None:
    proc = subprocess.run([*TRAIN, *args], cwd=SOURCE_ROOT, capture_output=True, text=True, timeout=timeout)
    if proc.returncode not in ok:
        raise RuntimeError(f"train {' '.join(args)} exited {proc.returncode}: {proc.stderr[-3000:]}")


def _per_rank(out_dir: str) -> list[dict]:
    with open(os.path.join(out_dir, "summary.json")) as f:
        return [r["checkpoint_io"] for r in json.load(f)["per_rank"]]


def _params(out_dir: str) -> int:
    import yaml

    from ...train.memory import model_shape

    with open(os.path.join(out_dir, "config.yaml")) as f:
        return model_shape(yaml.safe_load(f)).params


def measure_method(name: str, work: str, extra: list[str], timeout: float) -> dict:
    """Run `name` twice (saves until a signal stops it; a resume that loads the last); each rank's
    figures."""
    out = os.path.join(work, name)
    shutil.rmtree(out, ignore_errors=True)
    args = [*METHODS[name], *LARGE_LM, *COMMON, *extra, "train.steps=3", f"out_dir={out}"]
    # rank 0 is signalled after step 1: the ranks agree on it at step 2's boundary, save and stop (exit 3)
    _train([*args, "fault.signal_rank=0", "fault.at_step=1"], timeout, ok=(3,))
    first = _per_rank(out)
    _train([*args, "resume=auto"], timeout)
    second = _per_rank(out)
    ranks = []
    for rank, (a, b) in enumerate(zip(first, second)):
        save, load = a["last_save"], b["load"]
        over = (save["rss_peak"] - save["rss_before"]) / save["state_bytes"] if save["rss_peak"] is not None else None
        read = load["bytes_read"] / load["own_file_bytes"] if load["bytes_read"] is not None else None
        ranks.append(
            {
                "rank": rank,
                "saves": a["saves"],
                "state_bytes": save["state_bytes"],
                "file_bytes": save["file_bytes"],
                "peak_rss_save_over_state": round(over, 4) if over is not None else None,
                "resume_read_over_shard": round(read, 4) if read is not None else None,
                "bytes_read_on_resume": load["bytes_read"],
                "own_file_bytes": load["own_file_bytes"],
                "save_s": round(save["seconds"], 3),
                "load_s": round(load["seconds"], 3),
            }
        )
    meets = all(r[key] is not None and r[key] <= limit for r in ranks for key, limit in GOALS.items() if key in r)
    return {"overrides": args[: len(METHODS[name])], "params": _params(out), "ranks": ranks, "meets_goals": meets}


# -- DCP's asynchronous save, on the same bytes -------------------------------------------------------
def _async_worker(rank: int, init: str, folder: str, nbytes: int, queue) -> None:
    from datetime import timedelta

    import torch
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp

    from ...runtime.host_io import peak_rss_bytes, reset_peak_rss, rss_bytes
    from ...train import checkpoint_io
    from ...train.checkpoint_state import split_state

    dist.init_process_group(
        "gloo", init_method=f"file://{init}", rank=rank, world_size=2, timeout=timedelta(seconds=600)
    )
    group = dist.new_group([0, 1], backend="gloo")
    own = {"state": torch.randn(nbytes // 4)}  # fp32, the rank's bytes
    items, _ = split_state({}, own, rank, 2)
    state_bytes = own["state"].numel() * 4
    result = {}
    for mode in ("sync", "async"):
        path = os.path.join(folder, mode)
        dist.barrier(group)
        reset_peak_rss()
        before = rss_bytes() or 0
        start = time.perf_counter()
        if mode == "sync":
            checkpoint_io.save(items, path, group)
            stall = done = time.perf_counter() - start
        else:
            future = dcp.async_save(items, storage_writer=checkpoint_io.HashingWriter(path), process_group=group)
            stall = time.perf_counter() - start  # training would go on from here
            future.result()  # type: ignore[union-attr]
            done = time.perf_counter() - start
        peak = peak_rss_bytes() or 0
        result[mode] = {
            "stall_s": round(stall, 3),
            "done_s": round(done, 3),
            "peak_rss_over_state": round((peak - before) / state_bytes, 4),
        }
    queue.put((rank, result))
    dist.barrier(group)
    dist.destroy_process_group()


def measure_async(work: str, nbytes: int) -> dict:
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    folder = os.path.join(work, "async")
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    init = os.path.abspath(os.path.join(folder, "init"))  # file://<absolute path>
    procs = [ctx.Process(target=_async_worker, args=(r, init, folder, nbytes, queue)) for r in range(2)]
    for p in procs:
        p.start()
    results = dict(queue.get(timeout=1800) for _ in procs)
    for p in procs:
        p.join(timeout=120)
    shutil.rmtree(folder, ignore_errors=True)
    return {"bytes_per_rank": nbytes, "ranks": [results[r] for r in sorted(results)]}


# -- the outputs ----------------------------------------------------------------------------------------
def summary_line(result: dict) -> str:
    """The benchmark in one line (results/bench/targets.md's Checkpoints section, the closing line)."""
    parts = []
    for name, m in result["methods"].items():
        worst_rss = max(r["peak_rss_save_over_state"] for r in m["ranks"])
        worst_read = max(r["resume_read_over_shard"] for r in m["ranks"])
        gb = max(r["state_bytes"] for r in m["ranks"]) / 1e9
        parts.append(
            f"{name} ({m['params'] / 1e6:.0f} M parameters, {gb:.2f} GB per rank): peak RSS during a save "
            f"+{worst_rss:.3f} x the state, resume read {worst_read:.3f} x its own file "
            f"({'meets' if m['meets_goals'] else 'misses'} the goals)"
        )
    a = result.get("async_save")
    if a:
        sync = max(r["sync"]["stall_s"] for r in a["ranks"])
        stall = max(r["async"]["stall_s"] for r in a["ranks"])
        rss = max(r["async"]["peak_rss_over_state"] for r in a["ranks"])
        parts.append(
            f"DCP's async_save of the same bytes stalls {stall:.2f} s against the save's {sync:.2f} s, "
            f"adding {rss:.2f} x the state in host memory"
        )
    return "; ".join(parts) + f" (world size 2, {result['machine']['date']}, results/bench/checkpoint.json)"


def update_targets(out: str, line: str) -> str | None:
    """results/bench/targets.md's `## Checkpoints` section: this line (added, or replaced)."""
    path = os.path.join(out, "targets.md")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        text = f.read()
    head = "## Checkpoints (make bench-checkpoint)\n"
    section = f"{head}\n{line}\n"
    if head in text:
        before, _, rest = text.partition(head)
        after = rest.split("\n## ", 1)
        text = before + section + ("\n## " + after[1] if len(after) > 1 else "")
    else:
        text = text.rstrip("\n") + "\n\n" + section
    with open(path, "w") as f:
        f.write(text)
    return path


def _commit() -> str | None:
    """The checkout's commit, `+changes` when its tracked files differ from it."""
    proc = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=SOURCE_ROOT, capture_output=True, text=True)
    if proc.returncode != 0 or not proc.stdout.strip():
        return None
    dirty = subprocess.run(["git", "diff", "--quiet", "HEAD"], cwd=SOURCE_ROOT).returncode != 0
    return proc.stdout.strip() + ("+changes" if dirty else "")


def _write(path: str, result: dict) -> None:
    from ...atomic import atomic_write_json

    atomic_write_json(path, result)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="results/bench", help="where checkpoint.json goes (targets.md there gets its line)")
    p.add_argument("--work", default=None, help="where the runs go (default: <out>/checkpoint-runs, removed after)")
    p.add_argument("--methods", default=",".join(METHODS), help=f"comma list of {', '.join(METHODS)}")
    p.add_argument("--no-async", action="store_true", help="skip the async_save measurement")
    p.add_argument(
        "--async-only", action="store_true", help="only the async_save measurement, on checkpoint.json's bytes"
    )
    p.add_argument("--set", nargs="*", default=[], help="more train.py overrides (a smaller model for a try)")
    p.add_argument("--timeout", type=float, default=1800, help="seconds per training run")
    a = p.parse_args(argv if argv is not None else sys.argv[1:])
    methods = [m for m in a.methods.split(",") if m]
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        print(f"error: --methods: unknown {', '.join(unknown)}; choose from {', '.join(METHODS)}", file=sys.stderr)
        return 2
    work = a.work or os.path.join(a.out, "checkpoint-runs")
    os.makedirs(a.out, exist_ok=True)
    import torch

    result: dict = {
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "torch": torch.__version__,
            "date": date.today().isoformat(),
            "commit": _commit(),
            "load_1min_at_start": round(os.getloadavg()[0], 2),
        },
        "goals": GOALS,
        "model": LARGE_LM + a.set,
        "methods": {},
    }
    path = os.path.join(a.out, "checkpoint.json")
    if a.async_only:  # the methods' figures as they are
        with open(path) as f:
            result["methods"] = json.load(f)["methods"]
    for name in [] if a.async_only else methods:
        print(f"bench-checkpoint: {name} ...", file=sys.stderr, flush=True)
        result["methods"][name] = measure_method(name, work, a.set, a.timeout)
        _write(path, result)  # what is measured so far
    if not a.no_async:
        per_rank = max(r["state_bytes"] for m in result["methods"].values() for r in m["ranks"])
        print("bench-checkpoint: DCP async_save on the same bytes ...", file=sys.stderr, flush=True)
        result["async_save"] = measure_async(work, per_rank)
    if a.work is None:
        shutil.rmtree(work, ignore_errors=True)
    _write(path, result)
    line = summary_line(result)
    update_targets(a.out, line)
    print(line)
    return 0 if all(m["meets_goals"] for m in result["methods"].values()) else 1
