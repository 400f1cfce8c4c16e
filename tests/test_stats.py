"""The report's verdict rule (analysis/stats.py) on exact numbers and on synthetic runs: paired by
seed, a 95 % Student-t interval of the mean relative gap, matches / worse / better inside or beyond
±2 %, more seeds below 5 or while undecided, inconclusive only at the seed cap."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from analysis.load import Run
from analysis.report import Group, compare, final_loss
from analysis.stats import MIN_SEEDS, SEED_CAP, TOL_PCT, Verdict, decide, paired_gap


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


def test_constants_are_the_issue_rule():
    assert (TOL_PCT, MIN_SEEDS) == (2.0, 5) and SEED_CAP >= MIN_SEEDS


def synthetic_run(method: str, seed: int, final: float, steps: int = 50) -> Run:
    """A run whose training loss decays to `final` (the report's final loss: the last 10 % of steps)."""
    step = np.arange(1, steps + 1)
    loss = final + 3.0 * np.exp(-step / 8.0)
    loss[-max(1, steps // 10) :] = final
    metrics = pd.DataFrame({"step": step, "train_loss": loss, "samples": step * 16})
    config = {"method": {"name": method}, "seed": seed, "world_size": 2, "train": {"steps": steps, "accum": 1}}
    summary = {"method": method, "world_size": 2, "status": "completed"}
    return Run(f"/nonexistent/{method}_{seed}", "synthetic", "cpu", f"{method}_seed={seed}", config, summary, metrics)


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
        json.dump(run.summary, f)
    run.metrics().to_csv(os.path.join(folder, "metrics.csv"), index=False)


def test_lr_sweep_gives_each_rate_its_verdict_and_draws_it(tmp_path):
    """analysis/lr_sweep.py on run folders: ACCO equal to DDP at the small rate (matches), 10 %
    behind at the large one (worse), DDP's seed spread per rate, both panels written."""
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
    assert rows[0]["ddp_spread_pct"] == pytest.approx(100 * (2.1 - 1.95) / np.mean(ddp))
    fig = lr_sweep.figure(str(tmp_path), "cpu", save=True)
    assert fig.saved_paths and all(os.path.getsize(p) > 1000 for p in fig.saved_paths)
