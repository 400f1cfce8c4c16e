"""The paper's claims as data: each experiment lists them (conf/experiment_info/<id>.yaml, `claims:`),
and this module tests them on a results folder by the rule of analysis/stats.py.

A claim compares two groups of runs of one experiment, A and B, on one per-run number, paired by
seed, and says which verdict the paper implies:

    claims:
    - name: ACCO matches DDP
      paper: same training curve (Fig. 5a)
      a: {method: acco, steps: min}     # run identity keys of analysis/load.py run_info
      b: {method: ddp, steps: min}      # min / max / 2nd: that value among the experiment's runs
      metric: final_loss                # a key of METRICS
      expect: matches                   # matches / worse / better (A against B)
      question: dynamics                # or wall-clock: which of the two questions it answers
      if_not_reproduced: ...            # optional: the report's reading when the verdict differs

`evaluate(...)` gives the verdict with the paired gap, the report's first table lists every claim,
and experiments/reproduce.py asks `seeds_wanted(...)` which groups need more seeds (up to the cap)."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from analysis.load import Run
from analysis.stats import MIN_SEEDS, SEED_CAP, PairedGap, Verdict, decide, paired_gap
from analysis.tables import SMOOTH_STEPS, TARGET_COLUMN, loss_curve, time_to_loss

TAIL = 0.1  # "final loss" = mean training loss over the last 10 % of steps (less noise)
EARLY = 0.25  # "early loss" = the loss where a quarter of the samples has been seen
SEED_BATCH = 2  # seeds added per pass beyond MIN_SEEDS, while a claim is undecided


# -- per-run numbers --------------------------------------------------------------------------------
def final_loss(run: Run) -> float:
    m = run.metrics().dropna(subset=["train_loss"]).sort_values("step")
    if m.empty:
        return float("nan")
    k = max(1, int(round(len(m) * TAIL)))
    return float(m["train_loss"].tail(k).mean())


def loss_at_fraction(run: Run, frac: float, x: str = "samples") -> float:
    """Training loss (mean of a 5-step window) where `x` first reaches `frac` of its final value."""
    m = run.metrics().dropna(subset=["train_loss"]).sort_values("step").reset_index(drop=True)
    if m.empty:
        return float("nan")
    i = int(np.searchsorted(m[x].to_numpy(float), frac * float(m[x].iloc[-1])))
    return float(m["train_loss"].iloc[max(0, i - 2) : i + 3].mean())


def early_loss(run: Run) -> float:
    return loss_at_fraction(run, EARLY)


def samples_per_s(run: Run) -> float:
    s = run.summary
    return float(s.get("samples") or 0) / float(s.get("total_wall_time_s") or np.nan)


def wall_time(run: Run) -> float:
    return float(run.summary.get("total_wall_time_s") or np.nan)


def final_eval_loss(run: Run) -> float:
    m = run.metrics().dropna(subset=["eval_loss"]).sort_values("step")
    return float(m["eval_loss"].iloc[-1]) if len(m) else float("nan")


def heldout_ppl(run: Run) -> float:
    return float(((run.summary.get("final_eval") or {}).get("heldout") or {}).get("perplexity") or np.nan)


def time_to(run: Run, target: float, column: str) -> float:
    """Wall-clock seconds until the run's loss (see loss_curve) is first at or below `target`."""
    return time_to_loss(*loss_curve(run, column), target)


@dataclass(frozen=True)
class Metric:
    label: str
    fn: Callable[[Run], float] | None  # None: a paired metric (see paired_values)
    higher_is_better: bool = False


METRICS: dict[str, Metric] = {
    "final_loss": Metric(f"final training loss (mean of the last {TAIL:.0%} of steps)", final_loss),
    "early_loss": Metric(f"training loss at {EARLY:.0%} of the samples", early_loss),
    "final_eval_loss": Metric("final validation loss", final_eval_loss),
    "heldout_ppl": Metric("held-out perplexity (final evaluation)", heldout_ppl),
    "wall_time": Metric("wall-clock seconds for the run", wall_time),
    "samples_per_s": Metric("samples per second", samples_per_s, higher_is_better=True),
    # per seed, the target is the worse of the pair's final losses, which both runs reach
    "time_to_target": Metric(f"wall-clock seconds to the pair's common training loss ({SMOOTH_STEPS}-step mean)", None),
    "time_to_eval_target": Metric("wall-clock seconds to the pair's common validation loss", None),
}


def paired_values(metric: str, a: Mapping[int, Run], b: Mapping[int, Run]) -> tuple[dict, dict]:
    """seed -> number for each side (a paired metric needs both runs of a seed to compute either)."""
    m = METRICS[metric]
    if m.fn is not None:
        return {s: m.fn(r) for s, r in a.items()}, {s: m.fn(r) for s, r in b.items()}
    column = TARGET_COLUMN[metric]
    va, vb = {}, {}
    for s in sorted(set(a) & set(b)):
        ends = [loss_curve(r, column)[1] for r in (a[s], b[s])]
        target = max(float(e[-1]) for e in ends) if all(len(e) for e in ends) else math.nan
        va[s], vb[s] = time_to(a[s], target, column), time_to(b[s], target, column)
    return va, vb


