#!/usr/bin/env python
"""`make gpu-check`: everything CUDA-specific, in at most 8.5 minutes on one H200, written to
results/gpu/. Without a CUDA GPU it says so and exits 0.

    python experiments/gpu_check.py [--out results/gpu] [--budget-s 510]

On a machine with no internet and its own PyTorch (no virtual environment), with the wheel folder
`make wheels` made beforehand on a machine with the registry (docs/gpu-check.md):

    python -m pip install --no-index --no-deps --target .gpu-deps wheels/*.whl
    PYTHONPATH=.gpu-deps python experiments/gpu_check.py --out results/gpu

The parts (`plan`), each in its own process group with its own time box (killed as a whole group
when it runs out: forkserver -> train.py -> workers), in this order, the most decisive first; the
summary is rewritten after every part, so what finished is written even when a later part fails
or runs out of time:

- prepare: every data cache the later parts read, built side by side before anything is timed;
- correctness (tests/gpu/, 12 at a time): every method (diloco and streaming_diloco too)
  on the GPU against the single-process fp32 reference on CPU; deterministic runs (torch's
  deterministic kernels, set before the first process group) whose final parameters must be
  bitwise equal between the communication thread as it runs, delays injected on both streams
  before the writes they test, and the inline worker, with deterministic rounds and with adaptive
  rounds counted by the virtual clock; evaluation, a checkpoint and an exact resume with CUDA
  tensors; the runs' storage dtypes; the other gpu tests;
- sync_debug: no host sync from this checkout inside the micro-batches of a traced ACCO run
  (set_sync_debug_mode; each sync filed by its source line, a library's named, not failed);
- overlap: the overlap as a bound: with the sync stretched to a round's compute, flat DDP's round
  c + s, the overlapped methods' max(c, s), within a margin (acco/harness/gpu_check.py overlap_bound);
- memory: ACCO's allocator peaks (allocated, reserved, retries) against the memory estimate;
- throughput: tokens/s and MFU of the paper's 125M and 36M GPT-Neo, the allocator's peaks beside
  the estimate, without the deterministic settings (as production runs).

One GPU runs world 1, where the process group is NCCL but reduce-scatter and all-gather are
copies (acco/engine/collectives.py): only with 2 GPUs do the reference and race tests run world 2
over NCCL. The summary says which ran.

Internal (one measurement, what the parts and the gpu tests run): `--part throughput|memory
--model M --seq S --mb B --json PATH`, `--part overlap --method M [--world N] --json PATH`,
`--part overlap_bound|sync_debug --json PATH`; extra config overrides after them."""

import argparse
import datetime
import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)  # acco from this checkout where it is not installed (PYTHONPATH=.gpu-deps)

# the small model of the test parts (its cache is built by `prepare`); acco.harness.bench imports nothing
from acco.harness.bench import SMALL_LM  # noqa: E402
from acco.methods.variants import UnknownVariant, Variant, resolve  # noqa: E402

# the paper's settings (conf/experiment/fig5/, fig7/): model, sequence length, micro-batch
THROUGHPUT = [("gptneo_36m", 512, 16), ("gptneo_125m", 1024, 24)]
BUDGET_S = 510  # the whole check on one H200 (measured parts: results/gpu/2026-12-04-second)
RESERVE_S = 10  # for writing the summary

# the files of the other tests marked gpu, in tests/gpu/ (each part above runs its own selection)
OTHER_GPU_TESTS = ["test_gpu_trace.py", "test_gpu_readiness.py", "test_comm_worker.py"]


@dataclass(frozen=True)
class Part:
    """One part of the check: its commands run in turn (or all at once where `parallel`), in
    process groups of their own, within `budget_s`."""

    name: str
    budget_s: int  # on one H200 (measured 2026-12-04 where the first run got that far: see results/gpu)
    what: str
    commands: tuple[tuple[str, ...], ...]
    parallel: bool = False


