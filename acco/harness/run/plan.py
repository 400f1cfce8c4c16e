"""What a run will need before it is submitted (`experiments/reproduce.py <id> --dry-run`): GPUs and
nodes from its layout, each GPU's memory (the memory model), and its wall-clock and
GPU-hours from the α-β cost model. Nothing is allocated, trained or submitted;
no GPU, Slurm, data or model weights are needed.

Per round, c = accum · 6·Ψ·(micro_batch_size · seq_len) / (peak · MFU) (× hetero.factor when one
worker is slower: every round waits for its micro-batches) and m = the sync's time on the ring's
slowest link; the run's time is costmodel.run_time (DDP c + m per step; DPU/WP/ACCO max(c, m) per
round). In adaptive mode a round's tokens grow with the sync (the ranks keep computing while it
runs), so a token / sample budget takes fewer steps. Instruction data is counted at max_len per
sample (micro-batches are padded to their longest example): an upper bound."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, replace

from ...analytic import costmodel as cm
from ...config.schema import RunView, changed
from ...methods import TORCH_DDP
from ...methods import get as get_method
from ...train.host_memory import HOST_BASELINE_BYTES
from ...train.memory import (
    GB,
    CheckpointSize,
    checkpoint_size,
    estimate,
    gpu_memory_gb,
    hardware_name,
    model_shape,
    model_state_total,
    sequence_length,
)

# -- checkpoint saves against the job's signal and time limit -----------------------------------------
DEFAULT_SIGNAL_DELAY_S = 90  # below the paper scale, and where no estimate can be made
# one rank streams its part of a checkpoint (GPU -> host one piece at a time, SHA-256, write) on one
# core, and reads it back alike: an assumed rate (one CPU core here, no GPU: 3.6 GB in 7.4 s,
# results/bench/checkpoint.json); every rank at once, bounded by the filesystem's bandwidth
RANK_STREAM_GB_S = 0.5
DEFAULT_CHECKPOINT_WRITE_GB_S = 1.0  # launcher.checkpoint_write_gb_s when a profile has none
# the signal comes any time in a step: the ranks finish it, save, exit and the job is requeued before
# the time limit; the estimate's margin, and the time to exit and requeue
SIGNAL_MARGIN = 1.5
SIGNAL_EXIT_S = 30


@dataclass(frozen=True)
class CheckpointPlan:
    size: CheckpointSize
    write_gb_s: float  # the job's filesystem bandwidth assumed (launcher.checkpoint_write_gb_s)
    step_s: float  # one committed step, estimated: how long a signal may wait for a step boundary
    save_s: float  # one save, estimated: the slower of one rank's stream and the filesystem's bandwidth
    resume_s: float  # one resume's read, estimated alike (each rank reads its own part once)
    timeout_s: float  # dist.checkpoint_timeout_s: what the save's cross-rank waits are bounded by
    signal_delay_s: int  # the delay that leaves room for a step and the save (sized_signal_delay)


def sized_signal_delay(step_s: float, save_s: float) -> int:
    """Seconds before the time limit at which the job should be signalled: finish the current step,
    save, exit, with a margin; whole tens of seconds, at least DEFAULT_SIGNAL_DELAY_S."""
    need = SIGNAL_MARGIN * (step_s + save_s) + SIGNAL_EXIT_S
    return max(DEFAULT_SIGNAL_DELAY_S, int(math.ceil(need / 10.0)) * 10)


def _with_profile(cfg: RunView, profile: dict | None) -> RunView:
    return cfg if profile is None else changed(cfg, {f"launcher.{k}": v for k, v in profile.items()})


def checkpoint_plan(cfg: RunView, profile: dict | None = None, row: dict | None = None) -> CheckpointPlan | None:
    """The run's checkpoint save, estimated (None: the model's size is not known). `row`: its
    plan(cfg) when already made."""
    cfg = _with_profile(cfg, profile)
    world = shape_of(cfg)[0]
    size = checkpoint_size(cfg, world)
    if size is None:
        return None
    row = plan(cfg) if row is None else row
    speed = float((cfg.get("launcher") or {}).get("checkpoint_write_gb_s") or DEFAULT_CHECKPOINT_WRITE_GB_S)
    save_s = max(size.largest_rank_bytes / (RANK_STREAM_GB_S * GB), size.total_bytes / (speed * GB))
    step_s = row["wall_clock_h"] * 3600 / max(1, row["steps"])
    timeout = float(((cfg.get("dist") or {}).get("checkpoint_timeout_s")) or 0)
    return CheckpointPlan(size, speed, step_s, save_s, save_s, timeout, sized_signal_delay(step_s, save_s))


def signal_delay(cfg: RunView, profile: dict | None = None) -> int:
    """The job's signal delay (sbatch --signal, submitit's signal_delay_s): launcher.signal_delay_s
    when set; null: sized from the estimated checkpoint save at the paper scale, else 90."""
    prof = (cfg.get("launcher") or {}) if profile is None else profile
    if prof.get("signal_delay_s"):
        return int(prof["signal_delay_s"])
    if cfg.get("scale") != "paper":
        return DEFAULT_SIGNAL_DELAY_S
    try:
        ckpt = checkpoint_plan(cfg, profile)
    except (KeyError, ValueError, TypeError):  # no estimate for this config: the default
        return DEFAULT_SIGNAL_DELAY_S
    return DEFAULT_SIGNAL_DELAY_S if ckpt is None else ckpt.signal_delay_s


def time_limit_warnings(cfg: RunView, row: dict | None = None) -> list[str]:
    """`warning: ...` lines for a run submitted to Slurm at the paper scale (none otherwise): its
    estimated hours exceed launcher.time_min x (launcher.max_requeues + 1); a set signal delay too
    short for the estimated step and checkpoint save; a save longer than dist.checkpoint_timeout_s.
    For the submit command and the dry run, before anything is queued. `row`: plan(cfg) if made."""
    launcher = cfg.get("launcher") or {}
    if launcher.get("name") != "slurm" or cfg.get("scale") != "paper" or not launcher.get("time_min"):
        return []
    row = plan(cfg) if row is None else row
    name = os.path.basename(os.path.normpath(str(cfg.get("out_dir") or ""))) or cfg["method"]["name"]
    exp = (cfg.get("experiment") or {}).get("id")
    who = f"{exp} run {name}" if exp else f"run {name}"
    out = []
    minutes, requeues = int(launcher["time_min"]), int(launcher.get("max_requeues") or 0)
    hours, limit_h = float(row["wall_clock_h"]), minutes * (requeues + 1) / 60
    if hours > limit_h:
        need_requeues = math.ceil(hours * 60 / minutes) - 1
        need_minutes = math.ceil(hours * 60 / (requeues + 1))
        out.append(
            f"warning: {who}: estimated {hours:.1f} h exceeds launcher.time_min={minutes} x "
            f"(launcher.max_requeues={requeues} + 1) = {limit_h:.1f} h; it would stop unfinished: set "
            f"launcher.max_requeues={need_requeues} or launcher.time_min={need_minutes}"
        )
    ckpt = checkpoint_plan(cfg, row=row)
    if ckpt is None:
        return out
    delay = launcher.get("signal_delay_s")
    if delay and int(delay) < ckpt.signal_delay_s:
        out.append(
            f"warning: {who}: launcher.signal_delay_s={delay} leaves too little time for a step "
            f"(~{ckpt.step_s:.0f} s) and the checkpoint save (~{ckpt.save_s:.0f} s for "
            f"{ckpt.size.total_bytes / GB:.0f} GB) before the time limit: set launcher.signal_delay_s="
            f"{ckpt.signal_delay_s} (or null: sized)"
        )
    if ckpt.timeout_s and ckpt.save_s > ckpt.timeout_s:
        out.append(
            f"warning: {who}: the checkpoint save (~{ckpt.save_s:.0f} s) exceeds dist.checkpoint_timeout_s="
            f"{ckpt.timeout_s:g}: set dist.checkpoint_timeout_s={math.ceil(2 * ckpt.save_s)}"
        )
    return out


def shape_of(cfg: RunView) -> tuple[int, int, int]:
    """(world size, nodes, GPUs per node) from `layout` (NxG), else world_size on one node."""
    if cfg.get("layout"):
        from ...config.validate import parse_layout

        nodes, per_node = parse_layout(cfg["layout"])
        return nodes * per_node, nodes, per_node
    world = int(cfg.get("world_size") or 1)
    return world, 1, world


def rounds_per_step(cfg: RunView) -> int:
    """Rounds of compute per committed step: ACCO's step is an estimate and a commit round."""
    return get_method(cfg["method"]["name"]).rounds_per_step


