"""Paired comparisons of two methods over seeds, and the verdict rule the report states at its top.

A seed fixes the initialisation and the data order, so run s of method A and run s of method B differ
only by the method: the comparison is on the per-seed relative gaps 100 (a_s - b_s) / b_s, their mean
and its confidence interval (Student's t with n - 1 degrees of freedom: a handful of seeds, no normal
approximation).

**The stopping rule** (fixed before any run). A claim is looked at only at its planned numbers of
paired seeds, `Design.looks` (default LOOKS = (5, 10): a group-sequential design with two looks; a
claim may plan a single fixed n instead, `looks: [n]` in its experiment's claims). At each look the
interval's confidence is 1 - ALPHA / K, K the number of planned looks (Bonferroni across the looks):
its true mean lies beyond either end with probability ALPHA / 2K per look, so by the union bound the
chance that *any* look gives a false verdict in one direction is at most ALPHA / 2, and ALPHA for the
two directions together, however the looks depend on each other. The seeds are read in order (the n
smallest paired seeds at look n); the first look that decides ends the sequence; a claim still
undecided at its last planned look is *inconclusive*, and seeds beyond the last look are not read.
(Simpler than Pocock or O'Brien-Fleming boundaries and slightly conservative, but exact for any
correlation between looks and for a t interval; tests/unit/test_stats.py simulates it.)

**Sign and size, apart.** Each look reports
- the *sign*: whether the interval excludes 0 (A above B, A below B) or not;
- the *size* against a margin m (per metric: analysis/claims.py computes it from the runs and says how):
  within ±m, wholly beyond +m or -m, or straddling a margin.
A claim says which of the two the paper makes (`tests: size`: "matches", "substantially hurts";
`tests: sign`: "performs worse"). Its verdict (for a loss or a time higher is worse;
`higher_is_better` flips it for a speed):
- tests=size: *matches* when within ±m, *worse* / *better* when beyond +m / -m;
- tests=sign: *worse* / *better* when the sign is decided, else *matches* when within ±m;
- otherwise undecided: *needs more seeds* before the last planned look, *inconclusive* at it.
Every decided verdict is false with probability at most ALPHA / 2 where the true gap sits on the
boundary it crosses (0 for a sign, ±m for a size)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import Enum
from functools import lru_cache

from scipy import stats as scipy_stats

ALPHA = 0.05  # the chance of a false verdict the rule allows per claim, both directions together
LOOKS = (5, 10)  # the default planned looks: numbers of paired seeds
TOL_PCT = 2.0  # the margin where a caller states none (beyond_diloco's timing rows)
MIN_SEEDS = LOOKS[0]
SEED_CAP = LOOKS[-1]
CONFIDENCE = 0.95  # a plain interval (one look, one claim), as tables print it
TESTS = ("size", "sign")


class Verdict(Enum):
    MATCHES = "matches"
    WORSE = "worse"
    BETTER = "better"
    MORE_SEEDS = "needs more seeds"
    INCONCLUSIVE = "inconclusive"
    # a modelled comparison outside what its model was validated on (analysis/modelled.py): no verdict
    UNVALIDATED = "outside the validated range"


@dataclass(frozen=True)
class Design:
    """The planned looks of a claim and the error the rule allows it (see the module's docstring).
    `split=False` is the rule without correction: every look at the full 1 - ALPHA (what the
    reproduction did before: it looked after every addition of seeds); the tests show it exceeds ALPHA."""

    looks: tuple[int, ...] = LOOKS
    alpha: float = ALPHA
    split: bool = True

    def __post_init__(self):
        if not self.looks or any(n < 2 for n in self.looks) or list(self.looks) != sorted(set(self.looks)):
            raise ValueError(f"looks must be increasing numbers of seeds, each at least 2, got {self.looks}")

    @property
    def confidence(self) -> float:
        """The interval's confidence at each look."""
        return 1.0 - (self.alpha / len(self.looks) if self.split else self.alpha)

    def describe(self) -> str:
        if len(self.looks) == 1:
            return f"a fixed n = {self.looks[0]}, {self.confidence:.1%} interval"
        return (
            f"looks at n = {', '.join(map(str, self.looks))}, each with a {self.confidence:.1%} interval "
            f"(α = {self.alpha:g} split over {len(self.looks)} looks)"
        )


DEFAULT_DESIGN = Design()


@dataclass(frozen=True)
class PairedGap:
    """Per-seed gaps of A against B, in percent (or percentage points), with their mean and interval."""

    seeds: tuple[int, ...]
    gaps_pct: tuple[float, ...]
    mean_pct: float
    lo_pct: float
    hi_pct: float
    confidence: float = CONFIDENCE
    # a modelled number's validated error (analysis/modelled.py), added to each end of the interval:
    # a gap inside the model's own error is no evidence either way
    widen_pct: float = 0.0
    sd_pct: float = math.nan  # the per-seed gaps' standard deviation (nan below 2 seeds)

    @property
    def n(self) -> int:
        return len(self.seeds)

    def widened(self, pct: float) -> PairedGap:
        """The same gap with `pct` more on each end of its interval (pct >= 0)."""
        if pct <= 0:
            return self
        return replace(self, lo_pct=self.lo_pct - pct, hi_pct=self.hi_pct + pct, widen_pct=self.widen_pct + pct)

    def describe(self) -> str:
        """'+1.3 % [−0.4, +3.0] (n = 5)' as the report prints it."""
        if self.n == 0:
            return "no paired seeds"
        if self.n == 1:
            return f"{self.mean_pct:+.1f} % (n = 1: no interval)"
        model = f", ±{self.widen_pct:.1f} model error" if self.widen_pct > 0 else ""
        return f"{self.mean_pct:+.1f} % [{self.lo_pct:+.1f}, {self.hi_pct:+.1f}] (n = {self.n}{model})"


@lru_cache(maxsize=256)
def _t_quantile(q: float, df: int) -> float:
    return float(scipy_stats.t.ppf(q, df))


def interval(gaps: Mapping[int, float], confidence: float = CONFIDENCE) -> PairedGap:
    """Mean and Student-t interval of per-seed numbers (seed -> gap in %); non-finite ones left out."""
    seeds = tuple(s for s in sorted(gaps) if math.isfinite(gaps[s]))
    values = tuple(float(gaps[s]) for s in seeds)
    n = len(values)
    if n == 0:
        return PairedGap((), (), math.nan, math.nan, math.nan, confidence)
    mean = sum(values) / n
    if n == 1:
        return PairedGap(seeds, values, mean, -math.inf, math.inf, confidence)
    sd = math.sqrt(sum((g - mean) ** 2 for g in values) / (n - 1))
    half = _t_quantile(0.5 + confidence / 2, n - 1) * sd / math.sqrt(n)
    return PairedGap(seeds, values, mean, mean - half, mean + half, confidence, sd_pct=sd)


def relative_gaps(a: Mapping[int, float], b: Mapping[int, float]) -> dict[int, float]:
    """seed -> 100 (a - b) / b over the seeds both have (a finite, positive B value: a relative gap needs one)."""
    seeds = (s for s in sorted(set(a) & set(b)) if math.isfinite(a[s]) and math.isfinite(b[s]) and b[s] > 0)
    return {s: 100.0 * (a[s] - b[s]) / b[s] for s in seeds}


def paired_gap(a: Mapping[int, float], b: Mapping[int, float], confidence: float = CONFIDENCE) -> PairedGap:
    """The gap of A against B over the seeds both have. `a`, `b`: seed -> the per-run number (a final
    loss, a time to a target loss, ...)."""
    return interval(relative_gaps(a, b), confidence)


# -- sign and size ----------------------------------------------------------------------------------
class Sign(Enum):
    ABOVE = "A above B"
    BELOW = "A below B"
    UNSURE = "0 inside"


class Size(Enum):
    WITHIN = "within ±m"
    ABOVE = "beyond +m"
    BELOW = "beyond −m"
    UNSURE = "straddles ±m"


def sign_of(gap: PairedGap) -> Sign:
    if gap.lo_pct > 0:
        return Sign.ABOVE
    if gap.hi_pct < 0:
        return Sign.BELOW
    return Sign.UNSURE


def size_of(gap: PairedGap, margin_pct: float) -> Size:
    if not math.isfinite(margin_pct):
        return Size.UNSURE
    if -margin_pct <= gap.lo_pct and gap.hi_pct <= margin_pct:
        return Size.WITHIN
    if gap.lo_pct > margin_pct:
        return Size.ABOVE
    if gap.hi_pct < -margin_pct:
        return Size.BELOW
    return Size.UNSURE


def verdict_at(
    gap: PairedGap, margin_pct: float, tests: str = "size", higher_is_better: bool = False
) -> Verdict | None:
    """The verdict one look gives (None: undecided), by the claim's kind (module docstring)."""
    if tests not in TESTS:
        raise ValueError(f"tests must be one of {', '.join(TESTS)}, got {tests!r}")
    up, down = (Verdict.BETTER, Verdict.WORSE) if higher_is_better else (Verdict.WORSE, Verdict.BETTER)
    size = size_of(gap, margin_pct)
    if tests == "sign":
        sign = sign_of(gap)
        if sign is not Sign.UNSURE:
            return up if sign is Sign.ABOVE else down
        return Verdict.MATCHES if size is Size.WITHIN else None
    return {Size.WITHIN: Verdict.MATCHES, Size.ABOVE: up, Size.BELOW: down}.get(size)


@dataclass(frozen=True)
class Look:
    """Where a claim's sequence stands: the verdict, the look it was taken at (1-based; 0: not even
    the first planned n is there), the interval at that look, and the margin it was held against."""

    verdict: Verdict
    gap: PairedGap
    margin_pct: float
    index: int
    design: Design
    tests: str = "size"

    @property
    def sign(self) -> Sign:
        return sign_of(self.gap)

    @property
    def size(self) -> Size:
        return size_of(self.gap, self.margin_pct)

    @property
    def next_n(self) -> int:
        """The paired seeds the next planned look needs (0 once decided)."""
        if self.verdict is not Verdict.MORE_SEEDS:
            return 0
        return self.design.looks[self.index] if self.index < len(self.design.looks) else 0

    def describe_look(self) -> str:
        k = len(self.design.looks)
        if self.index == 0:
            return f"before look 1 of {k} (n = {self.gap.n} of {self.design.looks[0]})"
        return f"look {self.index} of {k} (n = {self.design.looks[self.index - 1]})"


Margin = float | Callable[[tuple[int, ...]], float]


def sequential(
    gaps: Mapping[int, float],
    design: Design = DEFAULT_DESIGN,
    margin: Margin = TOL_PCT,
    tests: str = "size",
    higher_is_better: bool = False,
    widen_pct: float = 0.0,
) -> Look:
    """The stopping rule on per-seed gaps (seed -> %): the looks in order, each on the n smallest
    paired seeds at its confidence, until one decides. `margin`: a number, or a function of the
    look's seeds (a margin computed from those runs). `widen_pct`: a modelled number's validated
    error, added to each end of every look's interval (PairedGap.widened)."""
    finite = {s: g for s, g in gaps.items() if math.isfinite(g)}
    seeds = sorted(finite)

    def margin_at(at: tuple[int, ...]) -> float:
        return float(margin(at) if callable(margin) else margin)

    last: tuple[PairedGap, float] | None = None  # the last look taken (an undecided one)
    for index, n in enumerate(design.looks, 1):
        if len(seeds) < n:  # the interval of the last look taken; before the first, of what is there
            gap, m = last if last is not None else (interval(finite, design.confidence).widened(widen_pct), math.nan)
            return Look(Verdict.MORE_SEEDS, gap, margin_at(gap.seeds) if last is None else m, index - 1, design, tests)
        gap = interval({s: finite[s] for s in seeds[:n]}, design.confidence).widened(widen_pct)
        m = margin_at(gap.seeds)
        last = (gap, m)
        v = verdict_at(gap, m, tests, higher_is_better)
        if v is not None:
            return Look(v, gap, m, index, design, tests)
        if index == len(design.looks):
            return Look(Verdict.INCONCLUSIVE, gap, m, index, design, tests)
    raise AssertionError("unreachable: a design has at least one look")


def p_value(look: Look, higher_is_better: bool = False) -> float:
    """The smallest α at which the look's verdict would still be taken (1.0 for an undecided one):
    its one-sided Student-t p-value against the boundary the verdict crossed (0 for a sign, ±m for a
    size, both ends for *matches*), moved inward by the look's model error, times 2K for the K
    planned looks (the interval at each look has 1 − α/K confidence). The verdict holds at α exactly
    when this is at most α, so these are what Holm's procedure (`holm`) ranks."""
    gap, v, m, w = look.gap, look.verdict, look.margin_pct, look.gap.widen_pct
    if v not in (Verdict.MATCHES, Verdict.BETTER, Verdict.WORSE) or gap.n < 2:
        return 1.0
    se = gap.sd_pct / math.sqrt(gap.n)
    df = gap.n - 1

    def beyond(distance: float) -> float:  # P(T > distance / se): the mean this far past a boundary
        if se == 0 or not math.isfinite(se):
            return 0.0 if distance > 0 else 1.0
        return float(scipy_stats.t.sf(distance / se, df))

    k2 = 2 * len(look.design.looks)
    if v is Verdict.MATCHES:
        return min(1.0, k2 * max(beyond(gap.mean_pct + m - w), beyond(m - w - gap.mean_pct)))
    above = (v is Verdict.WORSE) != higher_is_better  # the gap is positive for this verdict
    by_size = look.tests == "size"
    edge = (m if by_size else 0.0) + w
    return min(1.0, k2 * beyond((gap.mean_pct if above else -gap.mean_pct) - edge))


def holm(p_values: Sequence[float], alpha: float = ALPHA) -> list[bool]:
    """Holm's step-down procedure over a family of tests: which hypotheses are rejected (verdicts
    kept) with the chance of any false one at most α, whatever their dependence. Sorted ascending,
    the j-th smallest (from 0) is kept when it and every smaller one is at most α / (m − j)."""
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    kept = [False] * len(p_values)
    m = len(p_values)
    for j, i in enumerate(order):
        if p_values[i] > alpha / (m - j):
            break
        kept[i] = True
    return kept


def decide(
    gap: PairedGap,
    tol_pct: float = TOL_PCT,
    min_seeds: int = MIN_SEEDS,
    cap: int = SEED_CAP,
    higher_is_better: bool = False,
) -> Verdict:
    """One interval held against ±tol_pct (size), for callers outside the claims (beyond_diloco's
    timing rows): *needs more seeds* below min_seeds, undecided is inconclusive at the cap."""
    if gap.n < min_seeds:
        return Verdict.MORE_SEEDS
    v = verdict_at(gap, tol_pct, "size", higher_is_better)
    if v is not None:
        return v
    return Verdict.INCONCLUSIVE if gap.n >= cap else Verdict.MORE_SEEDS


def false_verdict_rate(
    true_gap: float,
    sd: float,
    design: Design,
    margin_pct: float,
    tests: str,
    false: Sequence[Verdict],
    trials: int = 20000,
    seed: int = 0,
) -> float:
    """Monte-Carlo: the share of null experiments (per-seed gaps drawn from N(true_gap, sd), as many
    as the last look needs) whose sequence ends on one of the `false` verdicts."""
    import numpy as np

    rng = np.random.default_rng(seed)
    draws = rng.normal(true_gap, sd, size=(trials, design.looks[-1]))
    bad = 0
    for row in draws:
        look = sequential(dict(enumerate(row.tolist())), design, margin_pct, tests)
        bad += look.verdict in false
    return bad / trials


def rule_text(design: Design = DEFAULT_DESIGN) -> str:
    """The rule, as the report states it before any result."""
    return (
        "Every comparison of two methods pairs their runs by seed (same initialisation and data order) and "
        "reports the mean per-seed relative gap with its interval (Student's t). *Stopping rule*: a claim is "
        f"looked at only at its planned numbers of paired seeds — by default {design.describe()}; a claim "
        "may plan a single fixed n instead (its look is listed). Splitting α over the planned looks "
        f"(Bonferroni) keeps the chance of any false verdict at most α = {design.alpha:g} per claim "
        f"({design.alpha / 2:g} in each direction) whatever the looks do; the seeds are read in order, the "
        "first look that decides ends it, seeds beyond the last look are not read. *Sign*: whether the "
        "interval excludes 0. *Size*: the interval against a margin ±m computed per metric from the runs "
        "(the claims table says how and gives m). A claim says which the paper makes: `size` — *matches* "
        "inside ±m, *worse* / *better* wholly beyond it; `sign` — *worse* / *better* when the interval "
        "excludes 0, else *matches* inside ±m. Undecided is *needs more seeds* before the last planned "
        "look and *inconclusive* at it (for a loss or a time higher is worse)."
    )