def pytest_part(name: str, budget_s: int, what: str, files: list[str], select: str, out: str, workers: int = 1) -> Part:
    """A pytest run of the gpu tests `select`ed from `files`; `workers` > 1: that many processes at
    once (pytest-xdist): each GPU test spawns its own runs, which one GPU and 16 cores take side by
    side (the first run measured 30-45 s a test, one at a time)."""
    spread = ["-n", str(workers)] if workers > 1 else []
    return Part(
        name,
        budget_s,
        what,
        (
            (
                sys.executable,
                "-m",
                "pytest",
                "-v",
                "-rA",  # every test's outcome in the log as it goes (kept if the part runs out of time)
                "-p",
                "no:cacheprovider",
                *spread,
                "-m",
                "gpu",
                "-k",
                select,
                f"--timeout={budget_s}",
                *files,
                f"--junitxml={os.path.join(out, name + '.xml')}",
            ),
        ),
    )


def prepare_part(name: str, budget_s: int, what: str, caches: list[tuple[str, ...]]) -> Part:
    """experiments/prepare_data.py for each of `caches` (its overrides), side by side."""
    prepare = os.path.join(ROOT, "experiments", "prepare_data.py")
    return Part(name, budget_s, what, tuple((sys.executable, prepare, *c) for c in caches), parallel=True)


def internal_part(name: str, budget_s: int, what: str, out: str, *args: str) -> Part:
    """One of this script's own measurements (`--part ...`), its JSON in `out`."""
    me = os.path.abspath(__file__)
    return Part(name, budget_s, what, ((sys.executable, me, *args, "--json", os.path.join(out, f"{name}.json")),))


CORRECTNESS_FILES = [f"tests/gpu/{n}" for n in ("test_gpu.py", "test_gpu_races.py", *OTHER_GPU_TESTS)]
OVERLAP_TEST = "round_is_max"  # tests/gpu/test_gpu.py's overlap bound, its own part (timed alone)


# the paper's per-rank shapes (issue 48): GPT-Neo 2.7B's width cut to a few layers (fig8: sequence 512,
# micro-batch 4, fp32 gradients as the paper's fine-tuning keeps them) and GPT-Neo 125M (fig7: sequence
# 1024, micro-batch 24), freshly initialised (no weights needed)
WIDE_2P7B = ["model.pretrained_path=null", "train.grad_dtype=fp32"]
DEPTHS = (2, 4)  # layers of the 2.7B width timed; the full depth's time is extrapolated from them
PAPER_BUDGET_S = 240


def depth_overrides(layers: int) -> list[str]:
    return [
        *WIDE_2P7B,
        f"model.config.num_layers={layers}",
        f"model.config.attention_types=[[[global,local],{layers // 2}]]",
    ]


def paper_shapes_plan(out: str) -> list[Part]:
    """`--plan paper-shapes`: ACCO's allocator peaks at fig8's and fig7's per-rank shapes against
    acco/train/memory.py's estimate, and tokens/s at two depths of the 2.7B width, from which the full
    depth's time per micro-batch and MFU are extrapolated (depths.json). Run after the main plan."""
    caches = [
        ("data=synthetic", "model=gptneo_2p7b", *WIDE_2P7B, "data.seq_len=512", "data.micro_batch_size=4"),
        ("data=synthetic", "model=gptneo_125m", "data.seq_len=1024", "data.micro_batch_size=24"),
    ]
    parts = [
        prepare_part("prepare_paper_shapes", 30, "the data caches of the parts below", caches),
        internal_part(
            "memory_acco_fig8_shape",
            50,
            "ACCO's allocator peaks at fig8's per-rank shape (2.7B width, 4 layers, seq 512, mb 4, "
            "fp32 gradients) vs the estimate",
            out,
            "--part",
            "memory",
            "--model",
            "gptneo_2p7b",
            "--seq",
            "512",
            "--mb",
            "4",
            *depth_overrides(4),
        ),
        internal_part(
            "memory_acco_fig7_shape",
            40,
            "ACCO's allocator peaks at fig7's per-rank shape (125M, seq 1024, mb 24) vs the estimate",
            out,
            "--part",
            "memory",
            "--model",
            "gptneo_125m",
            "--seq",
            "1024",
            "--mb",
            "24",
        ),
    ]
    for layers in DEPTHS:
        parts.append(
            internal_part(
                f"throughput_2p7b_{layers}layers",
                50,
                f"tokens/s of the 2.7B width at {layers} layers (seq 512, mb 4): the depth extrapolation's points",
                out,
                "--part",
                "throughput",
                "--model",
                "gptneo_2p7b",
                "--seq",
                "512",
                "--mb",
                "4",
                *depth_overrides(layers),
            )
        )
    return parts


