"""The paper's claims as data: each experiment lists them (conf/experiment_info/<id>.yaml, `claims:`),
and this module tests them on a results folder by the rule of analysis/stats.py.

A claim compares two groups of runs of one experiment, A and B, on one per-run number, paired by
seed, and says which verdict the paper implies and whether the paper's claim is about the sign or
the size of the gap:

    claims:
    - name: ACCO matches DDP
      paper: same training curve (Fig. 5a)
      a: {method: acco, steps: min}     # run identity keys (identity(): analysis/load.py run_info
      b: {method: ddp, steps: min}      #   plus samples and lr); min / 2nd / max: that value among the runs
      metric: final_loss                # a key of METRICS
      expect: matches                   # matches / worse / better (A against B)
      tests: size                       # size (against the metric's margin) or sign (against 0)
      looks: [5]                        # optional: the planned looks (default analysis/stats.py LOOKS)
      versus: final_loss                # optional: the per-seed gap on `metric` minus the gap on this
                                        #   one ("especially early"; tests: sign)
      question: dynamics                # or wall-clock: which of the two questions it answers
      if_not_reproduced: ...            # optional: the report's reading when the verdict differs

Losses are read at equal samples: for each seed, both runs at the smaller of their two sample
totals (the same point for runs sized alike; an adaptive run's extra samples are not counted).
Each metric has a margin computed from B's runs at the look's seeds (`margin`, with the sentence the
report prints): one standard deviation of B's own seed-to-seed spread of the number, in % of its
mean (a method's effect inside it is smaller than what changing the seed does); for a time or a
speed, of B's seconds per sample (its runs do the same work per seed, so that spread is the clock's
timing noise, not a loss curve's crossing point). A loss curve's own progress near the end of a
cosine schedule was tried first and rejected: the rate is near zero there, so B's gain over its last
10 % of samples is below the batches' noise (it came out negative on the committed fig5 runs).

`evaluate(...)` gives the verdict with the look it was taken at, the report's first table lists every
claim, and experiments/reproduce.py asks `seeds_wanted(...)` for the next planned look's seeds."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from analysis.load import Run, discover_runs
from analysis.measures import (
    EARLY,
    SMOOTH_STEPS,
    TAIL,
    TARGET_COLUMN,
    early_loss,
    end_samples,
    final_eval_loss,
    final_loss,
    heldout_ppl,
    loss_curve,
    samples_per_s,
    seconds_per_sample,
    time_to,
    wall_time,
)
from analysis.modelled import modelled_check
from analysis.stats import (
    LOOKS,
    TESTS,
    Design,
    Look,
    Verdict,
    p_value,
    relative_gaps,
    sequential,
)


# -- margins ------------------------------------------------------------------------------------------
def _mean(values: Iterable[float]) -> float:
    v = [x for x in values if math.isfinite(x)]
    return float(np.mean(v)) if v else math.nan


def _seed_spread(fn: Callable[[Run], float]) -> Callable[[list[Run]], float]:
    """One standard deviation of B's own seed-to-seed variation of the number, in % of its mean."""

    def margin(runs: list[Run]) -> float:
        v = [x for x in (fn(r) for r in runs) if math.isfinite(x)]
        return 100.0 * float(np.std(v, ddof=1) / abs(np.mean(v))) if len(v) > 1 else math.nan

    return margin


_SPREAD_WORDS = (
    "one sd of B's own seed-to-seed spread of this number (a gap inside it is smaller than what a seed changes)"
)
_TIMING_WORDS = (
    "one sd of B's timing noise: the seed-to-seed spread of its seconds per sample (the same work each, "
    "so the clock's spread, not a crossing point's)"
)
_timing_noise = _seed_spread(seconds_per_sample)


@dataclass(frozen=True)
class Metric:
    label: str
    fn: Callable[..., float] | None  # fn(run, upto=None); None: a paired metric (see paired_values)
    margin: Callable[[list[Run]], float]  # from B's runs at the look's seeds, in %
    margin_how: str  # the sentence the report prints for it
    higher_is_better: bool = False
    at_equal_samples: bool = False  # read both runs of a seed at the smaller of their sample totals


METRICS: dict[str, Metric] = {
    "final_loss": Metric(
        f"final training loss (mean over the last {TAIL:.0%} of the samples)",
        final_loss,
        _seed_spread(final_loss),
        _SPREAD_WORDS,
        at_equal_samples=True,
    ),
    "early_loss": Metric(
        f"training loss at {EARLY:.0%} of the samples",
        early_loss,
        _seed_spread(early_loss),
        _SPREAD_WORDS,
        at_equal_samples=True,
    ),
    "final_eval_loss": Metric(
        "final validation loss",
        final_eval_loss,
        _seed_spread(final_eval_loss),
        _SPREAD_WORDS,
        at_equal_samples=True,
    ),
    "heldout_ppl": Metric(
        "held-out perplexity (final evaluation)",
        heldout_ppl,
        _seed_spread(heldout_ppl),
        _SPREAD_WORDS,
    ),
    "wall_time": Metric("wall-clock seconds for the run", wall_time, _timing_noise, _TIMING_WORDS),
    "samples_per_s": Metric("samples per second", samples_per_s, _timing_noise, _TIMING_WORDS, higher_is_better=True),
    # per seed, the target is the worse of the pair's final losses, which both runs reach
    "time_to_target": Metric(
        f"wall-clock seconds to the pair's common training loss ({SMOOTH_STEPS}-step mean)",
        None,
        _timing_noise,
        _TIMING_WORDS,
    ),
    "time_to_eval_target": Metric(
        "wall-clock seconds to the pair's common validation loss", None, _timing_noise, _TIMING_WORDS
    ),
}


