"""FSDP's layer-by-layer schedule (acco/harness/simulation/fsdp.py): arithmetic, as the clock's tests.

Notation: c one micro-batch's compute, L layers, f = c/3/L and b = 2c/3/L a layer's forward and
backward, g and r one layer's all-gather and reduce-scatter, s the optimizer step."""

import numpy as np
import pytest

from acco.harness.simulation import fsdp
from acco.harness.simulation.fsdp import LayerCosts, Settings, collectives, step_end, traffic_bytes
from acco.harness.simulation.schedules import prefetched_gather_s
from acco.harness.simulation.sweep import bandwidth_for_utilization, primitives, run, scenario
from acco.harness.simulation.topology import topology

C, L, S = 3.0, 10, 0.05  # f = 0.1, b = 0.2 per layer
DEFAULTS = Settings()  # forward and backward prefetch on, no no_sync


def steps(method, accum=1, g=0.0, r=0.0, settings=DEFAULTS, f=None, mu=C, layers=L):
    """One committed step's end (a float) on 2 identical workers, or on `f`'s."""
    f = np.ones((1, 1, 2)) if f is None else np.asarray(f, float)
    return float(step_end(method, np.array([mu]), f, accum, LayerCosts(layers, g, r, S), settings)[0, 0])


@pytest.mark.parametrize("method", fsdp.FSDP_METHODS)
@pytest.mark.parametrize("accum", [1, 3])
def test_with_prefetch_and_a_fast_link_the_step_is_compute_plus_the_optimizer(method, accum):
    assert steps(method, accum, g=1e-9, r=1e-9) == pytest.approx(accum * C + S, abs=1e-6)


def test_with_prefetch_only_the_first_gathers_and_the_last_reduce_scatter_are_exposed():
    g, r = 0.05, 0.1  # g <= f, and g + r <= b: every other collective hides beside a layer's compute
    # SHARD_GRAD_OP: the forward's first gather, the backward's last reduce-scatter
    assert steps("fsdp_grad_op", g=g, r=r) == pytest.approx(C + g + r + S)
    # FULL_SHARD: the backward regathers, its first gather exposed too
    assert steps("fsdp", g=g, r=r) == pytest.approx(C + 2 * g + r + S)
    # each micro-batch pays its own first gathers and, synced, its last reduce-scatter
    assert steps("fsdp", 2, g=g, r=r) == pytest.approx(2 * (C + 2 * g + r) + S)


def test_without_forward_prefetch_each_layers_gather_is_serial():
    g, r = 0.05, 0.1
    off = Settings(forward_prefetch=False)
    assert steps("fsdp_grad_op", g=g, r=r, settings=off) == pytest.approx(C + L * g + r + S)
    assert steps("fsdp", g=g, r=r, settings=off) == pytest.approx(C + L * g + g + r + S)


def test_without_backward_prefetch_each_gather_waits_for_the_reduce_scatter_before_it():
    g, r = 0.05, 0.1
    off = Settings(backward_prefetch=False)
    # the backward's first gather, then each layer's reduce-scatter and the next layer's gather in turn
    assert steps("fsdp", g=g, r=r, settings=off) == pytest.approx(C + g + L * (g + r) + S)
    # SHARD_GRAD_OP has no backward gather: the setting changes nothing
    assert steps("fsdp_grad_op", g=g, r=r, settings=off) == steps("fsdp_grad_op", g=g, r=r)
    # no prefetch at all: nothing overlaps, the step is its compute and every collective end to end
    none = Settings(forward_prefetch=False, backward_prefetch=False)
    assert steps("fsdp", g=g, r=r, settings=none) == pytest.approx(C + 2 * L * g + L * r + S)


def test_a_link_slower_than_the_compute_sets_the_pace():
    g, r = 0.3, 0.3  # every collective longer than any layer's compute
    # SHARD_GRAD_OP: gathers back to back, the last layer's forward, the backward (its reduce-scatters
    # start when it finishes each layer: the first after b, then back to back), the step
    forward = L * g + C / 3 / L
    backward_end = forward + 2 * C / 3 / L + L * r  # the lane is the bottleneck from the first layer's gradients
    assert steps("fsdp_grad_op", g=g, r=r) == pytest.approx(backward_end + S)