def extrapolate_depth(rows: list[dict], full_layers: int, full_params: int, peak_tflops: float | None) -> dict:
    """A micro-batch's time is a + b x layers (embedding, logits and loss; one layer): from two
    depths, the full depth's time, tokens/s and MFU (6 x the full model's parameters per token)."""
    (l1, r1), (l2, r2) = sorted((int(r["layers"]), r) for r in rows)
    tokens = r1["seq_len"] * r1["micro_batch_size"]
    t1, t2 = tokens / r1["tokens_per_s"], tokens / r2["tokens_per_s"]
    per_layer = (t2 - t1) / (l2 - l1)
    fixed = t1 - per_layer * l1
    t_full = fixed + per_layer * full_layers
    tokens_per_s = tokens / t_full
    return {
        "layers_timed": [l1, l2],
        "seconds_per_micro_batch": [t1, t2],
        "fixed_s": fixed,
        "per_layer_s": per_layer,
        "full_layers": full_layers,
        "full_params": full_params,
        "full_seconds_per_micro_batch": t_full,
        "full_tokens_per_s": tokens_per_s,
        "peak_tflops": peak_tflops,
        "mfu": 6 * full_params * tokens_per_s / (peak_tflops * 1e12) if peak_tflops else None,
        "use": "the dry run's compute at this MFU: reproduce.py fig8 --scale paper --dry-run launcher.mfu=<mfu>",
    }


def collect_depths(out: str) -> None:
    """depths.json: the 2.7B width's full-depth micro-batch time and MFU, from the two depths timed."""
    rows = []
    for layers in DEPTHS:
        row = read_json(os.path.join(out, f"throughput_2p7b_{layers}layers.json"))
        if row:
            rows.append({**row, "layers": layers})
    if len(rows) < 2:
        return
    from acco.config.experiments import compose
    from acco.config.schema import typed
    from acco.train.memory import model_shape

    full = typed(compose(["model=gptneo_2p7b", "model.pretrained_path=null"]))
    shape = model_shape(full)  # layers and parameters from the built config
    result = extrapolate_depth(rows, shape.layers, shape.params, rows[0].get("peak_tflops"))
    with open(os.path.join(out, "depths.json"), "w") as f:
        json.dump(result, f, indent=1)


