"""The virtual clock validated against real runs where the testbed is faithful (issue 31, part 3):
communication that takes no compute (the delay link: a collective's time is a sleep), one rank per
core (world 2 on 2 cores), the sequential flat DDP (`ddp:impl=flat`, and with its backward overlapped,
`ddp:impl=flat:overlap_backward=true`), deterministic ACCO and adaptive ACCO (`acco:deterministic=false`),
at a few comm/compute ratios (links of the calibration).

For each (method, link) and repetition k, interleaved: a real run, then the same run on the
virtual clock with the costs measured in that real run's own trace (its median micro-batch, sync
and optimizer step: the schedule's arithmetic alone under test), then the next repetition. One
more virtual run per (method, link) with the calibration's costs (what the claims' runs use; its
times are exact, so one run is every repetition's). The error of a step's time, (virtual − real)
/ real, is paired by repetition (the analysis's paired_gap: mean and 95 % Student-t interval).

A step's time is measured as experiments' benchmark does (steady_rate:
between the first and the last committed steps)."""

from __future__ import annotations

import csv
import os
import subprocess
from dataclasses import dataclass

from acco.harness import SOURCE_ROOT, TRAIN
from acco.harness.bench.measure import steady_rate
from acco.harness.bench.variants import TINY_BUCKET_MB
from acco.harness.clock_calibration.calibrate import span_seconds, spread
from acco.methods import get as get_method
from acco.methods.variants import OVERLAPPED_DDP, Variant
from acco.runtime.summary import run_completed

FIGURE = "beyond_diloco"  # its CPU model (gptneo_tiny) is the smallest: the most repetitions per minute
# the variants under test, as the trainer spells them; the keys name the
# result rows and the run folders. The overlapped DDP (issue 40) puts the clock's overlap rule
# under test; its costs are its sequential twin's of the same repetition
# (the same bytes; its own sync span runs from its first bucket, waits included)
VARIANTS = (
    Variant("ddp", "ddp", (("method.impl", "flat"), ("train.deterministic", True))),
    OVERLAPPED_DDP.extended(("method.bucket_mb", TINY_BUCKET_MB), ("train.deterministic", True)),
    Variant("acco", "acco", (("train.deterministic", True),)),
    Variant("acco_adaptive", "acco", (("train.deterministic", False),)),
)
MICRO_BATCHES_PER_STEP = 2  # per rank: accum 2 of one round, or accum 1 in each of ACCO's two


def _overrides(v: Variant) -> list[str]:
    rounds = get_method(v.method).rounds_per_step if v.method else 1
    return [*v.overrides, f"train.accum={MICRO_BATCHES_PER_STEP // rounds}"]


METHODS = {v.key: _overrides(v) for v in VARIANTS}  # key -> the Hydra overrides that run it


def costs_source(key: str) -> str:
    """The variant whose real run gives `key`'s own costs: itself, or for a DDP that overlaps its
    backward the same method without it."""
    v = next(v for v in VARIANTS if v.key == key)
    if not v.value("method.overlap_backward"):
        return key
    return next(w.key for w in VARIANTS if w.method == v.method and not w.value("method.overlap_backward"))


@dataclass(frozen=True)
class Costs:
    micro_batch_s: float
    sync_s: float  # communication alone: the sync's span less its optimizer step
    optimizer_step_s: float
    backward_share: float | None = None  # measured (fwd_s in the trace), else the clock's default

    def overrides(self) -> list[str]:
        share = [] if self.backward_share is None else [f"clock.backward_share={self.backward_share:.6g}"]
        return [
            "clock.mode=virtual",
            f"clock.micro_batch_s={self.micro_batch_s:.6g}",
            f"clock.sync_s={self.sync_s:.6g}",
            f"clock.optimizer_step_s={self.optimizer_step_s:.6g}",
            *share,
        ]


def costs_from_spans(secs: dict[str, list[float]]) -> Costs:
    """The medians of a trace's spans as the virtual clock's costs."""
    mb = spread(secs["micro_batch"])["median"]
    sync = spread(secs["sync"])["median"]
    opt = spread(secs["optimizer_step"])["median"] or 0.0
    if mb is None or sync is None:
        raise ValueError("a trace without micro-batches or syncs")
    return Costs(mb, max(0.0, sync - opt), opt, spread(secs.get("backward_share", []))["median"])


def costs_from_calibration(point: dict) -> Costs:
    opt = point["optimizer_step_s"]["median"] or 0.0
    share = (point.get("backward_share") or {}).get("median")
    return Costs(point["micro_batch_s"]["median"], max(0.0, point["sync_s"]["median"] - opt), opt, share)


