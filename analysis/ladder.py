"""fig10's budget ladder: DPU with 1 against 2 accumulation steps at several budgets in samples.

One rung per `train.samples` among the experiment's runs; at each, the same paired comparisons the
claims make (analysis/claims.py, by the rule of analysis/stats.py with the experiment's fixed n): the
final-loss gap and the early-loss gap of accum 2 against accum 1 (the paper's sentence read literally:
the arm with two accumulation steps is A), and how much of the training set the
rung reads (`epochs`: samples over the training blocks, from the data the runs were made from), so a
rung that re-reads data says so."""

from __future__ import annotations

import math

from analysis.claims import Claim, ClaimOutcome, evaluate, identity
from analysis.load import Run, discover_runs
from analysis.measures import final_loss
from analysis.stats import Verdict

EXP = "fig10"
LOOKS = (3,)  # the fixed n stated in conf/experiment/fig10/cpu.yaml


def budget_of(run: Run) -> int | None:
    s = identity(run.info, run.config).get("samples")
    return int(s) if s is not None else None


def _claim(metric: str, samples: int, expect: Verdict) -> Claim:
    return Claim(
        exp=EXP,
        name=f"accum 2 vs 1 at {samples} samples ({metric})",
        paper="",
        a={"method": "dpu", "accum": 2, "samples": samples},
        b={"method": "dpu", "accum": 1, "samples": samples},
        metric=metric,
        expect=expect,
        tests="sign",
        looks=LOOKS,
    )


def train_blocks(run: Run) -> float:
    """The training set's samples (packed blocks) of the run's data; nan where it cannot be rebuilt."""
    try:
        from omegaconf import OmegaConf

        from acco.tasks.lm import prepare_lm_data

        return float(prepare_lm_data(OmegaConf.create(run.config["data"])).train_blocks.shape[0])
    except Exception:  # a config this code cannot rebuild: the epochs stay unknown, the report says so
        return math.nan


def rungs(root: str, scale: str = "cpu") -> list[dict]:
    """One row per budget: samples, epochs read, the final and early Outcomes (accum 1 vs accum 2),
    and each arm's mean final loss."""
    runs = discover_runs(root, EXP, scale)
    budgets = sorted({b for b in (budget_of(r) for r in runs) if b is not None})
    blocks = train_blocks(runs[0]) if runs else math.nan
    out = []
    for samples in budgets:
        at = [r for r in runs if budget_of(r) == samples]
        final: ClaimOutcome = evaluate(_claim("final_loss", samples, Verdict.WORSE), at)
        early: ClaimOutcome = evaluate(_claim("early_loss", samples, Verdict.BETTER), at)
        arms = {a: [final_loss(r) for r in at if r.info.get("accum") == a] for a in (1, 2)}
        out.append(
            {
                "samples": samples,
                "epochs": samples / blocks if blocks == blocks else math.nan,
                "final": final,
                "early": early,
                "final_1": sum(arms[1]) / len(arms[1]) if arms[1] else math.nan,
                "final_2": sum(arms[2]) / len(arms[2]) if arms[2] else math.nan,
            }
        )
    return out