@pytest.mark.parametrize("method", fsdp.FSDP_METHODS)
@pytest.mark.parametrize("accum,no_sync", [(1, False), (3, False), (3, True)])
def test_with_no_compute_the_step_is_every_counted_collective_end_to_end(method, accum, no_sync):
    g, r = 0.07, 0.11
    gathers, reduces = collectives(method, accum, L, no_sync)
    settings = Settings(no_sync=no_sync)
    assert steps(method, accum, g=g, r=r, settings=settings, mu=0.0) == pytest.approx(gathers * g + reduces * r + S)
    costs = LayerCosts(L, g, r, S)
    assert fsdp.sync_s(method, costs, accum, no_sync) == pytest.approx(gathers * g + reduces * r + S)


def test_full_shard_moves_three_times_one_pass_per_micro_batch():
    P, grad, param = 1.3e9, 2, 2
    one_pass = P * param
    assert traffic_bytes("fsdp", P, 1, 24, grad, param) == pytest.approx(3 * one_pass)  # 2 gathers + 1 reduce-scatter
    assert traffic_bytes("fsdp_grad_op", P, 1, 24, grad, param) == pytest.approx(2 * one_pass)
    assert traffic_bytes("fsdp", P, 4, 24, grad, param) == pytest.approx(4 * 3 * one_pass)
    # fp32 gradients: the reduce-scatter's bytes double, the gathers' do not
    assert traffic_bytes("fsdp", P, 1, 24, 4, param) == pytest.approx(4 * one_pass)


def test_no_sync_reduce_scatters_once_per_step():
    k = 4
    assert collectives("fsdp", k, L, no_sync=False) == (2 * k * L, k * L)
    assert collectives("fsdp", k, L, no_sync=True) == (2 * k * L, L)  # FULL_SHARD still regathers
    assert collectives("fsdp_grad_op", k, L, no_sync=False) == (k * L, k * L)
    assert collectives("fsdp_grad_op", k, L, no_sync=True) == (L, L)  # parameters kept inside no_sync
    # with a link the compute cannot hide, no_sync saves (k - 1) reduce-scatters of every layer
    g, r = 0.0, 0.5
    saved = steps("fsdp_grad_op", k, g=g, r=r) - steps("fsdp_grad_op", k, g=g, r=r, settings=Settings(no_sync=True))
    assert saved == pytest.approx((k - 1) * (L * r - 2 * C / 3 + 2 * C / 3 / L))


def test_the_slowest_worker_sets_every_collective():
    f = np.array([[[1.0, 2.0]]])  # the second worker twice as slow
    assert steps("fsdp", 2, g=1e-9, r=1e-9, f=f) == pytest.approx(2 * 2 * C + S, abs=1e-6)


@pytest.mark.parametrize("g", [0.05, 0.3])
def test_forward_prefetch_is_the_pipeline_ddp_prefetch_uses(g):
    """The FSDP forward's exposed gather equals schedules.prefetched_gather_s, which ddp and
    ddp_overlap --prefetch use: max(AG/L, AG - (L-1)/L forward)."""
    exposed = steps("fsdp_grad_op", g=g, r=0.0) - C - S
    assert exposed == pytest.approx(float(prefetched_gather_s(L * g, C / 3, L)))


def test_prefetch_changes_ddp_overlap_and_hides_the_gather_under_the_next_forward():
    topo = topology(8, 8, 100)
    plain, pre = (scenario("13b", topo, accum=1, rounds=16, prefetch=p) for p in (False, True))
    a, b = primitives(plain), primitives(pre)
    # the same buckets and reductions; only the tail's gather changes
    assert a["ddp_overlap"][1] == b["ddp_overlap"][1]
    hidden = a["ddp_overlap"][2] - b["ddp_overlap"][2]
    assert hidden > 0
    rows = {p: run([sc], ["ddp_overlap"])[0] for p, sc in ((False, plain), (True, pre))}
    assert rows[False]["step_s"] - rows[True]["step_s"] == pytest.approx(hidden)