def paired_values(metric: str, a: Mapping[int, Run], b: Mapping[int, Run]) -> tuple[dict, dict]:
    """seed -> number for each side (a paired metric needs both runs of a seed to compute either; a
    loss is read at the pair's common samples)."""
    m = METRICS[metric]
    if m.fn is not None and not m.at_equal_samples:
        return {s: m.fn(r) for s, r in a.items()}, {s: m.fn(r) for s, r in b.items()}
    va, vb = {}, {}
    if m.fn is not None:
        for s in sorted(set(a) & set(b)):
            upto = min(end_samples(a[s]), end_samples(b[s]))
            upto_or_end = upto if math.isfinite(upto) else None
            va[s], vb[s] = m.fn(a[s], upto_or_end), m.fn(b[s], upto_or_end)
        return va, vb
    column = TARGET_COLUMN[metric]
    for s in sorted(set(a) & set(b)):
        ends = [loss_curve(r, column)[1] for r in (a[s], b[s])]
        target = max(float(e[-1]) for e in ends) if all(len(e) for e in ends) else math.nan
        va[s], vb[s] = time_to(a[s], target, column), time_to(b[s], target, column)
    return va, vb


# -- selecting runs ---------------------------------------------------------------------------------
ORDINALS = {"min": 0, "2nd": 1, "max": -1}


def identity(info: Mapping, config: Mapping) -> dict:
    """A run's identity for the claims' selectors: analysis/load.py run_info plus its sample budget,
    peak learning rate (fig10's ladder rungs, a rate chosen among several) and clock (real, or the
    virtual clock of issue 31; a run from before the clock existed was real)."""
    train, optim = config.get("train") or {}, config.get("optim") or {}
    clock = (config.get("clock") or {}).get("mode") or "real"
    return {**info, "samples": train.get("samples"), "lr": optim.get("lr"), "clock": clock}


def _sort_key(v) -> tuple:
    return (0, v, "") if isinstance(v, (int, float)) else (1, 0, str(v))


BASELINE_IMPL = "baseline"  # `impl: baseline`: the paper's DDP as the scale runs it (resolve)


def resolve(selector: Mapping, infos: Iterable[Mapping]) -> dict:
    """The selector with min / 2nd / max replaced by that value among the infos (the experiment's
    runs at this scale: fig5's smallest step budget, DPU's second warmup, fig8's one-node layout), and
    `impl: baseline` by the paper's DDP as this scale runs it: the flat engine where the experiment
    has flat DDP runs (the CPU scale, beside a PyTorch DDP arm), else PyTorch's (the paper scale)."""
    infos = list(infos)
    if selector.get("impl") == BASELINE_IMPL:
        impls = {i.get("impl") for i in infos if i.get("method") == selector.get("method")}
        selector = {**selector, "impl": "flat" if "flat" in impls else "torch"}
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


def runs_by_seed(runs: Iterable[Run], label: str) -> dict[int, Run]:
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
    tests: str = "size"  # what the paper claims: the gap's size (against the margin) or its sign
    looks: tuple[int, ...] = LOOKS  # the planned looks (stats.Design)
    versus: str = ""  # a second metric: the claim is on the per-seed gap difference (metric - versus)
    scales: tuple[str, ...] = ()  # the scales whose runs test it (empty: every scale)

    @classmethod
    def from_config(cls, exp: str, raw: Mapping) -> Claim:
        metric = str(raw["metric"])
        name = raw.get("name")
        known = ", ".join(METRICS)
        if metric not in METRICS:
            raise ValueError(f"{exp}: claim {name!r} has unknown metric {metric!r} (one of {known})")
        versus = str(raw.get("versus") or "")
        if versus and versus not in METRICS:
            raise ValueError(f"{exp}: claim {name!r} has unknown versus metric {versus!r} (one of {known})")
        tests = str(raw.get("tests") or "size")
        if tests not in TESTS:
            raise ValueError(f"{exp}: claim {name!r} has tests={tests!r}: one of {', '.join(TESTS)}")
        if versus and tests != "sign":
            raise ValueError(f"{exp}: claim {name!r} compares two gaps (versus): it can only test a sign (tests: sign)")
        looks = tuple(int(n) for n in (raw.get("looks") or LOOKS))
        Design(looks)  # refuses a bad plan here, with the claim's config
        return cls(
            exp=exp,
            name=str(name),
            paper=str(raw.get("paper", "")),
            a=dict(raw["a"]),
            b=dict(raw["b"]),
            metric=metric,
            expect=Verdict(str(raw["expect"])),
            question=str(raw.get("question") or "dynamics"),
            if_not_reproduced=str(raw.get("if_not_reproduced") or ""),
            tests=tests,
            looks=looks,
            versus=versus,
            scales=tuple(str(s) for s in raw.get("scales") or ()),
        )

    @property
    def design(self) -> Design:
        return Design(self.looks)

    def margin_how(self) -> str:
        if self.versus:
            return "none: a difference of two gaps, its sign only"
        return METRICS[self.metric].margin_how


