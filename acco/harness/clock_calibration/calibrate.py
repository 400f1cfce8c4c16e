"""The virtual clock's costs (`clock.mode=virtual`), measured on this machine or taken from the
paper's hardware (`make calibrate-clock` writes them to results/cpu/clock/calibration.json).

**This machine.** For each wall-clock figure's CPU-scale model and link, one short run of the
sequential flat DDP (nothing overlaps in it, so a micro-batch and a sync are each measured alone)
with one rank per core (world 2 on 2 cores) on the in-process delay link (`link.mode=delay`: the
link's time is a sleep, so communication takes no compute), traced: every micro-batch's fwd+bwd,
every sync (reduce-scatter + optimizer step + all-gather), every optimizer step, and each
micro-batch's backward share (its backward's seconds over its own: the virtual clock's
clock.backward_share), read from the trace's spans with their median, interquartile range and n
(the first committed step left out: it warms up and connects gloo's pairs). The spread is over the
micro-batches and syncs of one run: it holds the machine's noise during that run, not the
run-to-run drift of a machine shared with other work.

**The paper's hardware.** For each Table 3 row, the cost model's per-round compute c and sync m
(the cost model: per-GPU FLOP/s at its assumed MFU, ring collectives over the row's
slowest link) and their ratio m/c, beside the ratio that Table 3's own DDP times imply
(`table3_implied_ratio`) and the ratios at which overlap alone would give the row's reported
reduction (`overlap_only_ratios`)."""

from __future__ import annotations

import os
import statistics
import subprocess
import time
from dataclasses import dataclass

from acco.analytic import costmodel
from acco.config.location import conf_dir
from acco.engine.trace import load_spans
from acco.harness import SOURCE_ROOT, TRAIN
from acco.runtime.summary import read_summary


# -- statistics ---------------------------------------------------------------------------------------
def spread(xs: list[float]) -> dict:
    """Median, quartiles, interquartile range and n of a sample (quartiles by linear interpolation,
    statistics.quantiles' 'inclusive' method; n < 2: no quartiles)."""
    xs = sorted(float(x) for x in xs)
    n = len(xs)
    if n == 0:
        return {"median": None, "q1": None, "q3": None, "iqr": None, "n": 0}
    med = statistics.median(xs)
    if n < 2:
        return {"median": med, "q1": None, "q3": None, "iqr": None, "n": n}
    q1, _, q3 = statistics.quantiles(xs, n=4, method="inclusive")
    return {"median": med, "q1": q1, "q3": q3, "iqr": q3 - q1, "n": n}


# -- this machine -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Point:
    """One calibration run: a figure's CPU-scale model and data at one link rate (Mbit/s, 0: none)."""

    figure: str
    rate_mbit: float
    extra: tuple[str, ...] = ()  # overrides beyond the figure's own (e.g. fig9's untied model)

    @property
    def name(self) -> str:
        return f"{self.figure}_rate{self.rate_mbit:g}"


# The wall-clock figures' CPU models at their links. fig9 has no link (its slow worker is what DDP
# waits for) and is measured on the untied model its virtual-clock runs use; beyond_diloco on each
# of its links.
POINTS: tuple[Point, ...] = (
    Point("fig7", 500),
    Point("fig8", 2000),
    Point("fig8", 45),
    Point("fig11", 2000),
    Point("fig9", 0, ("model=gptneo_tiny_untied",)),
    *(Point("beyond_diloco", r) for r in (0, 400, 100, 25, 6)),
)


def point_overrides(point: Point, out_dir: str, steps: int) -> list[str]:
    """The train command's overrides of a calibration run: the figure's DDP (flat: our sequential ZeRO-1) with
    its own accumulation, 2 ranks, the delay link, traced, no evaluations."""
    return [
        f"experiment={point.figure}/cpu",
        "method=ddp",
        "method.impl=flat",
        *point.extra,
        "world_size=2",
        "layout=null",
        "link.mode=delay",
        f"link.rate_mbit={point.rate_mbit:g}",
        f"train.steps={steps}",
        "train.samples=null",
        "train.tokens=null",
        "train.eval_every=0",
        "train.save_model=false",
        "train.deterministic=true",
        "train.trace=true",
        "train.trace_steps=null",
        "train.log_every=0",
        "hetero.slow_rank=null",
        "final_eval.lambada=false",
        "final_eval.heldout=false",
        f"out_dir={out_dir}",
        "overwrite=true",
    ]


