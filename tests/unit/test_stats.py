"""The report's verdict rule (analysis/stats.py) on exact numbers and on synthetic runs: paired by
seed, a Student-t interval of the mean relative gap; the stopping rule (planned looks, α split over
them) keeps its false-verdict rate at the nominal level in simulated null experiments, where looking
after every addition of seeds without correction does not; sign and size are decided apart."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from acco.runtime.summary import RunSummary
from analysis.comparisons import Group, compare
from analysis.load import Run
from analysis.measures import final_loss
from analysis.stats import (
    ALPHA,
    DEFAULT_DESIGN,
    LOOKS,
    MIN_SEEDS,
    SEED_CAP,
    TOL_PCT,
    Design,
    Sign,
    Size,
    Verdict,
    decide,
    false_verdict_rate,
    paired_gap,
    sequential,
    verdict_at,
)


def test_interval_is_students_t_on_the_paired_gaps():
    a = {0: 1.01, 1: 1.02, 2: 1.03}
    b = {0: 1.0, 1: 1.0, 2: 1.0, 7: 5.0}  # seed 7 has no partner: left out
    gap = paired_gap(a, b)
    assert gap.seeds == (0, 1, 2)
    assert gap.mean_pct == pytest.approx(2.0)
    # gaps 1, 2, 3 %: sd 1, t(0.975, 2) = 4.302653
    half = 4.302653 / math.sqrt(3)
    assert (gap.lo_pct, gap.hi_pct) == (pytest.approx(2.0 - half, abs=1e-5), pytest.approx(2.0 + half, abs=1e-5))


def test_pairing_is_by_seed_not_by_order():
    a = {3: 2.0, 1: 1.1}
    b = {1: 1.0, 3: 2.0}
    assert paired_gap(a, b).gaps_pct == (pytest.approx(10.0), 0.0)


def gaps(*pct: float) -> tuple[dict[int, float], dict[int, float]]:
    return {s: 1.0 + p / 100 for s, p in enumerate(pct)}, {s: 1.0 for s in range(len(pct))}


@pytest.mark.parametrize(
    "pct,expected",
    [
        ((0.5, -0.3, 0.2, 0.8, -0.1), Verdict.MATCHES),
        ((9.0, 11.0, 10.0, 12.0, 8.0), Verdict.WORSE),
        ((-9.0, -11.0, -10.0, -12.0, -8.0), Verdict.BETTER),
        ((0.5, -0.3, 0.2), Verdict.MORE_SEEDS),  # too few seeds, however tight
        ((3.0, -4.0, 5.0, -2.0, 1.0, 6.0), Verdict.MORE_SEEDS),  # undecided below the cap
        ((3.0, -4.0, 5.0, -2.0, 1.0, 6.0, -5.0, 4.0, -3.0, 2.0), Verdict.INCONCLUSIVE),  # undecided at the cap
        ((1.5, 2.5, 2.0, 3.0, 1.0), Verdict.MORE_SEEDS),  # straddles +2 %: neither matches nor worse
    ],
)
def test_rule(pct, expected):
    assert decide(paired_gap(*gaps(*pct))) is expected


def test_speed_is_better_when_higher():
    gap = paired_gap(*gaps(20.0, 22.0, 19.0, 21.0, 20.0))
    assert decide(gap, higher_is_better=True) is Verdict.BETTER
    assert decide(gap) is Verdict.WORSE


def test_constants_are_the_stated_rule():
    assert (ALPHA, LOOKS, MIN_SEEDS, SEED_CAP) == (0.05, (5, 10), 5, 10)
    assert Design().confidence == pytest.approx(0.975)  # α split over the two planned looks
    assert Design((3,)).confidence == pytest.approx(0.95)  # a fixed n: one look, the whole α
    assert Design((5, 7, 9, 10), split=False).confidence == pytest.approx(0.95)


def test_a_design_refuses_looks_that_are_not_increasing_seeds():
    for bad in ((), (1,), (5, 5), (10, 5)):
        with pytest.raises(ValueError, match="looks must be increasing"):
            Design(bad)


# -- the stopping rule's error rate, simulated --------------------------------------------------------
TRIALS = 6000  # Monte-Carlo standard error at 5 %: 0.28 %; at 2.5 %: 0.20 %
SD = 2.0  # per-seed gaps' spread (%); the margin below is half of it (the hard case for equivalence)
MARGIN = 1.0
FALSE_SIGN = (Verdict.WORSE, Verdict.BETTER)
ANY = (Verdict.WORSE, Verdict.BETTER, Verdict.MATCHES)
OLD_RULE = Design((5, 7, 9, 10), split=False)  # the reproduction's former rule: a look after every addition


def bound(p: float) -> float:
    """The nominal level plus three Monte-Carlo standard errors."""
    return p + 3 * math.sqrt(p * (1 - p) / TRIALS)


def test_sign_claims_at_a_true_gap_of_zero_keep_alpha_with_looks_included():
    """Null: the methods are equal. A sign verdict (worse or better) is false; the two-look rule
    gives one at most α of the time, each direction at most α/2."""
    rate = false_verdict_rate(0.0, SD, Design(), MARGIN, "sign", FALSE_SIGN, TRIALS)
    assert rate <= bound(ALPHA)
    worse = false_verdict_rate(0.0, SD, Design(), MARGIN, "sign", (Verdict.WORSE,), TRIALS, seed=1)
    assert worse <= bound(ALPHA / 2)


def test_the_old_rule_of_looking_after_every_addition_exceeds_alpha():
    """The same null with looks at 5, 7, 9, 10 seeds, each at 95 %: well above α (so the test above
    can fail: the rule, not the simulation, keeps the rate down)."""
    rate = false_verdict_rate(0.0, SD, OLD_RULE, MARGIN, "sign", FALSE_SIGN, TRIALS)
    assert rate > bound(ALPHA)


def test_size_claims_at_a_true_gap_on_the_margin_keep_alpha():
    """Null for a size: the true gap is exactly +m. *matches* (inside ±m) and *worse* (beyond +m)
    are both false there; the rule gives either at most α/2 of the time each, α together."""
    for true in (MARGIN, -MARGIN):
        rate = false_verdict_rate(true, SD, Design(), MARGIN, "size", ANY, TRIALS, seed=2)
        assert rate <= bound(ALPHA)
        matches = false_verdict_rate(true, SD, Design(), MARGIN, "size", (Verdict.MATCHES,), TRIALS, seed=3)
        assert matches <= bound(ALPHA / 2)
    assert false_verdict_rate(MARGIN, SD, OLD_RULE, MARGIN, "size", ANY, TRIALS, seed=2) > bound(ALPHA)


def test_equivalence_of_a_sign_claim_at_the_margin_keeps_alpha_half():
    """A sign claim falls back on *matches* inside ±m: false where the true gap is on the margin."""
    rate = false_verdict_rate(MARGIN, SD, Design(), MARGIN, "sign", (Verdict.MATCHES,), TRIALS, seed=4)
    assert rate <= bound(ALPHA / 2)


def test_a_fixed_n_design_keeps_alpha():
    rate = false_verdict_rate(0.0, SD, Design((3,)), MARGIN, "sign", FALSE_SIGN, TRIALS, seed=5)
    assert rate <= bound(ALPHA)


# -- the sequence on exact numbers ----------------------------------------------------------------------
def seq(*pct: float, design: Design = DEFAULT_DESIGN, margin: float = 2.0, tests: str = "size"):
    return sequential(dict(enumerate(pct)), design, margin, tests)


def test_the_sequence_stops_at_the_first_look_that_decides():
    clear = (9.0, 11.0, 10.0, 12.0, 8.0, 30.0, -30.0)  # seeds past look 1 are not read once it decides
    look = seq(*clear)
    assert look.verdict is Verdict.WORSE and look.index == 1 and look.gap.n == 5
    assert look.next_n == 0 and look.describe_look() == "look 1 of 2 (n = 5)"


def test_undecided_at_the_first_look_asks_for_the_next_and_is_inconclusive_at_the_last():
    wobbly = (3.0, -4.0, 5.0, -2.0, 1.0, 6.0, -5.0, 4.0, -3.0, 2.0, 50.0)
    early = seq(*wobbly[:6])
    assert early.verdict is Verdict.MORE_SEEDS and early.index == 1 and early.next_n == 10
    assert early.gap.n == 5  # the interval shown is look 1's: the 6th seed is not looked at before n = 10
    last = seq(*wobbly)
    assert last.verdict is Verdict.INCONCLUSIVE and last.index == 2 and last.gap.n == 10  # the 11th unread
    few = seq(0.1, 0.2)
    assert few.verdict is Verdict.MORE_SEEDS and few.index == 0 and few.next_n == 5


def test_the_looks_interval_is_wider_than_a_single_95_percent_one():
    pct = (1.5, 2.5, 2.0, 3.0, 1.0)
    one = paired_gap(*gaps(*pct))
    look = seq(*pct)
    assert look.gap.lo_pct < one.lo_pct and look.gap.hi_pct > one.hi_pct and look.gap.confidence == 0.975


def test_sign_and_size_are_decided_apart():
    """+1 % on every seed with a 2 % margin: the sign says A is above B, the size says it is within
    the margin; a sign claim reads *worse*, a size claim *matches*."""
    pct = (0.9, 1.1, 1.0, 1.05, 0.95)
    size, sign = seq(*pct, tests="size"), seq(*pct, tests="sign")
    assert size.sign is Sign.ABOVE and size.size is Size.WITHIN
    assert size.verdict is Verdict.MATCHES and sign.verdict is Verdict.WORSE
    # a gap that straddles 0 inside the margin: a sign claim falls back on *matches*
    assert seq(0.3, -0.2, 0.1, -0.1, 0.0, tests="sign").verdict is Verdict.MATCHES
    # beyond the margin both agree
    big = (9.0, 11.0, 10.0, 12.0, 8.0)
    assert seq(*big, tests="sign").verdict is seq(*big, tests="size").verdict is Verdict.WORSE


def test_a_margin_can_be_computed_from_the_looks_seeds():
    seen = []

    def margin(seeds):
        seen.append(seeds)
        return 20.0

    look = sequential({s: 10.0 + s % 2 for s in range(7)}, Design(), margin, "size")
    assert look.verdict is Verdict.MATCHES and look.margin_pct == 20.0 and seen == [(0, 1, 2, 3, 4)]


def test_verdict_at_refuses_an_unknown_kind():
    with pytest.raises(ValueError, match="tests must be one of"):
        verdict_at(paired_gap(*gaps(1.0, 2.0)), 2.0, "magnitude")


def synthetic_run(method: str, seed: int, final: float, steps: int = 50) -> Run:
    """A run whose training loss decays toward `final`, still falling at the end."""
    step = np.arange(1, steps + 1)
    loss = final + 3.0 * np.exp(-step / 15.0)
    metrics = pd.DataFrame({"step": step, "train_loss": loss, "samples": step * 16})
    config = {"method": {"name": method}, "seed": seed, "world_size": 2, "train": {"steps": steps, "accum": 1}}
    summary = RunSummary.from_json({"method": method, "world_size": 2, "status": "completed"})
    return Run(
        f"/nonexistent/{method}_{seed}",
        "synthetic",
        "cpu",
        f"{method}_seed={seed}",
        config,
        summary,
        metrics,
    )


def groups(ddp: list[float], acco: list[float]) -> tuple[Group, Group]:
    return (
        Group("ACCO", [synthetic_run("acco", s, v) for s, v in enumerate(acco)]),
        Group("DDP", [synthetic_run("ddp", s, v) for s, v in enumerate(ddp)]),
    )


def test_synthetic_runs_that_must_come_out_worse():
    acco, ddp = groups([2.0, 2.2, 1.9, 2.1, 2.0], [2.2, 2.42, 2.09, 2.31, 2.2])  # +10 % on every seed
    v, gap = compare(acco, ddp, final_loss)
    assert v is Verdict.WORSE and gap.n == 5 and gap.lo_pct > TOL_PCT


def test_synthetic_runs_that_match():
    acco, ddp = groups([2.0, 2.2, 1.9, 2.1, 2.0], [2.01, 2.19, 1.91, 2.1, 1.99])
    assert compare(acco, ddp, final_loss)[0] is Verdict.MATCHES


def test_synthetic_runs_that_must_come_out_inconclusive():
    ddp = [2.0] * SEED_CAP
    acco = [2.0 * (1 + p / 100) for p in (6, -6, 5, -5, 7, -4, 6, -6, 3, -3)][:SEED_CAP]
    v, gap = compare(*groups(ddp, acco), final_loss)
    assert v is Verdict.INCONCLUSIVE and gap.n == SEED_CAP and gap.lo_pct < -TOL_PCT < TOL_PCT < gap.hi_pct
    # the same spread over fewer seeds asks for more rather than giving up
    v, gap = compare(*groups(ddp[:6], acco[:6]), final_loss)
    assert v is Verdict.MORE_SEEDS


def test_a_repeated_seed_is_refused():
    acco = Group("ACCO", [synthetic_run("acco", 0, 2.0), synthetic_run("acco", 0, 2.1)])
    ddp = Group("DDP", [synthetic_run("ddp", 0, 2.0)])
    with pytest.raises(ValueError, match="two runs with seed 0"):
        compare(acco, ddp, final_loss)


def write_run(root, name: str, method: str, seed: int, lr: float, final: float) -> None:
    """A completed run folder of the lr_sweep experiment, as a run writes it."""
    import json
    import os

    import yaml

    run = synthetic_run(method, seed, final)
    folder = os.path.join(root, "cpu", "lr_sweep", name)
    os.makedirs(folder)
    cfg = {**run.config, "optim": {"lr": lr}, "data": {"micro_batch_size": 8}}
    with open(os.path.join(folder, "config.yaml"), "w") as f:
        yaml.safe_dump(cfg, f)
    with open(os.path.join(folder, "summary.json"), "w") as f:
        json.dump(run.summary.to_json(), f)
    run.metrics().to_csv(os.path.join(folder, "metrics.csv"), index=False)


def test_lr_sweep_gives_each_rate_its_verdict_and_draws_it(tmp_path):
    """analysis/lr_sweep.py on run folders: ACCO equal to DDP at the small rate (matches), 10 %
    behind at the large one (worse), at its fixed n of 3 seeds; DDP's seed spread per rate; fig6's
    rule; both panels written."""
    import os

    from analysis import lr_sweep

    ddp = [2.0, 2.1, 1.95, 2.05, 2.02]
    for seed, d in enumerate(ddp):
        write_run(tmp_path, f"ddp_lr1_{seed}", "ddp", seed, 5e-4, d)
        write_run(tmp_path, f"acco_lr1_{seed}", "acco", seed, 5e-4, d * (1 + (seed - 2) * 0.002))
        write_run(tmp_path, f"ddp_lr2_{seed}", "ddp", seed, 4e-3, d)
        write_run(tmp_path, f"acco_lr2_{seed}", "acco", seed, 4e-3, d * (1.10 + (seed - 2) * 0.005))
    rows = lr_sweep.rows(str(tmp_path), "cpu")
    assert [r["lr"] for r in rows] == [5e-4, 4e-3]
    assert [r["verdict"] for r in rows] == [Verdict.MATCHES, Verdict.WORSE]
    assert all(r["gap"].n == 3 for r in rows)  # the sweep's fixed n: seeds 3 and 4 are not read
    finals = [final_loss(synthetic_run("ddp", s, d)) for s, d in enumerate(ddp)]
    assert rows[0]["ddp_spread_pct"] == pytest.approx(100 * (max(finals) - min(finals)) / np.mean(finals))
    assert lr_sweep.ddp_best_lr(str(tmp_path), "cpu") == 5e-4  # equal DDP runs at both: the first lowest
    fig = lr_sweep.figure(str(tmp_path), "cpu", save=True)
    assert fig.saved_paths and all(os.path.getsize(p) > 1000 for p in fig.saved_paths)


# -- a modelled number's validated error, p-values and Holm's procedure (issue 49) -----------------


def test_a_widened_gap_carries_the_model_error_on_each_end_and_can_lose_its_verdict():
    gaps = {s: -10.0 + 0.5 * (s % 3) for s in range(5)}  # ~-9.6 %, tight: better on its own
    plain = sequential(gaps, Design(looks=(5,)), 2.0, "sign")
    assert plain.verdict is Verdict.BETTER
    widened = sequential(gaps, Design(looks=(5,)), 2.0, "sign", widen_pct=12.0)
    assert widened.gap.lo_pct == pytest.approx(plain.gap.lo_pct - 12.0)
    assert widened.gap.hi_pct == pytest.approx(plain.gap.hi_pct + 12.0)
    assert widened.gap.widen_pct == 12.0 and "±12.0 model error" in widened.gap.describe()
    assert widened.verdict is Verdict.INCONCLUSIVE  # inside the model's own error: no evidence
    # a zero-spread modelled gap (a closed form) is decided only beyond its model error
    exact = {s: -13.0 for s in range(3)}
    assert sequential(exact, Design(looks=(3,)), 1.0, "sign", widen_pct=17.0).verdict is Verdict.INCONCLUSIVE
    assert sequential(exact, Design(looks=(3,)), 1.0, "sign", widen_pct=5.0).verdict is Verdict.BETTER


@pytest.mark.parametrize("tests", ["sign", "size"])
@pytest.mark.parametrize("widen", [0.0, 1.5])
def test_a_verdict_is_taken_exactly_when_its_p_value_is_at_most_alpha(tests, widen):
    """p_value is the α at which the look's verdict just holds: on random gaps, the same rule at
    α = 1.02 p decides, at α = 0.98 p it does not give that verdict; at α = 0.05 a decided look has
    p <= α and an undecided one p = 1 (planned looks at 5 and 10: the factor 2K)."""
    from analysis.stats import p_value

    rng = np.random.default_rng(7)
    decided = 0
    for _ in range(300):
        gaps = dict(enumerate(rng.normal(rng.uniform(-6, 6), rng.uniform(0.3, 4), 10)))
        look = sequential(gaps, DEFAULT_DESIGN, 1.0, tests, widen_pct=widen)
        p = p_value(look)
        if look.verdict in (Verdict.MATCHES, Verdict.BETTER, Verdict.WORSE):
            assert p <= ALPHA + 1e-12, (look, p)
        else:
            assert p == 1.0
        one = sequential(gaps, Design(looks=(10,)), 1.0, tests, widen_pct=widen)
        p1 = p_value(one)
        if one.verdict not in (Verdict.MATCHES, Verdict.BETTER, Verdict.WORSE) or not 1e-9 < p1 < 0.5:
            continue
        decided += 1
        above = sequential(gaps, Design(looks=(10,), alpha=p1 * 1.02), 1.0, tests, widen_pct=widen)
        below = sequential(gaps, Design(looks=(10,), alpha=p1 * 0.98), 1.0, tests, widen_pct=widen)
        assert above.verdict in (Verdict.MATCHES, Verdict.BETTER, Verdict.WORSE), (one, p1)
        assert below.verdict is not one.verdict, (one, p1)
    assert decided > 20  # the random gaps decide often enough for the check to mean something


def test_holm_keeps_the_smallest_p_values_step_down():
    from analysis.stats import holm

    assert holm([0.01, 0.04, 0.03, 0.005]) == [True, False, False, True]  # 0.03 > 0.05 / 2 stops it
    assert holm([0.01, 0.02, 0.03, 0.04], alpha=0.2) == [True, True, True, True]
    assert holm([0.5, 1.0]) == [False, False]
    assert holm([]) == []
    # never fewer than Bonferroni keeps, never more than the unadjusted test
    rng = np.random.default_rng(3)
    for _ in range(200):
        p = list(rng.uniform(0, 0.1, rng.integers(1, 12)))
        kept = holm(p)
        assert all(k for k, x in zip(kept, p) if x <= ALPHA / len(p))
        assert not any(k for k, x in zip(kept, p) if x > ALPHA)


def test_holm_keeps_the_familywise_error_at_alpha_on_null_claims():
    """20 claims whose true gap is 0, each tested by the sign rule at its planned looks: Holm over
    their p-values makes any false verdict rare (at most α), where taking each at α does not."""
    from analysis.stats import holm, p_value

    rng = np.random.default_rng(11)
    any_false_holm = any_false_each = 0
    trials = 400
    for _ in range(trials):
        ps, decided = [], []
        for _ in range(20):
            look = sequential(dict(enumerate(rng.normal(0, 2, 10))), DEFAULT_DESIGN, 0.0, "sign")
            ps.append(p_value(look))
            decided.append(look.verdict in (Verdict.BETTER, Verdict.WORSE))
        any_false_each += any(decided)
        any_false_holm += any(holm(ps))
    assert any_false_each / trials > 0.3  # uncorrected: a false verdict somewhere most of the time
    assert any_false_holm / trials <= ALPHA + 3 * math.sqrt(ALPHA * (1 - ALPHA) / trials)