def micro_batches_per_round(cfg: RunView, world: int, c_mb: float, sync_s: float, slow: float) -> float:
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


def committed_steps(cfg: RunView, sequential_samples: float, overlapped_samples: float) -> int:
    """train.steps, or the first committed step at which the budget (train.samples / train.tokens,
    acco/train/budget.py) is reached, whichever comes first. `*_samples`: global samples per committed
    step in the sequential warmup steps (dpu, wp; every ddp step) and in the overlapped ones."""
    from ...train.budget import run_length

    packed = (cfg.get("data") or {}).get("kind") != "instruct"
    length = run_length(cfg["train"], sequence_length(cfg) if packed else 0)
    if length.budget is None:
        assert length.steps is not None  # no budget: train.steps (validated)
        return int(length.steps)
    budget = length.budget_samples
    assert budget is not None  # a budget is counted in samples too
    spec = get_method(cfg["method"]["name"])
    warm = int(cfg["method"].get("warmup_steps") or 0) if "warmup_steps" in spec.settings else 0
    if not spec.overlapped:  # every step sequential (ddp; the local methods' are alike anyway)
        overlapped_samples = sequential_samples
    if warm * sequential_samples >= budget:
        by_budget = math.ceil(budget / sequential_samples)
    else:
        by_budget = warm + math.ceil((budget - warm * sequential_samples) / overlapped_samples)
    return min(length.steps, by_budget) if length.steps is not None else by_budget


