"""What a run will need before it is submitted (`experiments/reproduce.py <id> --dry-run`): GPUs and
nodes from its layout, each GPU's memory (acco/analytic/memory.py), and its wall-clock and
GPU-hours from the α-β cost model (acco/analytic/costmodel.py). Nothing is allocated, trained or submitted;
no GPU, Slurm, data or model weights are needed.

Per round, c = accum · 6·Ψ·(micro_batch_size · seq_len) / (peak · MFU) (× hetero.factor when one
worker is slower: every round waits for its micro-batches) and m = the sync's time on the ring's
slowest link; the run's time is costmodel.run_time (DDP c + m per step; DPU/WP/ACCO max(c, m) per
round). In adaptive mode a round's tokens grow with the sync (the ranks keep computing while it
runs), so a token / sample budget takes fewer steps. Instruction data is counted at max_len per
sample (micro-batches are padded to their longest example): an upper bound."""

from __future__ import annotations

import math
from dataclasses import replace

from . import costmodel as cm
from .memory import GB, estimate, gpu_memory_gb, hardware_name, model_shape, model_state_total, sequence_length


def shape_of(cfg: dict) -> tuple[int, int, int]:
    """(world size, nodes, GPUs per node) from `layout` (NxG), else world_size on one node."""
    if cfg.get("layout"):
        from ..config.validate import parse_layout

        nodes, per_node = parse_layout(cfg["layout"])
        return nodes * per_node, nodes, per_node
    world = int(cfg.get("world_size") or 1)
    return world, 1, world


def rounds_per_step(cfg: dict) -> int:
    """Rounds of compute per committed step: ACCO's step is an estimate and a commit round."""
    return 2 if cfg["method"]["name"] == "acco" else 1


def micro_batches_per_round(cfg: dict, world: int, c_mb: float, sync_s: float, slow: float) -> float:
    """Global micro-batches in one overlapped round. Deterministic: `accum` per rank. Adaptive
    (train.deterministic=false): a rank keeps computing while the sync runs, so it does
    max(accum, ⌈round / its micro-batch time⌉), at most accum · max_accum_factor; the round
    lasts max(accum · the slowest rank's micro-batch time, sync) (costmodel.acco_round_time)."""
    train = cfg["train"]
    accum = int(train["accum"])
    if train.get("deterministic", False):
        return float(world * accum)
    cap = accum * int(train.get("max_accum_factor") or 64)
    slow_ranks = 1 if slow > 1.0 else 0
    round_s = cm.acco_round_time(accum * c_mb * slow, sync_s)

    def per_rank(c):
        return min(cap, max(accum, math.ceil(round_s / c - 1e-9)))

    return float(slow_ranks * per_rank(c_mb * slow) + (world - slow_ranks) * per_rank(c_mb))


def committed_steps(cfg: dict, sequential_samples: float, overlapped_samples: float) -> int:
    """train.steps, or the first committed step at which the budget (train.samples / train.tokens,
    acco/train/budget.py) is reached, whichever comes first. `*_samples`: global samples per committed
    step in the sequential warmup steps (dpu, wp; every ddp step) and in the overlapped ones."""
    from ..config.schema import typed
    from ..train.budget import run_length

    packed = (cfg.get("data") or {}).get("kind") != "instruct"
    length = run_length(typed(cfg).train, sequence_length(cfg) if packed else 0)
    if length.budget is None:
        return int(length.steps)
    budget = length.budget_samples
    method = cfg["method"]["name"]
    warm = int(cfg["method"].get("warmup_steps") or 0) if method in ("dpu", "wp") else 0
    if method == "ddp":
        overlapped_samples = sequential_samples
    if warm * sequential_samples >= budget:
        by_budget = math.ceil(budget / sequential_samples)
    else:
        by_budget = warm + math.ceil((budget - warm * sequential_samples) / overlapped_samples)
    return min(length.steps, by_budget) if length.steps is not None else by_budget


