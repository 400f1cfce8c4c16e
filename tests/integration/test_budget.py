"""Budgets in samples or tokens (issue 11, defect 8): every method stops at the first committed
step whose global sample count reaches the budget, on every rank alike, adaptive ACCO included;
the learning-rate schedule runs over samples; budget runs match the single-process reference and
resume exactly from a checkpoint."""

from __future__ import annotations

import csv
import math
import os

import pytest
import torch

from acco.engine.schedule import make_lr_schedule
from acco.train.reference import replay
from tests.helpers.runs import SMALL_LM, load_run, run_train

LR, WARMUP = 2e-3, 1
BASE = [
    *SMALL_LM,
    "world_size=2",
    "train.steps=null",
    "train.trace=false",
    f"optim.lr={LR}",
    "optim.schedule=cosine",
    f"optim.warmup_steps={WARMUP}",
]
# every configuration below commits 16 samples per step when each round has exactly `accum`
# micro-batches: 2 ranks x micro-batch 4 x (accum 2, or ACCO's 2 rounds of accum 1)
NOMINAL = 16
B = 80  # 5 nominal steps
RUNS = {
    "ddp-torch": ["method=ddp", "method.impl=torch", "train.accum=2", "train.deterministic=true"],
    # a budget in tokens: 2560 tokens = 80 samples of 32 tokens
    "ddp-flat": ["method=ddp", "method.impl=flat", "train.accum=2", "train.deterministic=true", "train.tokens=2560"],
    # not a multiple of the step's samples: 88 is reached by the 6th step (96)
    "dpu": ["method=dpu", "method.warmup_steps=1", "train.accum=2", "train.deterministic=true", "train.samples=88"],
    "wp": ["method=wp", "train.accum=2", "train.deterministic=true"],
    "acco": ["method=acco", "train.accum=1", "train.deterministic=true", "train.save_final_params=true"],
    # one rank 3x slower: the fast one accumulates more while the sync waits, so steps hold
    # varying sample counts, and the stop must still come at the same step on both ranks
    "acco-adaptive": [
        "method=acco",
        "train.accum=1",
        "train.deterministic=false",
        "hetero.slow_rank=1",
        "hetero.factor=3",
    ],
}


def budget_of(args: list[str]) -> int:
    for a in args:
        if a.startswith("train.samples="):
            return int(a.split("=")[1])
        if a.startswith("train.tokens="):
            return int(a.split("=")[1]) // 32
    return B


def rows_of(out: str) -> list[dict]:
    with open(os.path.join(out, "metrics.csv")) as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")  # its runs are shared: the tests using it share one xdist worker
def budget_runs(tmp_path_factory):
    made = {}

    def get(name):
        if name not in made:
            out = str(tmp_path_factory.mktemp("budget") / name)
            args = RUNS[name]
            if not any(a.startswith(("train.samples=", "train.tokens=")) for a in args):
                args = [*args, f"train.samples={B}"]
            run_train([*BASE, *args, f"out_dir={out}"])
            made[name] = out
        return made[name]

    return get


def cosine_at(position: float, total: float) -> float:
    """HF's cosine schedule with warmup, at a position in (fractional) nominal steps."""
    if position < WARMUP:
        return LR * (position + 1) / WARMUP
    progress = min(1.0, (position - WARMUP) / max(1, total - WARMUP))
    return LR * 0.5 * (1.0 + math.cos(math.pi * progress))


