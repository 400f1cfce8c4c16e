"""Where each method computes its gradients, proven with a gradient oracle that records the
parameters every micro-batch saw, and a replay of the run with PyTorch's own AdamW."""

from __future__ import annotations

import os

import pytest
import torch

from tests.helpers.oracle import Replay
from tests.helpers.oracle_runs import ORACLE, oracle_run
from tests.helpers.runs import load_run, run_train

pytestmark = pytest.mark.integration  # every test here starts processes


def check_lr_column(out, rp_lr_at, steps):
    import csv

    with open(os.path.join(out, "metrics.csv")) as f:
        rows = list(csv.DictReader(f))
    assert [int(r["step"]) for r in rows] == list(range(1, steps + 1))
    # the schedule advanced exactly once per committed step (estimates/predictions never advance it)
    for t, row in enumerate(rows):
        assert float(row["lr"]) == pytest.approx(rp_lr_at(t), rel=1e-9)


@pytest.mark.parametrize("world", [2, 3])
def test_acco_gradients_at_theta_and_estimate(tmp_path, world):
    steps, accum = 8, 2
    out, run, counts, final = oracle_run(tmp_path, ["method=acco"], world, steps, accum)
    assert all(c == [accum] * (2 * steps) for c in counts)  # prologue + 2 rounds/step - last
    rp = Replay(run["cfg"], out, world, counts)
    theta = rp.theta()
    estimate = theta  # θ̃_0 = θ_0
    g_est, n_est = rp.grads(0, estimate, "θ̃_0")
    for t in range(steps):
        g, n = rp.grads(2 * t + 1, theta, f"θ_{t}")  # G_t at θ_t
        estimate = rp.step(g_est / n_est, tentative=True)  # θ̃_{t+1}
        moments = {k: v.clone() for k, v in rp.opt.state[rp.param].items()} if t else None
        theta = rp.step((g_est + g) / (n_est + n))  # θ_{t+1}: both halves
        assert n_est + n == 2 * accum * world
        if t < steps - 1:
            assert not torch.equal(estimate, theta)
            g_est, n_est = rp.grads(2 * t + 2, estimate, f"θ̃_{t + 1}")  # G̃_{t+1} at θ̃_{t+1}
        if moments is not None:
            assert not torch.equal(moments["exp_avg"], rp.opt.state[rp.param]["exp_avg"])
    assert rp.checked == world * accum * (2 * steps)
    assert rp.committed == steps
    torch.testing.assert_close(final, theta, rtol=1e-5, atol=1e-6)
    check_lr_column(out, rp.lr_at, steps)


@pytest.mark.parametrize("warmup", [0, 3])
def test_dpu_sequential_warmup_then_one_step_stale(tmp_path, warmup):
    steps, accum, world = 10, 2, 2
    out, run, counts, final = oracle_run(tmp_path, ["method=dpu", f"method.warmup_steps={warmup}"], world, steps, accum)
    rp = Replay(run["cfg"], out, world, counts)
    thetas = [rp.theta()]
    for t in range(warmup):  # sequential: gradients of step t at θ_t
        g, n = rp.grads(t, thetas[t], f"θ_{t} (warmup)")
        thetas.append(rp.step(g / n))
    pending = rp.grads(warmup, thetas[warmup], f"θ_{warmup} (first delayed step)")
    for t in range(warmup, steps):
        fresh = None
        if t < steps - 1:
            # computed while round t syncs: at θ_t, applied at step t+1 -> exactly one step stale
            fresh = rp.grads(t + 1, thetas[t], f"θ_{t} for step {t + 1}")
        thetas.append(rp.step(pending[0] / pending[1]))
        pending = fresh
    torch.testing.assert_close(final, thetas[-1], rtol=1e-5, atol=1e-6)
    check_lr_column(out, rp.lr_at, steps)


def test_wp_gradients_at_predicted_parameters(tmp_path):
    steps, accum, world, warmup = 10, 2, 2, 1
    out, run, counts, final = oracle_run(tmp_path, ["method=wp", f"method.warmup_steps={warmup}"], world, steps, accum)
    rp = Replay(run["cfg"], out, world, counts)
    theta = rp.theta()
    for t in range(warmup):
        g, n = rp.grads(t, theta, f"θ_{t} (warmup)")
        theta = rp.step(g / n)
    pending = rp.grads(warmup, theta, f"θ_{warmup}")
    point, predicted = theta, 0
    for t in range(warmup, steps):
        fresh = rp.grads(t + 1, point, f"point of round {t}") if t < steps - 1 else None
        theta = rp.step(pending[0] / pending[1])
        prediction = rp.step(pending[0] / pending[1], tentative=True)  # θ̂ = Opt_tent(θ_{t+1}, ḡ)
        if t < steps - 2:
            assert not torch.equal(prediction, theta)
            predicted += 1
        point, pending = prediction, fresh
    assert predicted > 0
    torch.testing.assert_close(final, theta, rtol=1e-5, atol=1e-6)


def test_adaptive_fast_ranks_accumulate_more_and_update_divides_by_global_count(tmp_path):
    """One of 2 ranks 4x slower, adaptive ACCO: the fast rank keeps computing while the sync waits
    for the slow one, so it contributes more micro-batches; the replay divides by the global count
    (large eps makes AdamW sensitive to the gradient's scale, not only its direction)."""
    steps, accum, world = 6, 1, 2
    out = str(tmp_path / "run")
    run_train(
        [
            "method=acco",
            *ORACLE,
            "optim.eps=1.0",
            f"world_size={world}",
            f"train.steps={steps}",
            f"train.accum={accum}",
            "train.deterministic=false",
            f"out_dir={out}",
            "hetero.slow_rank=1",
            "hetero.factor=4",
            "+oracle.busy_ms=20",
        ]
    )
    run = load_run(out)
    counts = [r["round_micro_batches"] for r in run["summary"]["per_rank"]]
    fast, slow = counts
    assert len(fast) == len(slow) == 2 * steps
    assert all(c >= accum for c in fast + slow)
    # rounds after the prologue: the fast rank did more micro-batches than the slow one
    assert sum(fast[1:]) > 1.5 * sum(slow[1:]), counts
    rp = Replay(run["cfg"], out, world, counts)
    theta = rp.theta()
    g_est, n_est = rp.grads(0, theta, "θ̃_0")
    import csv

    with open(os.path.join(out, "metrics.csv")) as f:
        rows = list(csv.DictReader(f))
    for t in range(steps):
        g, n = rp.grads(2 * t + 1, theta, f"θ_{t}")
        estimate = rp.step(g_est / n_est, tentative=True)
        theta = rp.step((g_est + g) / (n_est + n))
        assert int(rows[t]["micro_batches"]) == n_est + n  # the global count of the step
        if t < steps - 1:
            g_est, n_est = rp.grads(2 * t + 2, estimate, f"θ̃_{t + 1}")
    final = torch.load(os.path.join(out, "final_params.pt"))
    torch.testing.assert_close(final, theta, rtol=1e-5, atol=1e-6)
