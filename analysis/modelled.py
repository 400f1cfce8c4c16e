"""How far a modelled time may be trusted: the virtual clock's validated error and range on this
machine (results/<scale>/clock/validation.csv, experiments/calibrate_clock.py --validate), and the
scale simulator's error on a ratio of two methods against the CPU testbed (results/sim/
validation_runs.csv).

A virtual-clock claim compares two methods' modelled times, so what matters is the error of the
*ratio* of their modelled times against the ratio of their measured ones. The validation runs each
method on a real run and on the clock, interleaved, repetitions paired; per link and repetition the
modelled ratio A / B over the measured one gives an error, and its 95 % interval over the repetitions.
A claim's **validated error** is the largest |end| of those intervals over the links validated, for
its pair of methods (ACCO deterministic or adaptive against DDP or the overlapped DDP), with the costs
the claims' runs use (calibration.json). The verdict's interval is widened by it on each side
(analysis/stats.py PairedGap.widened): a gap inside the model's own error decides nothing.

A claim whose runs lie outside what was validated — another number of ranks, heterogeneous
workers, or a per-micro-batch communication/computation ratio outside the validated ones — gets no
verdict: the report says it is outside the clock's validated range instead.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pandas as pd

from acco.harness.simulation.variants import VARIANTS
from analysis.load import ACCO, BASELINE, OVERLAPPED_DDP
from analysis.stats import paired_gap

VALIDATION_CSV = os.path.join("clock", "validation.csv")


@dataclass(frozen=True)
class ClockValidity:
    """What the clock's validation runs cover: the error of a ratio of two methods' modelled times per
    (A kind, B method) in %, the per-micro-batch comm/compute ratios and the world sizes tested."""

    errors: dict[tuple[str, str], float]
    ratio_range: tuple[float, float]
    worlds: frozenset[int]
    source: str

    def error_pct(self, a_kind: str, b_method: str) -> float | None:
        return self.errors.get((a_kind, b_method))


def read_validity(path: str) -> ClockValidity | None:
    """The validity of the clock from its validation rows (None without them)."""
    if not os.path.exists(path):
        return None
    rows = pd.read_csv(path)
    if rows.empty:
        return None
    errors: dict[tuple[str, str], float] = {}
    methods = sorted(rows["method"].unique())
    for a_kind in _variants_of(ACCO, methods):
        for b in _variants_of(BASELINE, methods):
            worst = 0.0
            for rate in sorted(rows["rate_mbit"].unique()):
                a = rows[(rows["method"] == a_kind) & (rows["rate_mbit"] == rate)].set_index("rep")
                d = rows[(rows["method"] == b) & (rows["rate_mbit"] == rate)].set_index("rep")
                reps = sorted(set(a.index) & set(d.index))
                if len(reps) < 2:
                    continue
                modelled = {r: a.loc[r, "virtual_cal_s"] / d.loc[r, "virtual_cal_s"] for r in reps}
                measured = {r: a.loc[r, "real_s"] / d.loc[r, "real_s"] for r in reps}
                gap = paired_gap(modelled, measured)
                worst = max(worst, abs(gap.lo_pct), abs(gap.hi_pct))
            if worst > 0:
                errors[(a_kind, b)] = worst
    ratios = rows["ratio_own"].astype(float)
    return ClockValidity(errors, (float(ratios.min()), float(ratios.max())), frozenset({2}), path)


def _variants_of(method: str, keys) -> list[str]:
    """The keys (the validation's `method` column: the simulator's variants) that run `method`."""
    by_key = {v.key: v for v in VARIANTS}
    return [k for k in keys if k in by_key and by_key[k].method == method]


@lru_cache(maxsize=16)
def _validity_at(path: str) -> ClockValidity | None:
    return read_validity(path)


def validity_for(run_path: str) -> ClockValidity | None:
    """The clock validation of the results folder a run belongs to (<root>/<scale>/clock/), found by
    walking up from the run's folder; None where that folder has none."""
    here = os.path.abspath(run_path)
    for _ in range(4):
        here = os.path.dirname(here)
        candidate = os.path.join(here, VALIDATION_CSV)
        if os.path.exists(candidate):
            return _validity_at(candidate)
    return None


def a_kind(info: dict) -> str:
    """The validation's name of a run: its method's variant that sets train.deterministic as the run
    did (acco_adaptive for ACCO with train.deterministic=false), else its method."""
    mode = ("train.deterministic", info.get("deterministic"))
    return next((v.key for v in VARIANTS if v.method == info.get("method") and mode in v.settings), info["method"])