def run_overrides(method: str, rate_mbit: float, steps: int, out_dir: str, clock: list[str]) -> list[str]:
    return [
        f"experiment={FIGURE}/cpu",
        *METHODS[method],
        "world_size=2",
        "link.mode=delay",
        f"link.rate_mbit={rate_mbit:g}",
        f"train.steps={steps}",
        "train.samples=null",
        "train.eval_every=0",
        "train.trace=true",
        "train.log_every=0",
        "seed=0",
        *clock,
        f"out_dir={out_dir}",
        "overwrite=true",
    ]


def _train(args: list[str], timeout_s: float = 900) -> None:
    """One run; a run whose folder already holds a completed one is kept (an interrupted validation
    continues where it stopped)."""
    out_dir = next(a.split("=", 1)[1] for a in args if a.startswith("out_dir="))
    if run_completed(out_dir):
        return
    proc = subprocess.run([*TRAIN, *args], cwd=SOURCE_ROOT, capture_output=True, text=True, timeout=timeout_s)
    if proc.returncode != 0:
        tail = " | ".join(proc.stderr.strip().splitlines()[-3:])
        raise RuntimeError(f"validation run failed (exit {proc.returncode}): {tail}")


def s_per_step(out_dir: str) -> float:
    return steady_rate(os.path.join(out_dir, "metrics.csv"))["s_per_step"]


def validate_against_real_runs(
    calibration: dict, rates: list[float], reps: int, steps: int, runs_dir: str, log=print
) -> list[dict]:
    """Every row: method, link, repetition, real s/step, virtual s/step from the real run's own
    costs (`virtual_own_s`) and from the calibration's (`virtual_cal_s`), the costs used."""
    from acco.harness.clock_calibration.calibrate import point_of

    rows = []
    for rate in rates:
        point = point_of(calibration, FIGURE, rate)
        if point is None:
            raise ValueError(f"the calibration has no {FIGURE} point at {rate:g} Mbit/s")
        cal = costs_from_calibration(point)
        for method in METHODS:
            cal_dir = os.path.join(runs_dir, f"{method}_rate{rate:g}_virtual_cal")
            _train(run_overrides(method, rate, steps, cal_dir, cal.overrides()))
            virtual_cal = s_per_step(cal_dir)
            for k in range(reps):
                real_dir = os.path.join(runs_dir, f"{method}_rate{rate:g}_real_{k}")
                _train(run_overrides(method, rate, steps, real_dir, ["clock.mode=real"]))
                # the overlapped ddp: the sequential ddp's costs of this repetition (its own sync span
                # includes the waits for its buckets)
                source = os.path.join(runs_dir, f"{costs_source(method)}_rate{rate:g}_real_{k}")
                own = costs_from_spans(span_seconds(os.path.join(source, "trace.json")))
                virt_dir = os.path.join(runs_dir, f"{method}_rate{rate:g}_virtual_{k}")
                _train(run_overrides(method, rate, steps, virt_dir, own.overrides()))
                row = {
                    "method": method,
                    "rate_mbit": rate,
                    "rep": k,
                    "real_s": s_per_step(real_dir),
                    "virtual_own_s": s_per_step(virt_dir),
                    "virtual_cal_s": virtual_cal,
                    "own_micro_batch_s": own.micro_batch_s,
                    "own_sync_s": own.sync_s,
                    "own_optimizer_step_s": own.optimizer_step_s,
                    "cal_micro_batch_s": cal.micro_batch_s,
                    "cal_sync_s": cal.sync_s,
                    "cal_optimizer_step_s": cal.optimizer_step_s,
                    "ratio_own": (own.sync_s + own.optimizer_step_s) / own.micro_batch_s,  # per micro-batch
                    "ratio_cal": (cal.sync_s + cal.optimizer_step_s) / cal.micro_batch_s,
                    "load_1min": round(os.getloadavg()[0], 2),
                }
                log(
                    f"validate: {method:<14} {rate:>5g} Mbit rep {k}: real {row['real_s']:.3f} s/step, "
                    f"virtual (own costs) {row['virtual_own_s']:.3f}, (calibration) {virtual_cal:.3f}"
                )
                rows.append(row)
    return rows


FIELDS = [
    "method",
    "rate_mbit",
    "rep",
    "real_s",
    "virtual_own_s",
    "virtual_cal_s",
    "own_micro_batch_s",
    "own_sync_s",
    "own_optimizer_step_s",
    "cal_micro_batch_s",
    "cal_sync_s",
    "cal_optimizer_step_s",
    "ratio_own",
    "ratio_cal",
    "load_1min",
]


def write_csv(rows: list[dict], path: str) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        w.writeheader()
        for r in rows:
            w.writerow({k: (f"{r[k]:.6g}" if isinstance(r[k], float) else r[k]) for k in FIELDS})


def read_csv(path: str) -> list[dict]:
    with open(path) as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        for k in FIELDS:
            if k in ("method",):
                continue
            r[k] = int(r[k]) if k == "rep" else float(r[k])
    return rows