def span_seconds(trace_path: str, skip_first_step: bool = True) -> dict[str, list[float]]:
    """Seconds of every micro-batch (fwd+bwd), sync, optimizer step and collective in a trace, all
    ranks together (the first committed step left out unless it is all there is)."""
    spans = load_spans(trace_path)
    later = [e for e in spans if e.get("args", {}).get("step", 1) > 1] if skip_first_step else spans
    later = later or spans
    out: dict[str, list[float]] = {
        "micro_batch": [],
        "sync": [],
        "optimizer_step": [],
        "reduce_scatter": [],
        "all_gather": [],
        "backward_share": [],
    }
    for e in later:
        s = e["dur"] / 1e6
        if e.get("cat") == "compute":
            out["micro_batch"].append(s)
            fwd = e.get("args", {}).get("fwd_s")
            if fwd is not None and s > 0:  # the backward's share of this micro-batch
                out["backward_share"].append(max(0.0, s - float(fwd)) / s)
        elif e.get("cat") == "communication":
            name = e["name"]
            if name.startswith("sync"):
                out["sync"].append(s)
            elif name.startswith("adamw"):
                out["optimizer_step"].append(s)
            elif name in ("reduce_scatter", "all_gather"):
                out[name].append(s)
    return out


def _accum(figure: str, method: str, extra: tuple[str, ...]) -> int:
    from acco.config.experiments import compose

    return int(compose([f"experiment={figure}/cpu", f"method={method}", *extra])["train"]["accum"])


def measure_point(point: Point, runs_dir: str, steps: int, timeout_s: float = 900) -> dict:
    """Run one calibration point (the train command in a subprocess) and read its spans."""
    out_dir = os.path.join(runs_dir, point.name)
    args = point_overrides(point, out_dir, steps)
    start = time.perf_counter()
    proc = subprocess.run([*TRAIN, *args], cwd=SOURCE_ROOT, capture_output=True, text=True, timeout=timeout_s)
    if proc.returncode != 0:
        tail = " | ".join(proc.stderr.strip().splitlines()[-3:])
        raise RuntimeError(f"calibration run {point.name} failed (exit {proc.returncode}): {tail}")
    return dict(read_point(point, out_dir, steps), process_wall_s=round(time.perf_counter() - start, 1))


def read_point(point: Point, out_dir: str, steps: int) -> dict:
    """A calibration point from its finished run's folder."""
    args = point_overrides(point, out_dir, steps)
    summary = read_summary(out_dir)
    if summary is None:
        raise RuntimeError(f"{out_dir}: the calibration run left no summary.json")
    secs = span_seconds(os.path.join(out_dir, "trace.json"))
    acco_accum = _accum(point.figure, "acco", point.extra)
    mb, sync = spread(secs["micro_batch"]), spread(secs["sync"])
    return {
        "figure": point.figure,
        "rate_mbit": point.rate_mbit,
        "overrides": args[:-2],  # without out_dir / overwrite: what to run again
        "link": summary.link,
        "world": summary.world_size,
        "ddp_accum": int(summary.accum or 0),
        "acco_accum": acco_accum,
        "steps": steps,
        "micro_batch_s": mb,
        "sync_s": sync,
        "optimizer_step_s": spread(secs["optimizer_step"]),
        "reduce_scatter_s": spread(secs["reduce_scatter"]),
        "all_gather_s": spread(secs["all_gather"]),
        # the backward's share of a micro-batch (the virtual clock's clock.backward_share: where a
        # DDP step's bucket reductions can start in the overlap model)
        "backward_share": spread(secs["backward_share"]),
        # the ratio the virtual clock would give this figure with these costs: a sync over ACCO's
        # compute per round (its micro-batches per round x one micro-batch)
        "comm_over_compute": (
            sync["median"] / (acco_accum * mb["median"]) if mb["median"] and sync["median"] is not None else None
        ),
    }


def machine_load() -> dict:
    """What else the machine was doing: the load averages and the cores (the numbers' context)."""
    try:
        one, five, fifteen = os.getloadavg()
    except OSError:
        one = five = fifteen = float("nan")
    return {"loadavg_1_5_15": [round(one, 2), round(five, 2), round(fifteen, 2)], "cpus": os.cpu_count()}