def clock_ratio(run) -> float:
    """A virtual-clock run's per-micro-batch communication/computation ratio: its sync's modelled
    seconds (a fixed clock.sync_s, or the link model's, as summary.json's clock block reports it) over
    a micro-batch's."""
    clock = dict(run.config.get("clock") or {})
    reported = getattr(getattr(run, "summary", None), "clock", None) or {}
    sync, mb = clock.get("sync_s"), clock.get("micro_batch_s")
    if sync is None:
        sync = reported.get("sync_s")
    if isinstance(sync, dict):  # the link model's per round kind: estimate, commit, ...
        sync = max(float(x) for x in sync.values()) if sync else None
    return float(sync) / float(mb) if sync is not None and mb else math.nan


def check(
    validity: ClockValidity | None, a: str, b: str, world: int, ratio: float, hetero: bool = False
) -> tuple[float, str]:
    """(the validated error in %, "") for modelled times of `a` against `b` (the validation's names:
    acco, acco_adaptive, ddp, ddp_overlap) at `world` ranks and this comm/compute ratio, or (nan, why
    not) outside what the validation covers."""
    if validity is None:
        return math.nan, "the clock has no validation runs in this results folder"
    lo, hi = validity.ratio_range
    why = []
    if world not in validity.worlds:
        why.append(f"{world} ranks (validated: {', '.join(map(str, sorted(validity.worlds)))})")
    if hetero:
        why.append("heterogeneous workers")
    if not (lo <= ratio <= hi):
        why.append(f"comm/compute {ratio:.2g} per micro-batch (validated: {lo:.2f}–{hi:.2f})")
    error = validity.error_pct(a, b)
    if error is None:
        why.append(f"no validation of {a} against {b}")
    if why or error is None:
        return math.nan, "outside the clock's validated range: " + ", ".join(why)
    return float(error), ""


def modelled_check(a_runs: list, b_runs: list) -> tuple[float, str]:
    """(the validated error in %, "" ) for a virtual-clock comparison inside the validated range, or
    (nan, why not) outside it. `a_runs`, `b_runs`: analysis/load.py Run objects of the two groups."""
    if not a_runs or not b_runs:
        return math.nan, "no runs"
    info_a, info_b = a_runs[0].info, b_runs[0].info
    return check(
        validity_for(a_runs[0].path),
        a_kind(info_a),
        str(info_b["method"]),
        int(info_a.get("world_size") or 0),
        clock_ratio(a_runs[0]),
        info_a.get("hetero") not in (None, "none"),
    )


# -- the scale simulator --------------------------------------------------------------------------------
SIM_RUNS_CSV = os.path.join("sim", "validation_runs.csv")
SIM_PUBLISHED_CSV = os.path.join("sim", "validation_published.csv")
SIM_QUANTILE = 90  # the simulator's error on a ratio: this percentile of |error| over the settings


def simulator_ratio_error(root: str) -> float | None:
    """The simulator's error on ACCO's time over the overlapped DDP's (the ratio the simulated cells
    read): the SIM_QUANTILE-th percentile of |predicted / measured − 1| over the CPU testbed's settings
    (results/sim/validation_runs.csv, predicted from each run's own primitives), in %."""
    path = os.path.join(root, SIM_RUNS_CSV)
    if not os.path.exists(path):
        return None
    v = pd.read_csv(path)
    key = ["experiment", "layout", "link_mbit", "hetero", "budget", "seed"]
    a = v[(v["method"] == ACCO) & (v["mode"] == "deterministic")]
    b = v[v["method"] == OVERLAPPED_DDP]
    m = a.merge(b, on=key, suffixes=("_a", "_b"))
    col = "predicted_own_s_per_step"
    err = (m[f"{col}_a"] / m[f"{col}_b"]) / (m["measured_s_per_step_a"] / m["measured_s_per_step_b"]) - 1
    err = err.dropna()
    return float(np.percentile(100 * err.abs(), SIM_QUANTILE)) if len(err) else None


def simulated_ratios(root: str) -> dict[str, tuple[float, float, str]]:
    """The ACCO paper's Table 3 rows simulated at the paper's settings (results/sim/
    validation_published.csv): setting -> (simulated ACCO / DDP time, published, the command)."""
    path = os.path.join(root, SIM_PUBLISHED_CSV)
    if not os.path.exists(path):
        return {}
    v = pd.read_csv(path)
    rows = v[v["source"].str.startswith("ACCO") & (v["quantity"] == "ACCO/DDP time")]
    return {str(r.setting): (float(r.ours), float(r.published), str(r.command)) for r in rows.itertuples()}