@dataclass(frozen=True)
class ClaimOutcome:
    claim: Claim
    verdict: Verdict | None  # None: one side has no completed runs
    look: Look | None
    values_a: dict[int, float]  # seed -> the claim's number, for each side's runs
    values_b: dict[int, float]

    @property
    def gap(self):
        """The interval at the look the verdict was taken at (stats.PairedGap)."""
        return None if self.look is None else self.look.gap

    @property
    def mean_a(self) -> float:
        return _mean(self.values_a.values())

    @property
    def mean_b(self) -> float:
        return _mean(self.values_b.values())

    # a modelled claim outside the clock's validated range: why (analysis/modelled.py); its verdict
    # is then Verdict.UNVALIDATED, the look kept for the numbers
    unvalidated: str = ""

    @property
    def reproduced(self) -> bool | None:
        """True / False once decided; None while more seeds are needed, runs are missing, or the
        claim is outside what its model was validated on."""
        if self.verdict is None or self.verdict in (Verdict.MORE_SEEDS, Verdict.UNVALIDATED):
            return None
        return self.verdict is self.claim.expect

    @property
    def p_value(self) -> float:
        """The smallest α at which the verdict holds (analysis/stats.py p_value; 1.0 undecided)."""
        if self.look is None or self.verdict in (None, Verdict.UNVALIDATED):
            return 1.0
        return p_value(self.look, METRICS[self.claim.metric].higher_is_better)


def claims_of(block: Mapping, scale: str) -> list[Claim]:
    """The claims of a composed experiment block (experiment_block(id, scale)) that its runs at this
    scale test (a claim's `scales`: the virtual clock's claims are the CPU scale's)."""
    claims = [Claim.from_config(str(block.get("id")), raw) for raw in block.get("claims") or []]
    return [c for c in claims if not c.scales or scale in c.scales]


def claim_clock(claim: Claim) -> str:
    """The clock whose runs the claim reads: its groups' `clock` (virtual for issue 31's claims), else
    real, so that measured and modelled times never pair."""
    return str(claim.a.get("clock") or claim.b.get("clock") or "real")


def runs_for(claims: Iterable[Claim], root: str, exp: str, scale: str) -> dict[str, list[Run]]:
    """The experiment's runs at this scale on each clock the claims read (claim_clock)."""
    return {clock: discover_runs(root, exp, scale, clock=clock) for clock in {claim_clock(c) for c in claims}}


def evaluate(claim: Claim, runs: list[Run]) -> ClaimOutcome:
    """The claim tested on the experiment's completed runs at one scale, by the stopping rule."""
    ids = [identity(r.info, r.config) for r in runs]
    sa, sb = resolve(claim.a, ids), resolve(claim.b, ids)
    ga = runs_by_seed([r for r, i in zip(runs, ids) if selected(i, sa)], f"{claim.exp} {claim.name} (A)")
    gb = runs_by_seed([r for r, i in zip(runs, ids) if selected(i, sb)], f"{claim.exp} {claim.name} (B)")
    if not ga or not gb:
        return ClaimOutcome(claim, None, None, {}, {})
    va, vb = paired_values(claim.metric, ga, gb)
    gaps = relative_gaps(va, vb)
    if claim.versus:
        wa, wb = paired_values(claim.versus, ga, gb)
        second = relative_gaps(wa, wb)
        gaps = {s: g - second[s] for s, g in gaps.items() if s in second}
        margin: float | Callable = math.nan
    else:
        fn = METRICS[claim.metric].margin

        def margin(seeds: tuple[int, ...]) -> float:
            return fn([gb[s] for s in seeds if s in gb])

    widen, outside = 0.0, ""
    if claim_clock(claim) == "virtual":  # modelled: the clock's validated error, or no verdict
        widen, outside = modelled_check(list(ga.values()), list(gb.values()))
    look = sequential(
        gaps, claim.design, margin, claim.tests, METRICS[claim.metric].higher_is_better, 0.0 if outside else widen
    )
    if outside:
        return ClaimOutcome(claim, Verdict.UNVALIDATED, look, va, vb, outside)
    return ClaimOutcome(claim, look.verdict, look, va, vb)


def seeds_wanted(outcome: ClaimOutcome) -> int:
    """How many paired seeds the claim's groups should have next: the next planned look's n while
    undecided, 0 once decided (or at its last look, or with a side missing)."""
    if outcome.look is None or outcome.verdict is Verdict.UNVALIDATED:
        return 0
    return outcome.look.next_n