# -- selecting runs ---------------------------------------------------------------------------------
ORDINALS = {"min": 0, "2nd": 1, "max": -1}


def _sort_key(v) -> tuple:
    return (0, v, "") if isinstance(v, (int, float)) else (1, 0, str(v))


def resolve(selector: Mapping, infos: Iterable[Mapping]) -> dict:
    """The selector with min / 2nd / max replaced by that value among the infos (the experiment's
    runs at this scale: fig5's smallest step budget, DPU's second warmup, fig8's one-node layout)."""
    infos = list(infos)
    out = {}
    for key, want in selector.items():
        if isinstance(want, str) and want in ORDINALS:
            fixed = {k: v for k, v in selector.items() if k != key and v not in ORDINALS}
            pool = [i for i in infos if selected(i, fixed)]
            values = sorted({i.get(key) for i in pool if i.get(key) is not None}, key=_sort_key)
            index = ORDINALS[want]
            want = values[index] if len(values) > (index if index >= 0 else -index - 1) else None
        out[key] = want
    return out


def selected(info: Mapping, selector: Mapping) -> bool:
    return all(info.get(k) == v for k, v in selector.items())


def by_seed(runs: Iterable[Run], label: str) -> dict[int, Run]:
    out: dict[int, Run] = {}
    for run in runs:
        seed = run.info.get("seed")
        seed = int(seed) if seed is not None else -1
        if seed in out:
            raise ValueError(f"{label}: two runs with seed {seed}")
        out[seed] = run
    return out


# -- claims -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Claim:
    exp: str
    name: str
    paper: str
    a: dict
    b: dict
    metric: str
    expect: Verdict
    question: str = "dynamics"
    # what the report adds when the verdict is not the paper's: what differs at this scale and why
    # (a reading of the runs, written after them; the verdict itself follows the rule alone)
    if_not_reproduced: str = ""

    @classmethod
    def from_config(cls, exp: str, raw: Mapping) -> Claim:
        metric = str(raw["metric"])
        if metric not in METRICS:
            known = ", ".join(METRICS)
            raise ValueError(f"{exp}: claim {raw.get('name')!r} has unknown metric {metric!r} (one of {known})")
        return cls(
            exp=exp,
            name=str(raw["name"]),
            paper=str(raw.get("paper", "")),
            a=dict(raw["a"]),
            b=dict(raw["b"]),
            metric=metric,
            expect=Verdict(str(raw["expect"])),
            question=str(raw.get("question") or "dynamics"),
            if_not_reproduced=str(raw.get("if_not_reproduced") or ""),
        )


@dataclass(frozen=True)
class Outcome:
    claim: Claim
    verdict: Verdict | None  # None: one side has no completed runs
    gap: PairedGap | None
    values_a: dict[int, float]  # seed -> the claim's number, for each side's runs
    values_b: dict[int, float]

    @property
    def mean_a(self) -> float:
        return _mean(self.values_a)

    @property
    def mean_b(self) -> float:
        return _mean(self.values_b)

    @property
    def spread_b_pct(self) -> float:
        """B's seed-to-seed spread, (max − min) / mean in percent (DDP's, where B is the baseline)."""
        v = [x for x in self.values_b.values() if math.isfinite(x)]
        return 100.0 * (max(v) - min(v)) / _mean(self.values_b) if len(v) > 1 else math.nan

    @property
    def reproduced(self) -> bool | None:
        """True / False once decided; None while more seeds are needed or runs are missing."""
        if self.verdict is None or self.verdict is Verdict.MORE_SEEDS:
            return None
        return self.verdict is self.claim.expect


def claims_of(block: Mapping) -> list[Claim]:
    """The claims of a composed experiment block (experiment_block(id, scale))."""
    return [Claim.from_config(str(block.get("id")), raw) for raw in block.get("claims") or []]


def evaluate(claim: Claim, runs: list[Run]) -> Outcome:
    """The claim tested on the experiment's completed runs at one scale."""
    infos = [r.info for r in runs]
    sa, sb = resolve(claim.a, infos), resolve(claim.b, infos)
    ga = by_seed([r for r in runs if selected(r.info, sa)], f"{claim.exp} {claim.name} (A)")
    gb = by_seed([r for r in runs if selected(r.info, sb)], f"{claim.exp} {claim.name} (B)")
    if not ga or not gb:
        return Outcome(claim, None, None, {}, {})
    va, vb = paired_values(claim.metric, ga, gb)
    gap = paired_gap(va, vb)
    return Outcome(claim, decide(gap, higher_is_better=METRICS[claim.metric].higher_is_better), gap, va, vb)


def _mean(values: Mapping[int, float]) -> float:
    v = [x for x in values.values() if math.isfinite(x)]
    return float(np.mean(v)) if v else math.nan


def seeds_wanted(outcome: Outcome, cap: int = SEED_CAP) -> int:
    """How many paired seeds the claim's groups should have next: MIN_SEEDS first, then SEED_BATCH
    more per pass while undecided, never beyond the cap; 0 once decided (or with a side missing)."""
    if outcome.verdict is not Verdict.MORE_SEEDS or outcome.gap is None:
        return 0
    n = outcome.gap.n
    want = min(cap, MIN_SEEDS if n < MIN_SEEDS else n + SEED_BATCH)
    return want if want > n else 0
