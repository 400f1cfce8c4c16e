"""Paired comparisons of two methods over seeds, and the verdict rule the CPU report states at its top.

A seed fixes the initialisation and the data order, so run s of method A and run s of method B differ
only by the method: the comparison is on the per-seed relative gaps 100 (a_s - b_s) / b_s, their mean
and its 95 % confidence interval (Student's t with n - 1 degrees of freedom: a handful of seeds, no
normal approximation). The rule, fixed before any run:

- *matches*: the interval lies inside ±TOL_PCT;
- *worse* / *better*: the interval lies wholly beyond +TOL_PCT / -TOL_PCT (for a loss or a time,
  higher is worse; `higher_is_better` flips it for a speed);
- otherwise, and with fewer than MIN_SEEDS pairs, *more seeds* are needed: the reproduction adds seeds
  up to SEED_CAP, and only a comparison still undecided at the cap is *inconclusive*."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum

from scipy import stats as scipy_stats

TOL_PCT = 2.0
MIN_SEEDS = 5
SEED_CAP = 10
CONFIDENCE = 0.95


class Verdict(Enum):
    MATCHES = "matches"
    WORSE = "worse"
    BETTER = "better"
    MORE_SEEDS = "needs more seeds"
    INCONCLUSIVE = "inconclusive"


@dataclass(frozen=True)
class PairedGap:
    """Per-seed relative gaps of A against B, in percent, with their mean and confidence interval."""

    seeds: tuple[int, ...]
    gaps_pct: tuple[float, ...]
    mean_pct: float
    lo_pct: float
    hi_pct: float

    @property
    def n(self) -> int:
        return len(self.seeds)

    def describe(self) -> str:
        """'+1.3 % [−0.4, +3.0] (n = 5)' as the report prints it."""
        if self.n == 0:
            return "no paired seeds"
        if self.n == 1:
            return f"{self.mean_pct:+.1f} % (n = 1: no interval)"
        return f"{self.mean_pct:+.1f} % [{self.lo_pct:+.1f}, {self.hi_pct:+.1f}] (n = {self.n})"


def paired_gap(a: Mapping[int, float], b: Mapping[int, float], confidence: float = CONFIDENCE) -> PairedGap:
    """The gap of A against B over the seeds both have (a finite, positive B value: a relative gap
    needs one). `a`, `b`: seed -> the per-run number (a final loss, a time to a target loss, ...)."""
    seeds = tuple(s for s in sorted(set(a) & set(b)) if math.isfinite(a[s]) and math.isfinite(b[s]) and b[s] > 0)
    gaps = tuple(100.0 * (a[s] - b[s]) / b[s] for s in seeds)
    n = len(gaps)
    if n == 0:
        return PairedGap((), (), math.nan, math.nan, math.nan)
    mean = sum(gaps) / n
    if n == 1:
        return PairedGap(seeds, gaps, mean, -math.inf, math.inf)
    sd = math.sqrt(sum((g - mean) ** 2 for g in gaps) / (n - 1))
    half = float(scipy_stats.t.ppf(0.5 + confidence / 2, n - 1)) * sd / math.sqrt(n)
    return PairedGap(seeds, gaps, mean, mean - half, mean + half)


def decide(
    gap: PairedGap,
    tol_pct: float = TOL_PCT,
    min_seeds: int = MIN_SEEDS,
    cap: int = SEED_CAP,
    higher_is_better: bool = False,
) -> Verdict:
    """The module's rule applied to one paired gap."""
    if gap.n < min_seeds:
        return Verdict.MORE_SEEDS
    if -tol_pct <= gap.lo_pct and gap.hi_pct <= tol_pct:
        return Verdict.MATCHES
    if gap.lo_pct > tol_pct:
        return Verdict.BETTER if higher_is_better else Verdict.WORSE
    if gap.hi_pct < -tol_pct:
        return Verdict.WORSE if higher_is_better else Verdict.BETTER
    return Verdict.INCONCLUSIVE if gap.n >= cap else Verdict.MORE_SEEDS


def rule_text(tol_pct: float = TOL_PCT, min_seeds: int = MIN_SEEDS, cap: int = SEED_CAP) -> str:
    """The rule, as the report states it before any result."""
    return (
        f"Every comparison of two methods pairs their runs by seed (same initialisation and data order) and "
        f"reports the mean per-seed relative gap with its {CONFIDENCE:.0%} confidence interval (Student's t). "
        f"*Matches*: the interval lies inside ±{tol_pct:g} %. *Worse* / *better*: it lies wholly beyond "
        f"±{tol_pct:g} % (for a loss or a time higher is worse). Otherwise, or with fewer than {min_seeds} "
        f"seeds, *needs more seeds*: the reproduction adds seeds up to {cap}; a comparison still undecided at "
        f"{cap} seeds is *inconclusive*, with n and the interval."
    )