def plan(out: str) -> list[Part]:
    """The parts in the order they run, with their budgets (together at most BUDGET_S): the most
    decisive first, so a machine lent for less time still answers them."""
    caches = [("data=synthetic", *SMALL_LM)] + [
        ("data=synthetic", f"model={m}", f"data.seq_len={seq}", f"data.micro_batch_size={mb}")
        for m, seq, mb in [*THROUGHPUT, ("gptneo_36m", 512, 4)]
    ]
    big, big_seq, big_mb = THROUGHPUT[-1]
    parts = [
        prepare_part(
            "prepare", 45, "the data caches of every later part, built side by side before anything is timed", caches
        ),
        pytest_part(
            "correctness",
            240,
            "every method against the single-process fp32 reference; final parameters bitwise equal "
            "(threaded, delays on both streams, inline; deterministic and adaptive rounds); evaluation, "
            "checkpoint and exact resume with CUDA tensors; storage dtypes; the other gpu tests",
            CORRECTNESS_FILES,
            f"not {OVERLAP_TEST}",
            out,
            workers=12,
        ),
        internal_part(
            "sync_debug",
            30,
            "no host sync inside the micro-batches of a traced ACCO run (set_sync_debug_mode), each by source",
            out,
            "--part",
            "sync_debug",
            *SMALL_LM,
            "method=acco",
            "device=cuda",
        ),
        pytest_part(
            "overlap",
            60,
            "the overlap as a bound: with the sync stretched to a round's compute, flat DDP's round c + s, "
            "ACCO's, DPU's and WP's max(c, s) (+20 %), the sync not starved, the compute not slowed",
            ["tests/gpu/test_gpu.py"],
            OVERLAP_TEST,
            out,
        ),
        internal_part(
            f"memory_acco_{big}",
            40,
            f"ACCO's allocator peaks (allocated, reserved, retries) against the estimate, {big}",
            out,
            "--part",
            "memory",
            "--model",
            big,
            "--seq",
            str(big_seq),
            "--mb",
            str(big_mb),
        ),
    ]
    for (model, seq, mb), budget in zip(reversed(THROUGHPUT), (40, 30)):
        parts.append(
            internal_part(
                f"throughput_{model}",
                budget,
                f"tokens/s, MFU and peak memory of {model} at sequence {seq}, micro-batch {mb}",
                out,
                "--part",
                "throughput",
                "--model",
                model,
                "--seq",
                str(seq),
                "--mb",
                str(mb),
            )
        )
    return parts


def kill_group(pgid: int, grace_s: float = 5.0) -> None:
    """SIGTERM to the whole process group, SIGKILL to what is left after `grace_s`."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        end = time.time() + grace_s
        while time.time() < end:
            try:
                os.killpg(pgid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.1)


def run_part(part: Part, timeout_s: float, log_path: str) -> dict:
    """The part's commands in turn (or all at once where `parallel`), each in a new session (its
    own process group) that is killed as a whole at the time box, and after the command ends (no
    orphan outlives its part)."""
    start = time.time()
    status = "passed"
    with open(log_path, "w") as log:
        batches = [part.commands] if part.parallel else [(argv,) for argv in part.commands]
        for batch in batches:
            procs = []
            for argv in batch:
                log.write(f"$ {' '.join(argv)}\n")
                log.flush()
                procs.append(
                    subprocess.Popen(argv, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
                )
            codes: list[int | None] = []
            for proc in procs:
                try:
                    codes.append(proc.wait(timeout=max(1.0, start + timeout_s - time.time())))
                except subprocess.TimeoutExpired:
                    codes.append(None)
            for proc in procs:
                kill_group(proc.pid)
                proc.wait()
            if None in codes:
                status = f"timed out after {timeout_s:.0f} s"
                break
            failed = [c for c in codes if c != 0]
            if failed:
                status = f"failed (exit {failed[0]})"
                break
    return {"status": status, "seconds": round(time.time() - start, 1), "log": os.path.basename(log_path)}


def scratch(name: str) -> str:
    """A run folder of the internal parts, under $ACCO_GPU_TMP (the tests point it at their tmp_path)."""
    return os.path.join(os.environ.get("ACCO_GPU_TMP", "/tmp/acco-gpu-check"), name)


def throughput_overrides(model: str, seq: int, mb: int) -> list[str]:
    """The real model on the embedded corpus (no download) packed at the paper's length."""
    return [
        f"model={model}",
        "data=synthetic",
        f"data.seq_len={seq}",
        f"data.micro_batch_size={mb}",
        "device=cuda",
        "train.log_every=0",
        "train.trace=false",
        f"out_dir={scratch(model)}",
    ]