def test_memory_is_zero3_for_full_shard_and_zero2_for_grad_op():
    P, N = 1e9, 64
    assert fsdp.memory_gb("fsdp", P, N) == pytest.approx((2 + 2 + 12) / N)
    assert fsdp.memory_gb("fsdp", P, N, no_sync=True) == pytest.approx((2 + 2 + 12) / N + 2)
    assert fsdp.memory_gb("fsdp_grad_op", P, N) == pytest.approx(2 + (2 + 12) / N)
    assert fsdp.memory_gb("fsdp_grad_op", P, N, no_sync=True) == pytest.approx(2 + 2 + 12 / N)


def test_the_sweep_runs_fsdp_with_its_settings():
    topo = topology(8, 4, 50)
    base = scenario("1.3b", topo, accum=2, rounds=16)
    rows = {r["method"]: r for r in run([base])}
    assert {"fsdp", "fsdp_grad_op"} <= rows.keys()
    assert rows["fsdp"]["memory_gb"] < rows["fsdp_grad_op"]["memory_gb"] < rows["ddp"]["memory_gb"]
    slower = scenario("1.3b", topo, accum=2, rounds=16, forward_prefetch=False, backward_prefetch=False)
    off = run([slower], ["fsdp"])[0]
    assert off["step_s"] > rows["fsdp"]["step_s"]
    need, top = bandwidth_for_utilization(base, "fsdp_grad_op", 0.9)
    assert np.isfinite(need) and top > 0.9


@pytest.mark.parametrize(
    "args,word",
    [
        (["--methods", "ddp,acco", "--fsdp-no-sync"], "--fsdp-no-sync"),
        (["--methods", "ddp_overlap", "--no-forward-prefetch"], "--no-forward-prefetch"),
        (["--methods", "fsdp_grad_op", "--no-backward-prefetch"], "fsdp_grad_op"),
        (["--methods", "fsdp", "--fsdp-no-sync", "--accum", "1"], "--accum 1"),
    ],
)
def test_cli_refuses_fsdp_settings_that_change_nothing(args, word, capsys):
    from acco.harness.simulation.cli import main

    assert main(args) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and word in lines[0]
    assert captured.out == ""


def _step(out: str, method: str) -> float:
    for line in out.splitlines():
        if line.startswith(method + " "):
            return float(line.split()[3])
    raise AssertionError(f"no {method} row in:\n{out}")


def test_cli_prefetch_settings_change_the_numbers(capsys):
    from acco.harness.simulation.cli import main

    base = ["--model", "1.3b", "--nodes", "4", "--inter-gbps", "50", "--rounds", "16", "--methods"]
    printed = {}
    for name, extra in (
        ("plain", ["ddp_overlap,fsdp,fsdp_grad_op"]),
        ("prefetch", ["ddp_overlap", "--prefetch"]),
        ("no forward", ["fsdp,fsdp_grad_op", "--no-forward-prefetch"]),
        ("no backward", ["fsdp", "--no-backward-prefetch"]),
        ("no_sync", ["fsdp,fsdp_grad_op", "--fsdp-no-sync"]),
    ):
        assert main(base + extra) == 0
        printed[name] = capsys.readouterr().out
    assert _step(printed["prefetch"], "ddp_overlap") < _step(printed["plain"], "ddp_overlap")
    assert _step(printed["no forward"], "fsdp") > _step(printed["plain"], "fsdp")
    assert _step(printed["no backward"], "fsdp") > _step(printed["plain"], "fsdp")
    assert _step(printed["no_sync"], "fsdp_grad_op") < _step(printed["plain"], "fsdp_grad_op")
    assert "FSDP: no forward prefetch" in printed["no forward"] and "no_sync" in printed["no_sync"]
