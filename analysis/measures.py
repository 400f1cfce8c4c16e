"""Numbers read off one run: its training loss over the last samples, its loss curve against
wall-clock, the time it takes to reach a loss, its speed. Every comparison of methods (analysis/claims.py,
the report, the tables) reads a run through these, at equal samples where a number depends on how far
the run went (`upto`)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from analysis.load import Run

SMOOTH_STEPS = 5  # the training loss is noisy step to step: time to a target uses its rolling mean
TARGET_COLUMN = {"time_to_target": "train_loss", "time_to_eval_target": "eval_loss"}  # claim metric -> loss


def train_loss_frame(run: Run) -> pd.DataFrame:
    """A run's steps that logged a training loss, in order, with `smooth_loss`: the training loss's
    trailing SMOOTH_STEPS-step mean (what times and steps to a target read)."""
    m = run.metrics().dropna(subset=["train_loss"]).sort_values("step")
    return m.assign(smooth_loss=m["train_loss"].rolling(SMOOTH_STEPS, min_periods=1).mean())


def loss_curve(run: Run, column: str) -> tuple[np.ndarray, np.ndarray]:
    """(wall-clock s, loss) of a run: the validation loss as logged, or the training loss's rolling
    mean over SMOOTH_STEPS steps."""
    if column == "train_loss":
        m = train_loss_frame(run)
        return m["wall_time_s"].to_numpy(float), m["smooth_loss"].to_numpy(float)
    m = run.metrics().dropna(subset=[column]).sort_values("step")
    return m["wall_time_s"].to_numpy(float), m[column].to_numpy(float)


def time_to_loss(times: np.ndarray, losses: np.ndarray, target: float) -> float:
    """First wall-clock time at which the loss is at or below `target` (NaN if never)."""
    hit = np.nonzero(losses <= target + 1e-12)[0]
    return float(times[hit[0]]) if len(hit) else float("nan")


TAIL = 0.1  # "final loss" = mean training loss over the last 10 % of the samples (less noise)
EARLY = 0.25  # "early loss" = the loss where a quarter of the samples has been seen


# -- per-run numbers, at equal samples ---------------------------------------------------------------
def _train(run: Run):
    return run.metrics().dropna(subset=["train_loss"]).sort_values("step").reset_index(drop=True)


def end_samples(run: Run) -> float:
    m = _train(run)
    return float(m["samples"].iloc[-1]) if len(m) and "samples" in m else math.nan


def final_loss(run: Run, upto: float | None = None) -> float:
    """Mean training loss over the last TAIL of the samples up to `upto` (default: the run's end)."""
    m = _train(run)
    if m.empty:
        return float("nan")
    x = m["samples"].to_numpy(float)
    end = x[-1] if upto is None else min(upto, x[-1])
    window = m["train_loss"][(x > (1 - TAIL) * end) & (x <= end)]
    if window.empty:  # fewer steps than the tail holds: the last one
        window = m["train_loss"][x <= end].tail(1)
    return float(window.mean())


def loss_at_fraction(run: Run, frac: float, x: str = "samples", upto: float | None = None) -> float:
    """Training loss (mean of a 5-step window) where `x` first reaches `frac` of its final value (or
    of `upto`)."""
    m = _train(run)
    if m.empty:
        return float("nan")
    end = float(m[x].iloc[-1]) if upto is None else upto
    i = int(np.searchsorted(m[x].to_numpy(float), frac * end))
    return float(m["train_loss"].iloc[max(0, i - 2) : i + 3].mean())


def early_loss(run: Run, upto: float | None = None) -> float:
    return loss_at_fraction(run, EARLY, upto=upto)


def samples_per_s(run: Run, upto: float | None = None) -> float:
    s = run.summary
    return float(s.samples or 0) / float(s.total_wall_time_s or np.nan)


def wall_time(run: Run, upto: float | None = None) -> float:
    return float(run.summary.total_wall_time_s or np.nan)


def eval_loss_at(run: Run, samples: float) -> float:
    """The validation loss at `samples` (linear between the logged evaluations; nan outside them)."""
    m = run.metrics().dropna(subset=["eval_loss"]).sort_values("samples")
    if m.empty:
        return float("nan")
    x, y = m["samples"].to_numpy(float), m["eval_loss"].to_numpy(float)
    if samples < x[0] - 1e-9 or samples > x[-1] + 1e-9:
        return float("nan")
    return float(np.interp(samples, x, y))


def final_eval_loss(run: Run, upto: float | None = None) -> float:
    m = run.metrics().dropna(subset=["eval_loss"]).sort_values("step")
    if m.empty:
        return float("nan")
    if upto is None or "samples" not in m or upto >= float(m["samples"].iloc[-1]):
        return float(m["eval_loss"].iloc[-1])
    return eval_loss_at(run, upto)


def heldout_ppl(run: Run, upto: float | None = None) -> float:
    return float(((run.summary.final_eval or {}).get("heldout") or {}).get("perplexity") or np.nan)


def time_to(run: Run, target: float, column: str) -> float:
    """Wall-clock seconds until the run's loss (see loss_curve) is first at or below `target`."""
    return time_to_loss(*loss_curve(run, column), target)


def seconds_per_sample(run: Run) -> float:
    s = run.summary
    return float(s.total_wall_time_s or np.nan) / float(s.samples or np.nan)