# -- the paper's hardware -------------------------------------------------------------------------------
def table3_implied_ratio(ddp_s: float, ref_ddp_s: float, ref_ratio: float, compute_scale: float = 1.0) -> float:
    """The comm/compute ratio per ACCO round of a Table 3 row implied by its DDP time against a
    reference row's, assuming the per-GPU compute of the row is `compute_scale` x the reference's
    (1: equal per-GPU compute: the same model, GPUs and samples per GPU, only the layout differs).

    DDP accumulates twice ACCO's micro-batches per step, so with c = ACCO's compute per round and
    m = a sync, a DDP step costs 2c + m = c (2 + r). Then t / t_ref = k c_ref (2 + r) / (c_ref (2 +
    r_ref)), so r = (2 + r_ref) (t / t_ref) / k − 2. Negative: the assumption cannot hold."""
    return (2.0 + ref_ratio) * (ddp_s / ref_ddp_s) / compute_scale - 2.0


def overlap_only_ratios(reduction: float) -> list[float]:
    """The ratios r = m/c at which overlap alone (deterministic ACCO, a micro-batches per round,
    against DDP with 2a per step: 2 max(c, m) against 2c + m) cuts the wall-clock by `reduction`
    (a fraction). 1 − 2 max(1, r)/(2 + r) rises as r/(2 + r) up to 1/3 at r = 1 and falls back as
    (2 − r)/(2 + r): two solutions below the cap of 1/3, none above it."""
    if reduction > 1.0 / 3.0 or reduction < 0:
        return []
    low = 2 * reduction / (1 - reduction)  # r <= 1
    high = 2 * (1 - reduction) / (1 + reduction)  # r >= 1
    return sorted({round(low, 6), round(high, 6)})


OVERLAP_CAP_PAPER_PAIRING = 1.0 / 3.0  # DDP 2a per step vs ACCO a per round: at m = c
OVERLAP_CAP_EQUAL_WORK = 0.5  # c + m vs max(c, m), each sync after the same work: at m = c


def _paper_tokens(figure: str) -> float | None:
    import yaml

    with open(os.path.join(conf_dir(), "experiment_info", f"{figure}.yaml")) as f:
        tokens = (yaml.safe_load(f).get("paper") or {}).get("tokens")
    return float(tokens) if tokens is not None else None  # YAML 1.1 reads 50.0e9 as a string


def paper_presets() -> list[dict]:
    """Per Table 3 row: the cost model's costs for the virtual clock (a micro-batch, a sync, the
    per-GPU FLOP/s and the link's bandwidth it assumed) and its ratio, the Table-3-implied ratio
    and the overlap-only ratios.

    Implied ratios: the 2x4 fine-tuning row against the 1x8 one (the same model, GPUs and samples:
    equal per-GPU compute), the 1x8 row's own ratio taken as the cost model's (and as 0, its lower
    bound); the 4x8 A100 pretraining row against the 1x8 H100 one with the per-GPU compute scaled
    by the tokens per GPU and by the GPUs' peak FLOP/s (equal MFU on both). The 1x8 rows are the
    references: no implied ratio of their own."""
    rows = costmodel.table3_rows()
    by_name = {r["row"]: r for r in rows}
    ratio = {r["row"]: r["sync_s"] / r["compute_per_round_s"] for r in rows}
    tokens = {"fig7": _paper_tokens("fig7"), "fig11": _paper_tokens("fig11")}
    out = []
    for r in rows:
        entry = {
            "row": r["row"],
            "workers": r["workers"],
            "hardware": r["hardware"],
            "per_gpu_flops": r["peak_flops"] * r["mfu"],
            "peak_flops": r["peak_flops"],
            "mfu_assumed": r["mfu"],
            "link_bytes_per_s": r["link_bytes_per_s"],
            "accum_acco": r["accum"],
            "micro_batch_s": r["compute_per_round_s"] / r["accum"],
            "compute_per_round_s": r["compute_per_round_s"],
            "sync_s": r["sync_s"],
            "costmodel_ratio": ratio[r["row"]],
            "costmodel_reduction_pct": r["predicted_reduction_pct"],
            "paper_ddp_s": r["paper_ddp_s"],
            "paper_acco_s": r["paper_acco_s"],
            "paper_reduction_pct": r["paper_reduction_pct"],
            "overlap_only_ratios": overlap_only_ratios(r["paper_reduction_pct"] / 100),
            "implied_ratio": None,
            "implied_ratio_ref0": None,
            "implied_assumption": "reference row (its ratio assumed: the cost model's)",
        }
        out.append(entry)
    ft1, ft2 = by_name.get("2.7B fine-tuning, 1x8"), by_name.get("2.7B fine-tuning, 2x4")
    if ft1 and ft2:
        e = out[rows.index(ft2)]
        e["implied_ratio"] = table3_implied_ratio(ft2["paper_ddp_s"], ft1["paper_ddp_s"], ratio[ft1["row"]])
        e["implied_ratio_ref0"] = table3_implied_ratio(ft2["paper_ddp_s"], ft1["paper_ddp_s"], 0.0)
        e["implied_assumption"] = (
            "equal per-GPU compute as the 1x8 fine-tuning (the same model, GPUs and samples); "
            "the 1x8 row's own ratio taken as the cost model's, or as 0 (the value in brackets)"
        )
    pt1, pt4 = by_name.get("125M pretraining, 1x8 H100"), by_name.get("125M pretraining, 4x8 A100")
    if pt1 and pt4 and tokens["fig7"] and tokens["fig11"]:
        per_gpu = (tokens["fig7"] / pt4["workers"]) / (tokens["fig11"] / pt1["workers"])
        k = per_gpu * pt1["peak_flops"] / pt4["peak_flops"]
        e = out[rows.index(pt4)]
        e["implied_ratio"] = table3_implied_ratio(pt4["paper_ddp_s"], pt1["paper_ddp_s"], ratio[pt1["row"]], k)
        e["implied_ratio_ref0"] = table3_implied_ratio(pt4["paper_ddp_s"], pt1["paper_ddp_s"], 0.0, k)
        e["implied_assumption"] = (
            f"per-GPU compute {k:.2f}x the 1x8 H100 row's ({per_gpu:.2f}x its tokens per GPU, on a GPU "
            f"with 1/{pt1['peak_flops'] / pt4['peak_flops']:.2f} of the reference's peak FLOP/s, equal MFU); negative: "
            f"that assumption cannot hold (the two runs did not reach the same MFU), so Table 3 implies no ratio here"
        )
    return out