# --part overlap's --method: a trainer spelling (any method it runs), or a key of this table (a
# method's name runs with its defaults); the flat DDP's results are filed under its key
OVERLAP_VARIANTS = (Variant("ddp_flat", "ddp", (("method.impl", "flat"),)), Variant("ddp", "ddp"))


def overlap_overrides(method: str, world: int = 1) -> list[str]:
    """The overlap measurement: GPT-Neo 36M (GPU-bound micro-batches, a sync of a real size) on the
    embedded corpus, adaptive rounds (the compute side keeps going while the sync runs)."""
    variant = resolve(method, OVERLAP_VARIANTS, tool="gpu-check", open_ended=True)
    folder = re.sub(r"[:=]", "_", variant.key)  # a spelling's ':' and '=' are not Hydra values unquoted
    return [
        *variant.overrides,
        "model=gptneo_36m",
        "data=synthetic",
        "data.seq_len=512",
        "data.micro_batch_size=4",
        "train.steps=6",
        "train.accum=2",
        "train.deterministic=false",
        "device=cuda",
        f"world_size={world}",
        "train.log_every=0",
        "train.trace=false",
        f"out_dir={scratch(f'overlap_{folder}_{world}')}",
    ]


def read_json(path: str):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def _gb(value) -> str:
    return "—" if value is None else f"{value:.2f}"