@pytest.mark.integration
@pytest.mark.parametrize("name", list(RUNS))
@pytest.mark.xdist_group("budget")
def test_every_method_stops_at_the_first_step_reaching_the_budget(budget_runs, name):
    out = budget_runs(name)
    budget = budget_of(RUNS[name])
    run = load_run(out)
    summary, rows = run["summary"], rows_of(out)
    assert summary["status"] == "completed", summary.get("error")
    samples = [int(r["samples"]) for r in rows]
    assert samples[-1] >= budget and (len(samples) == 1 or samples[-2] < budget), samples
    assert summary["samples"] == samples[-1] and summary["steps_completed"] == len(rows)
    # every rank ran the same rounds and stopped at the same step (no rank waited in a collective
    # for a peer that had stopped: the run completed)
    rounds = [r["round_micro_batches"] for r in summary["per_rank"]]
    assert len({len(r) for r in rounds}) == 1, rounds
    deterministic = run["cfg"]["train"]["deterministic"]
    before = [0] + samples[:-1]
    lrs = [float(r["lr"]) for r in rows]
    if deterministic:
        assert samples == [NOMINAL * (t + 1) for t in range(len(rows))]
        if budget % NOMINAL == 0:
            assert samples[-1] == budget  # exactly the budget
            # steps of exactly the nominal samples: the budget's schedule is the step schedule over
            # budget / nominal steps, and the last step's rate is where that cosine ends
            steps_schedule = make_lr_schedule(LR, "cosine", WARMUP, budget // NOMINAL)
            assert lrs == [steps_schedule(t) for t in range(len(rows))]
    else:
        counts = [int(r["micro_batches"]) for r in rows]
        assert any(c > NOMINAL // 4 for c in counts), counts  # the fast rank contributed more
        # near the end the fast rank's extra micro-batches stay within its share of what is left:
        # the step reaching the budget exceeds it by at most the rounds' minimum micro-batches
        assert samples[-1] <= budget + NOMINAL, samples
    # every method: the rate of a step is the cosine at (samples before it) / nominal, over the budget
    assert lrs == pytest.approx([cosine_at(s / NOMINAL, budget / NOMINAL) for s in before], rel=1e-12)
    assert lrs[-1] == min(lrs[WARMUP:])  # the last step anneals furthest


@pytest.mark.integration
@pytest.mark.xdist_group("budget")
def test_ddp_and_acco_with_half_the_accumulation_do_the_same_work(budget_runs):
    ddp, acco = rows_of(budget_runs("ddp-torch")), rows_of(budget_runs("acco"))
    assert [r["samples"] for r in ddp] == [r["samples"] for r in acco] and int(ddp[-1]["samples"]) == B
    assert [float(r["lr"]) for r in ddp] == [float(r["lr"]) for r in acco]


@pytest.mark.integration
@pytest.mark.xdist_group("budget")
def test_budget_run_equals_the_reference(budget_runs):
    out = budget_runs("acco")
    run = load_run(out)
    ref = replay(run["cfg"])
    assert len(ref.history) - 1 == len(rows_of(out)) == B // NOMINAL
    final = torch.load(os.path.join(out, "final_params.pt"))
    torch.testing.assert_close(final, ref.history[-1], rtol=1e-4, atol=2e-6)


@pytest.mark.integration
@pytest.mark.xdist_group("budget")
def test_budget_run_resumes_exactly(budget_runs, tmp_path):
    """A budget run stopped by a checkpoint signal after step 3 and resumed: the same rows (all but
    wall time), the same final parameters."""
    reference = budget_runs("acco")
    out = str(tmp_path / "run")
    args = [*BASE, *RUNS["acco"], f"train.samples={B}", f"out_dir={out}"]
    run_train([*args, "fault.signal_rank=1", "fault.at_step=3"], expect=3)
    assert load_run(out)["summary"]["status"] == "preempted"
    run_train([*args, "resume=auto"])
    strip = lambda rows: [{k: v for k, v in r.items() if k != "wall_time_s"} for r in rows]  # noqa: E731
    assert strip(rows_of(out)) == strip(rows_of(reference))
    assert torch.equal(
        torch.load(os.path.join(out, "final_params.pt")), torch.load(os.path.join(reference, "final_params.pt"))
    )


def test_progress_shows_the_budget_fraction():
    import io

    from acco.runtime.progress import Progress

    out = io.StringIO()
    progress = Progress("acco", None, log_every=2, stream=out, budget=1000, unit="tokens", per_sample=10)
    for step, samples in ((1, 30), (2, 50), (3, 100)):  # adaptive steps: uneven samples
        progress.update(step, loss=3.0, samples=samples, wall_s=step * 1.0, lr=1e-3, micro_batches=4, eval_loss=None)
    lines = out.getvalue().splitlines()
    # every log_every steps and at the budget; ETA from the budget's fraction (500 of 1000 tokens
    # in 2 s: 2 s left)
    assert lines[0].startswith("[acco] step 2 500/1000 tokens") and lines[0].endswith("eta 2s"), lines
    assert lines[1].startswith("[acco] step 3 1000/1000 tokens") and lines[1].endswith("eta 0s"), lines
    bar = io.StringIO()
    progress = Progress("acco", 50, log_every=0, stream=bar, bar=True, budget=1000, unit="tokens", per_sample=10)
    progress.update(1, loss=3.0, samples=40, wall_s=1.0, lr=1e-3, micro_batches=4, eval_loss=None)
    assert progress.bar.n == 400 and progress.bar.total == 1000
    assert progress.fraction(1, 40) == 0.4 and progress.fraction(45, 40) == 0.9  # whichever is nearer
    progress.close()