def hardware(cfg: dict, per_node: int) -> cm.Hardware:
    name = hardware_name(cfg)
    if name not in cm.PRESETS:
        raise ValueError(f"unknown GPU preset {name!r} (launcher.gpu); choose one of {', '.join(cm.PRESETS)}")
    hw = cm.on_nodes_of(cm.PRESETS[name], per_node)
    mfu = (cfg.get("launcher") or {}).get("mfu")
    if mfu:
        if not 0 < float(mfu) <= 1:
            raise ValueError(f"launcher.mfu must be in (0, 1], got {mfu}; set e.g. launcher.mfu=0.3")
        hw = replace(hw, mfu=float(mfu))
    return hw


def plan(cfg: dict) -> dict:
    """One run's row: shape, memory, tokens, time."""
    world, nodes, per_node = shape_of(cfg)
    est = estimate(cfg, world)
    limit, limit_from = gpu_memory_gb(cfg)
    hw = hardware(cfg, per_node)
    shape = model_shape(cfg)
    seq, mb = sequence_length(cfg), int(cfg["data"]["micro_batch_size"])
    accum = int(cfg["train"]["accum"])
    method = cfg["method"]["name"]
    torch_ddp = method == "ddp" and cfg["method"].get("impl", "torch") == "torch"
    work = cm.Workload(shape.family, shape.params, mb * seq, 1, grad_bytes=est.layout.buffer_bytes or 4)
    hetero = cfg.get("hetero") or {}
    slow = float(hetero.get("factor") or 1.0) if hetero.get("slow_rank") is not None else 1.0
    c_mb = work.compute_s(hw)  # one micro-batch, fwd + bwd
    c = accum * c_mb * slow  # a round waits for the slowest rank's accum micro-batches
    m = cm.zero1_torch_sync_time(shape.params, world, hw) if torch_ddp else cm.sync_time(work, world, hw)
    local = (1, 1, 0)
    if method in ("diloco", "streaming_diloco"):  # the outer sync moves fp32 pseudo-gradients
        m = cm.sync_time(replace(work, grad_bytes=4), world, hw)
        local = tuple(int(cfg["method"][k]) for k in ("sync_every", "fragments", "overlap_steps"))
    seq_samples = world * accum * mb  # per sequential step (ddp; dpu/wp warmup)
    sequential = method in ("ddp", "diloco", "streaming_diloco")  # every step exactly `accum` micro-batches
    per_round = world * accum if sequential else micro_batches_per_round(cfg, world, c_mb, m, slow)
    ovl_samples = rounds_per_step(cfg) * per_round * mb
    steps = committed_steps(cfg, seq_samples, ovl_samples)
    warmup = min(steps, int(cfg["method"].get("warmup_steps") or 0)) if method in ("dpu", "wp") else 0
    samples = seq_samples * steps if method == "ddp" else warmup * seq_samples + (steps - warmup) * ovl_samples
    tokens = samples * seq
    wall = cm.run_time(method, steps, c, m, warmup, local)
    from ..run.disk import estimate as disk_estimate  # what it writes to out_dir, as the run's own check counts

    disk = disk_estimate(dict(cfg, train=dict(cfg["train"], steps=steps), _resume=None), world)
    return {
        "run": None,
        "method": method + ("" if method != "ddp" else f":{'torch' if torch_ddp else 'flat'}"),
        "gpus": world,
        "nodes": nodes,
        "gpus_per_node": per_node,
        "hardware": hw.name.split(" ")[0],
        "params": shape.params,
        "model_state_gb": model_state_total(est.model_state) / GB,
        "memory_gb": est.total_gb,
        "gpu_mem_gb": limit,
        "gpu_mem_from": limit_from,
        "fits": None if limit is None else est.total_gb <= limit,
        "steps": steps,
        "tokens": tokens,
        "compute_per_round_s": c,
        "sync_s": m,
        "wall_clock_h": wall / 3600,
        "gpu_hours": wall * world / 3600,
        "disk_gb": disk.total / GB,
        "disk": disk,
        "estimate": est,
        "hw": hw,
    }