# -- the whole calibration ------------------------------------------------------------------------------
def calibrate(points: tuple[Point, ...], runs_dir: str, steps: int, log=print, previous: dict | None = None) -> dict:
    """Measure every point, then the paper presets; the machine's load before and after.
    `previous`: an earlier calibration whose other points are kept (measured again: replaced)."""
    load_before = machine_load()
    wanted = {(p.figure, float(p.rate_mbit)) for p in points}
    measured = [q for q in (previous or {}).get("points") or [] if (q["figure"], float(q["rate_mbit"])) not in wanted]
    for q in measured:
        q.setdefault("machine", (previous or {}).get("machine"))
    for p in points:
        row = measure_point(p, runs_dir, steps)
        row["loadavg_after"] = machine_load()["loadavg_1_5_15"]
        mb, sync = row["micro_batch_s"], row["sync_s"]
        log(
            f"calibrate: {p.name:<22} micro-batch {mb['median'] * 1e3:7.1f} ms (IQR {mb['iqr'] * 1e3:.1f}, n {mb['n']})"
            f"  sync {sync['median'] * 1e3:8.1f} ms (IQR {sync['iqr'] * 1e3:.1f}, n {sync['n']})"
            f"  ratio {row['comm_over_compute']:.3f}"
            + (f"  backward share {row['backward_share']['median']:.3f}" if row["backward_share"]["n"] else "")
        )
        measured.append(row)
    return {
        "what": (
            "this machine's primitives for the virtual clock: per point, one run of the sequential flat DDP, "
            "2 ranks (one per core), delay link (communication takes no compute), traced; spreads over one "
            "run's micro-batches and syncs (first step left out)"
        ),
        "machine": {"before": load_before, "after": machine_load()},
        "load_note": (
            "measured on a 2-core machine: the load averages before and after are beside the numbers (the "
            "calibration's own two ranks make about 2; anything above is other work on the machine, and a "
            "busier machine makes every primitive slower, not only one)"
        ),
        "points": measured,
        "paper_presets": paper_presets(),
        "overlap_cap": {"paper_pairing": OVERLAP_CAP_PAPER_PAIRING, "equal_work_per_sync": OVERLAP_CAP_EQUAL_WORK},
    }


def point_of(calibration: dict, figure: str, rate_mbit: float) -> dict | None:
    """The measured point of a figure at a link rate, from a calibration.json's content."""
    for p in calibration.get("points") or []:
        if p["figure"] == figure and float(p["rate_mbit"]) == float(rate_mbit):
            return p
    return None