def hardware(cfg: RunView, per_node: int) -> cm.Hardware:
    name = hardware_name(cfg)
    if name not in cm.PRESETS:
        raise ValueError(f"unknown GPU preset {name!r} (launcher.gpu); choose one of {', '.join(cm.PRESETS)}")
    hw = cm.on_nodes_of(cm.PRESETS[name], per_node)
    inter = (cfg.get("launcher") or {}).get("inter_gbps")
    if inter is not None:  # nccl-tests' bus bandwidth: the α-β model's β between nodes is 1/busbw
        if not float(inter) > 0:
            raise ValueError(
                f"launcher.inter_gbps must be above 0 Gbit/s, got {inter}; set e.g. launcher.inter_gbps=50"
            )
        hw = replace(
            hw,
            name=f"{hw.name.split(' (')[0]} ({float(inter):g} Gbit/s between nodes)",
            inter_bytes_per_s=float(inter) * 1e9 / 8,
        )
    mfu = (cfg.get("launcher") or {}).get("mfu")
    if mfu:
        if not 0 < float(mfu) <= 1:
            raise ValueError(f"launcher.mfu must be in (0, 1], got {mfu}; set e.g. launcher.mfu=0.3")
        hw = replace(hw, mfu=float(mfu))
    return hw


def plan(cfg: RunView) -> dict:
    """One run's row: shape, memory, tokens, time."""
    world, nodes, per_node = shape_of(cfg)
    est = estimate(cfg, world)
    limit, limit_from = gpu_memory_gb(cfg)
    hw = hardware(cfg, per_node)
    shape = model_shape(cfg)
    seq, mb = sequence_length(cfg), int(cfg["data"]["micro_batch_size"])
    accum = int(cfg["train"]["accum"])
    method = cfg["method"]["name"]
    spec = get_method(method)
    backend = spec.backend_for(cfg["method"])
    torch_ddp = backend == TORCH_DDP
    work = cm.Workload(
        shape.family,
        shape.params,
        mb * seq,
        1,
        grad_bytes=est.layout.buffer_bytes or 4,
        gather_bytes=est.layout.param_bytes,
    )
    hetero = cfg.get("hetero") or {}
    slow = float(hetero.get("factor") or 1.0) if hetero.get("slow_rank") is not None else 1.0
    c_mb = work.compute_s(hw)  # one micro-batch, fwd + bwd
    c = accum * c_mb * slow  # a round waits for the slowest rank's accum micro-batches
    m = cm.zero1_torch_sync_time(shape.params, world, hw) if torch_ddp else cm.sync_time(work, world, hw)
    local = (1, 1, 0)
    if spec.local:  # the outer sync moves fp32 pseudo-gradients
        m = cm.sync_time(replace(work, grad_bytes=4), world, hw)
        spec = cfg["method"]
        local = (int(spec["sync_every"]), int(spec["fragments"]), int(spec["overlap_steps"]))
    seq_samples = world * accum * mb  # per sequential step (ddp; dpu/wp warmup)
    sequential = not spec.overlapped  # every step exactly `accum` micro-batches
    per_round = world * accum if sequential else micro_batches_per_round(cfg, world, c_mb, m, slow)
    ovl_samples = rounds_per_step(cfg) * per_round * mb
    steps = committed_steps(cfg, seq_samples, ovl_samples)
    warmup = min(steps, int(cfg["method"].get("warmup_steps") or 0)) if "warmup_steps" in spec.settings else 0
    samples = warmup * seq_samples + (steps - warmup) * ovl_samples
    tokens = samples * seq
    wall = cm.run_time(method, steps, c, m, warmup, local)
    from .disk import estimate as disk_estimate  # what it writes to out_dir, as the run's own check counts

    disk = disk_estimate(changed(cfg, {"train.steps": steps, "_resume": None}), world)
    return {
        "run": None,
        "method": method + (f":{'torch' if torch_ddp else 'flat'}" if spec.impls else ""),
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


# -- the step timeout against the run's longest healthy wait ------------------------------------------
STEP_TIMEOUT_FLOOR_S = 30.0  # CPU runs, and runs whose waits are shorter
STEP_TIMEOUT_FACTOR = 3.0  # a sized timeout: this many times the longest healthy wait, in whole tens of s
STEP_TIMEOUT_MIN_FACTOR = 1.5  # an explicit one shorter than this many times it is refused


def healthy_wait_s(row: dict) -> float:
    """The longest a rank of a healthy run waits inside a training collective, estimated: the sync
    itself, plus a round of the slowest rank's compute (a peer a round behind: the heterogeneous
    worker's, or the skew of adaptive rounds)."""
    return row["sync_s"] + row["compute_per_round_s"]


def sized_step_timeout(wait_s: float) -> float:
    return max(STEP_TIMEOUT_FLOOR_S, 10.0 * math.ceil(STEP_TIMEOUT_FACTOR * wait_s / 10.0))


def step_timeout(cfg: RunView, row: dict | None = None) -> tuple[float, float | None, str | None]:
    """(the dist.step_timeout_s the run gets, the longest healthy wait estimated or None, a problem
    line or None). null is sized from the estimate at the paper scale (else the floor); a number
    shorter than STEP_TIMEOUT_MIN_FACTOR x the estimate is a problem: a healthy run would be
    declared dead (fig8 on 2x4 at the ~6-10 Gbit/s between nodes the paper's Table 3 implies
    has syncs of tens of seconds)."""
    configured = (cfg.get("dist") or {}).get("step_timeout_s")
    wait = None
    if cfg.get("experiment") and cfg.get("scale") == "paper":
        try:
            row = row or plan(cfg)
            wait = healthy_wait_s(row)
        except (ValueError, KeyError):  # no estimate (an unknown preset, a config without a shape)
            wait = None
    if configured is None:
        return (STEP_TIMEOUT_FLOOR_S if wait is None else sized_step_timeout(wait)), wait, None
    configured = float(configured)
    if wait is not None and row is not None and configured < STEP_TIMEOUT_MIN_FACTOR * wait:
        link = (cfg.get("launcher") or {}).get("inter_gbps")
        bandwidth = (
            f"launcher.inter_gbps={link:g}" if link else "the preset's bandwidth (launcher.inter_gbps: your cluster's)"
        )
        return (
            configured,
            wait,
            f"dist.step_timeout_s={configured:g} s would declare a healthy run dead: its ranks wait up to "
            f"~{wait:.0f} s in a collective (a {row['sync_s']:.1f} s sync at {bandwidth} + a round's "
            f"compute, {row['compute_per_round_s']:.1f} s); set dist.step_timeout_s={sized_step_timeout(wait):g} "
            f"or null (sized)",
        )
    return configured, wait, None


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
        "slowest link (flat: reduce-scatter + all-gather in the communication buffer's dtype, "
        "train.grad_dtype; torch DDP: fp32 all-reduce + broadcast); "
        "memory: model state exact, activations estimated (Korthikanti et al. 2022), +1 GB CUDA/NCCL; "
        "disk: out_dir at its fullest (checkpoints x min(planned, keep_checkpoints + 1), model, trace, metrics); "
        f"checkpoint save and resume: each rank its own part at {RANK_STREAM_GB_S:g} GB/s (one core: "
        f"GPU -> host, SHA-256, disk), all of them within launcher.checkpoint_write_gb_s; host memory per node: "
        f"the largest phase (model built in fp32 on the host, save, resume, rank 0's final files) + "
        f"{HOST_BASELINE_BYTES / GB:g} GB per rank (assumed); signal: {SIGNAL_MARGIN:g} x (a step + the save) + "
        f"{SIGNAL_EXIT_S} s, at least {DEFAULT_SIGNAL_DELAY_S} s, unless launcher.signal_delay_s is set"
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
    ("host-GB/node", "host_gb_node", "{:.0f}"),
    ("ckpt-GB", "checkpoint_gb", "{:.1f}"),
    ("save-s", "checkpoint_save_s", "{:.0f}"),
    ("resume-s", "checkpoint_resume_s", "{:.0f}"),
    ("signal-s", "signal_delay_s", "{}"),
    ("wait-s", "wait_s", "{:.3g}"),
    ("timeout-s", "step_timeout_s", "{:g}"),
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

    from ...config.experiments import CONF_DIR, compose, expand_runs
    from ...config.schema import typed
    from ...config.validate import ConfigError, check_overrides
    from ...train.host_memory import host_fit_problem, host_memory
    from ...train.memory import fit_problem

    if scale != "paper":  # the other scales run on CPUs: GPU memory and GPU-hours mean nothing there
        print(f"error: --dry-run estimates paper-scale GPU jobs; use --scale paper (got {scale})", file=sys.stderr)
        return 2
    try:  # an unknown key (launcher.foo=1) or option: one line, before Hydra's many
        check_overrides(overrides, CONF_DIR)
    except ConfigError as exc:
        print(f"error: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 2
    if not experiments:
        write("no runs of its own: computed from other experiments' results")
        return 0
    for exp in experiments:
        common = [f"experiment={exp}/{scale}", *overrides]
        try:
            runs = expand_runs(compose(common)["experiment"])
            rows, problems, warnings, timeouts_refused = [], [], [], []
            for run in runs:
                cfg = typed(compose([*common, *run], in_experiment=True))
                row = plan(cfg)
                row["run"] = os.path.basename(os.path.normpath(cfg["out_dir"]))
                ckpt = checkpoint_plan(cfg, row=row)
                host = host_memory(cfg, row["gpus"], shape_of(cfg)[2])
                row["host_gb_node"] = host.peak_gb
                if host_fit_problem(cfg, row["gpus"], shape_of(cfg)[2]):
                    problems.append(host_fit_problem(cfg, row["gpus"], shape_of(cfg)[2]))
                if ckpt is not None:
                    row["checkpoint_gb"] = ckpt.size.total_bytes / GB
                    row["checkpoint_save_s"] = ckpt.save_s
                    row["checkpoint_resume_s"] = ckpt.resume_s
                    row["signal_delay_s"] = (cfg.get("launcher") or {}).get("signal_delay_s") or ckpt.signal_delay_s
                    row["checkpoint_timeout_s"] = ckpt.timeout_s
                row["step_timeout_s"], row["wait_s"], refused = step_timeout(cfg, row)
                if refused:
                    timeouts_refused.append(f"{row['run']}: {refused}")
                rows.append(row)
                if row["fits"] is False:
                    problems.append(fit_problem(cfg, row["gpus"]))
                warnings += time_limit_warnings(cfg, row)
        except (ConfigError, ValueError) as exc:
            print(f"error: {exp}: {str(exc).splitlines()[0]}", file=sys.stderr)
            return 2
        total = sum(r["gpu_hours"] for r in rows)
        write(f"{exp} at scale={scale}: {len(rows)} runs, {total:.1f} GPU-hours in all (dry run: nothing submitted)")
        if rows:
            write(assumptions(rows))
            write(render(rows))
            timeouts = sorted({r["checkpoint_timeout_s"] for r in rows if r.get("checkpoint_timeout_s")})
            if timeouts:
                write(
                    "checkpoint saves: their cross-rank waits are bounded by dist.checkpoint_timeout_s="
                    + "/".join(f"{t:g}" for t in timeouts)
                    + " s; the job is signalled signal-s before its time limit to finish a step and save"
                )
        if rows:
            write(
                f"step timeout: dist.step_timeout_s against wait-s, the longest a healthy rank waits in a "
                f"collective (its sync + a round's compute): null is sized to {STEP_TIMEOUT_FACTOR:g}x it "
                f"(at least {STEP_TIMEOUT_FLOOR_S:g} s); a number under {STEP_TIMEOUT_MIN_FACTOR:g}x it is refused "
                f"at submission"
            )
        for refusal in timeouts_refused:
            write(f"refused at submission: {refusal}")
        for p in problems:
            write(f"does not fit: {p}")
        for w in warnings:
            write(w)
    return 0