def assumptions(rows: list[dict]) -> str:
    """The header line: what the figures assume."""
    parts = []
    for hw in {r["hw"].name: r["hw"] for r in rows}.values():
        parts.append(
            f"{hw.name}, bf16 peak {hw.peak_flops / 1e12:g} TFLOP/s, MFU {hw.mfu:.0%}, "
            f"α {hw.alpha_intra_s * 1e6:g}/{hw.alpha_inter_s * 1e6:g} µs in/between nodes"
        )
    return (
        "assumptions: " + "; ".join(parts) + "; compute 6·Ψ·tokens/(peak·MFU), sync on the ring's "
        "slowest link (flat: bf16 reduce-scatter + all-gather; torch DDP: fp32 all-reduce + broadcast); "
        "memory: model state exact, activations estimated (Korthikanti et al. 2022), +1 GB CUDA/NCCL; "
        "disk: out_dir at its fullest (checkpoints x min(planned, keep_checkpoints + 1), model, trace, metrics)"
    )


# headers and cells without spaces: a row splits on whitespace
COLUMNS = [
    ("run", "run", "{}"),
    ("method", "method", "{}"),
    ("GPUs", "gpus", "{}"),
    ("nodes", "nodes", "{}"),
    ("GPU", "hardware", "{}"),
    ("GB/GPU", "memory_gb", "{:.1f}"),
    ("GPU-GB", "gpu_mem_gb", "{:g}"),
    ("fits", "fits", "{}"),
    ("state-GB", "model_state_gb", "{:.1f}"),
    ("steps", "steps", "{}"),
    ("tokens", "tokens", "{:.3g}"),
    ("c/round-s", "compute_per_round_s", "{:.3g}"),
    ("m/sync-s", "sync_s", "{:.3g}"),
    ("hours", "wall_clock_h", "{:.2f}"),
    ("GPU-hours", "gpu_hours", "{:.1f}"),
    ("disk-GB", "disk_gb", "{:.1f}"),
]


def render(rows: list[dict]) -> str:
    """A plain-text table, one line per run."""

    def cell(row, key, fmt):
        v = row.get(key)
        if v is None:
            return "—"
        if isinstance(v, bool):
            return "yes" if v else "NO"
        return fmt.format(v).replace(" ", "_")

    table = [[h for h, _, _ in COLUMNS]] + [[cell(r, k, f) for _, k, f in COLUMNS] for r in rows]
    widths = [max(len(line[i]) for line in table) for i in range(len(COLUMNS))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip() for line in table)


def dry_run(experiments: list[str], overrides: list[str], scale: str, write=print) -> int:
    """Every run of `experiments` at `scale`: a table per experiment, a line for each run that
    would not fit (with the setting that would), nothing started or submitted."""
    import os
    import sys

    from ..config.experiments import compose, expand_runs
    from ..config.validate import ConfigError
    from .memory import fit_problem

    if scale != "paper":  # the other scales run on CPUs: GPU memory and GPU-hours mean nothing there
        print(f"error: --dry-run estimates paper-scale GPU jobs; use --scale paper (got {scale})", file=sys.stderr)
        return 2
    if not experiments:
        write("no runs of its own: computed from other experiments' results")
        return 0
    for exp in experiments:
        common = [f"experiment={exp}/{scale}", *overrides]
        try:
            runs = expand_runs(compose(common)["experiment"])
            rows, problems = [], []
            for run in runs:
                cfg = compose([*common, *run])
                row = plan(cfg)
                row["run"] = os.path.basename(os.path.normpath(cfg["out_dir"]))
                rows.append(row)
                if row["fits"] is False:
                    problems.append(fit_problem(cfg, row["gpus"]))
        except (ConfigError, ValueError) as exc:
            print(f"error: {exp}: {str(exc).splitlines()[0]}", file=sys.stderr)
            return 2
        total = sum(r["gpu_hours"] for r in rows)
        write(f"{exp} at scale={scale}: {len(rows)} runs, {total:.1f} GPU-hours in all (dry run: nothing submitted)")
        if rows:
            write(assumptions(rows))
            write(render(rows))
        for p in problems:
            write(f"does not fit: {p}")
    return 0