def summary_md(out: str, machine: dict, parts: dict) -> str:
    lines = [
        "# GPU check (`make gpu-check`)",
        "",
        f"Generated by `experiments/gpu_check.py` on {machine['date']}: {machine['gpus']} x "
        f"{machine['name']} ({machine['memory_gb']:.0f} GB), torch {machine['torch']}, CUDA {machine['cuda']}.",
        "",
        f"NCCL: {nccl_coverage(machine['gpus'])}",
        "",
        "| part | checks | budget s | status | seconds | log |",
        "|---|---|---|---|---|---|",
    ]
    for name, p in parts.items():
        lines.append(f"| {name} | {p['what']} | {p['budget_s']} | {p['status']} | {p['seconds']} | {p['log']} |")
    ref = read_json(os.path.join(out, "reference.json")) or {}
    if ref:
        lines += [
            "",
            "## Against the single-process reference (bf16 on GPU vs fp32 on CPU)",
            "",
            "| run | ‖θ−θ_ref‖/‖θ_ref−θ_0‖ | nearest other method's | loss rel. diff |",
            "|---|---|---|---|",
        ]
        for key, r in sorted(ref.items()):
            lines.append(f"| {key} | {r['rel_error']:.4f} | {r['nearest_other']:.4f} | {r['loss_rel_diff']:.4f} |")
    for name, title in (("races", "Races: final parameters bitwise equal"), ("resume", "Exact resume on CUDA")):
        rows_ = read_json(os.path.join(out, f"{name}.json")) or {}
        if rows_:
            lines += ["", f"## {title}", "", "| run | result |", "|---|---|"]
            lines += [f"| {key} | {json.dumps(r)} |" for key, r in sorted(rows_.items())]
    sync = read_json(os.path.join(out, "sync_debug.json"))
    if sync:
        lines += ["", "## Host syncs of a traced ACCO run (set_sync_debug_mode), by when and where", ""]
        lines += ["| when | syncs | from |", "|---|---|---|"]
        for when, n in sync["syncs"].items():
            sources = ", ".join(f"`{src}` ({k})" for src, k in (sync.get("sources") or {}).get(when, {}).items())
            lines.append(f"| {when} | {n} | {sources} |")
    bound = read_json(os.path.join(out, "overlap_bound.json")) or {}
    if bound:
        b = bound["x1"]
        lines += [
            "",
            "## The overlap as a bound (CUDA events; world 1, the sync stretched by a sleep kernel)",
            "",
            f"{b['model']}, accum {b['accum']}: a micro-batch {b['micro_batch_alone_s'] * 1e3:.1f} ms alone, a "
            f"round's compute c = {b['round_compute_s'] * 1e3:.1f} ms, the sync {b['sync_unstretched_s'] * 1e3:.1f} ms "
            f"stretched by {b['stretch_s'] * 1e3:.1f} ms to s = {b['sync_alone_s'] * 1e3:.1f} ms; margin "
            f"{b['margin']:.0%}.",
            "",
            "| method | round ms | bound ms | sequential c + s ms | sync beside compute ms | "
            "micro-batch beside sync ms | holds |",
            "|---|---|---|---|---|---|---|",
        ]

        def ms(value) -> str:
            return "—" if value is None else f"{value * 1e3:.1f}"

        for m, r in b["methods"].items():
            failed = [k for k, v in (r.get("checks") or {}).items() if not v]
            verdict = f"{r['holds']} ({r['rule']}{'; failed: ' + ', '.join(failed) if failed else ''})"
            lines.append(
                f"| {m} | {ms(r['round_s'])} | {ms(r['bound_s'])} | {ms(r.get('sequential_s'))} | "
                f"{ms(r.get('sync_beside_compute_s'))} | {ms(r.get('micro_batch_beside_sync_s'))} | {verdict} |"
            )
    memory = [r for m, _, _ in THROUGHPUT if (r := read_json(os.path.join(out, f"memory_acco_{m}.json")))]
    rows = read_json(os.path.join(out, "throughput.json")) or []
    if rows or memory:
        lines += [
            "",
            "## Throughput and memory (one GPU, bf16 compute, fp32 gradients)",
            "",
            "| run | model | seq | micro-batch | tokens/s | MFU | max allocated GB | max reserved GB | "
            "allocator retries | estimated GB |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for r in rows:
            mfu = f"{r['mfu']:.1%}" if r.get("mfu") is not None else "—"
            lines.append(
                f"| flat ddp | {r['model']} | {r['seq_len']} | {r['micro_batch_size']} | {r['tokens_per_s']:.0f} | "
                f"{mfu} ({r['peak_from']}) | {_gb(r.get('max_allocated_gb'))} | {_gb(r.get('max_reserved_gb'))} | "
                f"{r.get('alloc_retries')} | {_gb(r['estimated_allocated_gb'])} |"
            )
        for r in memory:
            lines.append(
                f"| {r['method']} (3 steps) | {r['model']} | {r['seq_len']} | {r['micro_batch_size']} | — | — | "
                f"{_gb(r.get('max_allocated_gb'))} | {_gb(r.get('max_reserved_gb'))} | {r.get('alloc_retries')} | "
                f"{_gb(r['estimated_allocated_gb'])} |"
            )
    lines += [
        "",
        "Files: <part>.log for every part, <part>.xml (pytest), reference.json, races.json, resume.json, "
        "storage.json, sync_debug.json, overlap_bound.json, memory_acco_*.json, throughput.json / .csv.",
    ]
    return "\n".join(lines) + "\n"


def nccl_coverage(gpus: int) -> str:
    if gpus >= 2:
        return (
            "world 2 over NCCL ran (reduce_scatter_tensor, all_gather, all_reduce between 2 GPUs) in the "
            "reference, races, resume and overlap parts, besides world 1 and world 2 over gloo (races)."
        )
    return (
        "one GPU: world 1 runs NCCL, but its reduce-scatter and all-gather are copies "
        "(acco/engine/collectives.py); the races and resume parts run world 2 on the one GPU with "
        "dist.backend=gloo (CUDA compute and streams, the collectives on host copies). No NCCL "
        "collective crossed two ranks: that needs 2 GPUs."
    )


def run_plan(parts: list[Part], out: str, machine: dict, deadline: float) -> dict:
    """Each part within min(its budget, what is left), the summary rewritten after every one."""
    results: dict[str, dict] = {}
    for part in parts:
        left = deadline - time.time() - RESERVE_S
        if left < 5:
            results[part.name] = {"status": "skipped: out of time", "seconds": 0, "log": "—"}
        else:
            print(f"gpu-check: {part.name} (budget {part.budget_s} s): {part.what}", flush=True)
            results[part.name] = run_part(part, min(part.budget_s, left), os.path.join(out, f"{part.name}.log"))
            print(
                f"gpu-check: {part.name} {results[part.name]['status']} ({results[part.name]['seconds']} s)", flush=True
            )
        results[part.name].update(what=part.what, budget_s=part.budget_s)
        collect_throughput(out)
        with open(os.path.join(out, "README.md"), "w") as f:
            f.write(summary_md(out, machine, results))
    return results


def collect_throughput(out: str) -> None:
    """throughput.json / .csv from the throughput parts' rows written so far."""
    rows = [r for m, _, _ in THROUGHPUT if (r := read_json(os.path.join(out, f"throughput_{m}.json")))]
    if not rows:
        return
    with open(os.path.join(out, "throughput.json"), "w") as f:
        json.dump(rows, f, indent=1)
    keys = [k for k in rows[0] if k != "estimate"]
    with open(os.path.join(out, "throughput.csv"), "w") as f:
        f.write(",".join(keys) + "\n")
        for r in rows:
            f.write(",".join("" if r.get(k) is None else str(r[k]) for k in keys) + "\n")


# what the parts import: on an offline machine, one missing is named before anything runs
NEEDED = [
    "torch",
    "transformers",
    "tokenizers",
    "datasets",
    "hydra",
    "omegaconf",
    "submitit",
    "pytest",
    "pytest_timeout",
]


def check_imports() -> str | None:
    """None, or the error line naming what cannot be imported and the fix."""
    import importlib

    missing = []
    for name in [*NEEDED, "acco.harness.gpu_check", "acco.config.experiments", "acco.train.trainer"]:
        try:
            importlib.import_module(name)
        except ImportError as exc:
            missing.append(f"{name} ({exc})")
    if not missing:
        return None
    return (
        f"error: cannot import {'; '.join(missing)}: install the wheels `make wheels` made (README, "
        "'GPU check'): python -m pip install --no-index --no-deps --target .gpu-deps wheels/*.whl, "
        "then PYTHONPATH=.gpu-deps"
    )


def main_check(args) -> int:
    error = check_imports()
    if error:
        print(error, file=sys.stderr)
        return 2
    import torch

    if not torch.cuda.is_available():
        print(
            f"gpu-check: skipped: no CUDA GPU visible (torch {torch.__version__}, CUDA build "
            f"{torch.version.cuda}); nothing written"
        )
        return 0
    if args.budget_s is None:
        args.budget_s = float(BUDGET_S if args.plan == "main" else PAPER_BUDGET_S)
    deadline = time.time() + args.budget_s
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    props = torch.cuda.get_device_properties(0)
    machine = {
        "name": props.name,
        "memory_gb": props.total_memory / 1e9,
        "gpus": torch.cuda.device_count(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"),
    }
    os.environ["ACCO_GPU_RESULTS"] = out  # the gpu tests write what they measured here
    # one data cache for the tests (conftest reads ACCO_TEST_CACHE) and the measurements
    os.environ.setdefault("ACCO_CACHE", "/tmp/acco-gpu-check-cache")
    os.environ.setdefault("ACCO_TEST_CACHE", os.environ["ACCO_CACHE"])
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    # no CUBLAS_WORKSPACE_CONFIG here: the deterministic runs set it themselves (before their first
    # process group, acco.runtime.process_group.deterministic_cuda); the throughput runs run as production does
    # the children import acco and the tests from this checkout
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")]))
    if args.plan == "paper-shapes":  # beside the main plan's results: its own names only
        out = os.path.join(out, "paper-shapes")
        os.makedirs(out, exist_ok=True)
    for name in os.listdir(out):  # this run's numbers only
        if name.endswith((".json", ".csv", ".xml", ".log")):
            os.remove(os.path.join(out, name))
    print(f"gpu-check: {machine['gpus']} x {machine['name']} -> {out} (budget {args.budget_s:.0f} s)", flush=True)
    parts = plan(out) if args.plan == "main" else paper_shapes_plan(out)
    results = run_plan(parts, out, machine, deadline)
    if args.plan == "paper-shapes":
        collect_depths(out)
    failed = [n for n, p in results.items() if p["status"] != "passed"]
    print(
        f"gpu-check: {'all parts passed' if not failed else 'not passed: ' + ', '.join(failed)}; "
        f"see {os.path.join(out, 'README.md')}"
    )
    return 0 if not failed else 1


def emit(text: str, path: str | None) -> None:
    """An internal part's result: printed, and written to `path` (--json) where given."""
    if path:
        with open(path, "w") as f:
            f.write(text)
    print(text)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=os.path.join(ROOT, "results", "gpu"))
    parser.add_argument(
        "--budget-s", type=float, default=None, help=f"default: {BUDGET_S} (main), {PAPER_BUDGET_S} (paper-shapes)"
    )
    parser.add_argument(
        "--plan",
        choices=["main", "paper-shapes"],
        default="main",
        help="main: everything CUDA-specific; paper-shapes: memory and MFU (extrapolated in depth) at the "
        "paper's per-rank shapes",
    )
    parser.add_argument("--part", choices=["throughput", "overlap", "overlap_bound", "sync_debug", "memory"])
    parser.add_argument(
        "--method", help="--part overlap: ddp:impl=flat (or ddp_flat), dpu, wp, acco (or ddp: storage only)"
    )
    parser.add_argument("--world", type=int, default=1)
    parser.add_argument("--model")
    parser.add_argument("--seq", type=int)
    parser.add_argument("--mb", type=int)
    parser.add_argument("--micro-batches", type=int, default=10)
    parser.add_argument("--json")
    parser.add_argument("overrides", nargs="*", help="extra config overrides for --part")
    args = parser.parse_args(argv)
    if args.part == "throughput":
        from acco.harness.gpu_check import measure_throughput

        row = measure_throughput(
            [*throughput_overrides(args.model, args.seq, args.mb), *args.overrides], micro_batches=args.micro_batches
        )
        emit(json.dumps(row, indent=1), args.json)
        return 0
    if args.part == "sync_debug":
        from acco.harness.gpu_check import measure_sync_debug

        found = measure_sync_debug([*args.overrides, f"out_dir={scratch('sync')}"])
        emit(json.dumps(found, indent=1), args.json)
        return 0 if found["error"] is None else 1
    if args.part == "overlap_bound":
        from acco.harness.gpu_check import overlap_bound

        base = [o for o in overlap_overrides("acco") if not o.startswith("method")]
        found = overlap_bound([*base, f"out_dir={scratch('overlap_bound')}", *args.overrides])
        emit(json.dumps(found, indent=1), args.json)
        return 0
    if args.part == "memory":
        from acco.harness.gpu_check import measure_memory

        row = measure_memory([*throughput_overrides(args.model, args.seq, args.mb), *args.overrides])
        emit(json.dumps(row, indent=1), args.json)
        return 0
    if args.part == "overlap":
        from acco.harness.gpu_check import measure_overlap_ranks

        try:
            overrides = [*overlap_overrides(args.method, args.world), *args.overrides]
        except UnknownVariant as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        rows = measure_overlap_ranks(
            overrides,
            args.world,
            scratch(f"overlap_parts_{os.getpid()}"),
        )
        emit(json.dumps(rows), args.json)
        return 0
    return main_check(args)


if __name__ == "__main__":
    sys.exit(main())
