"""The scale simulator's arithmetic on cases with known answers (acco/harness/simulation)."""

import os
import subprocess
import sys

import numpy as np
import pytest

from acco.analytic import costmodel
from acco.harness.simulation import schedules
from acco.harness.simulation.models import MODELS
from acco.harness.simulation.stragglers import Stragglers, parse
from acco.harness.simulation.sweep import run, scenario
from acco.harness.simulation.topology import all_reduce_s, reduce_scatter_s, sync_s, topology
from acco.runtime.summary import RunSummary
from tests.helpers.paths import ROOT


def ones(rounds, workers, batch=1):
    return np.ones((rounds, batch, workers))


@pytest.mark.parametrize("c,m", [(1.0, 0.4), (0.4, 1.0), (1.0, 1.0)])
def test_perfect_overlap_round_is_max_of_compute_and_sync(c, m):
    # ACCO deterministic: 1 micro-batch of time c per round, two rounds per committed step
    t = schedules.overlapped(np.array([c]), ones(40, 4), np.array([m]), per_round=1, rounds_per_step=2)
    assert t.step_s[0] == pytest.approx(2 * max(c, m))
    assert t.micro_batches[0] == 2 * 4
    assert t.idle[0] == pytest.approx(1 - c / max(c, m))
    # DPU / WP: one round per committed step
    t = schedules.overlapped(np.array([c]), ones(40, 4), np.array([m]), per_round=1, rounds_per_step=1)
    assert t.step_s[0] == pytest.approx(max(c, m))


@pytest.mark.parametrize("accum", [1, 2, 4])
def test_no_overlap_ddp_step_is_accum_compute_plus_sync(accum):
    t = schedules.ddp(np.array([0.3]), ones(10, 8), np.array([0.5]), accum)
    assert t.step_s[0] == pytest.approx(accum * 0.3 + 0.5)
    assert t.idle[0] == pytest.approx(0.5 / (accum * 0.3 + 0.5))


def test_one_slow_worker_ddp_waits_adaptive_acco_fills():
    mu, m, slow = 1.0, 0.5, 4.0
    f = ones(60, 4)
    f[..., 3] = slow
    ddp = schedules.ddp(np.array([mu]), f, np.array([m]), accum=2)
    assert ddp.step_s[0] == pytest.approx(2 * slow * mu + m)  # everyone waits for the slow one
    busy_fast, busy_slow = 2 * mu / ddp.step_s[0], 2 * slow * mu / ddp.step_s[0]
    assert ddp.busy[0] == pytest.approx((3 * busy_fast + busy_slow) / 4)
    det = schedules.overlapped(np.array([mu]), f, np.array([m]), 1, 2, adaptive=False)
    ada = schedules.overlapped(np.array([mu]), f, np.array([m]), 1, 2, adaptive=True)
    # the slow worker sets the round (its one micro-batch, 4 s > the sync) in both modes
    assert det.step_s[0] == pytest.approx(2 * slow * mu)
    assert ada.step_s[0] == pytest.approx(2 * slow * mu)
    # deterministic: the fast workers do one micro-batch and wait; adaptive: they fill the round
    assert det.micro_batches[0] == 2 * 4
    assert ada.micro_batches[0] == pytest.approx(2 * (1 + 3 * slow))
    assert ada.idle[0] == pytest.approx(0.0, abs=1e-9)
    assert det.idle[0] > 0.5


def test_adaptive_fits_whole_micro_batches_under_a_long_sync():
    # sync 2.5 micro-batches long: adaptive rounds do ceil(2.5) = 3, deterministic ones wait
    t = schedules.overlapped(np.array([1.0]), ones(30, 2), np.array([2.5]), 1, 2, adaptive=True)
    assert t.step_s[0] == pytest.approx(2 * 3.0)
    assert t.micro_batches[0] == pytest.approx(2 * 2 * 3)
    d = schedules.overlapped(np.array([1.0]), ones(30, 2), np.array([2.5]), 1, 2, adaptive=False)
    assert d.step_s[0] == pytest.approx(2 * 2.5)


@pytest.mark.parametrize("H,F,tau,m", [(8, 1, 0, 3.0), (8, 4, 1, 3.0), (8, 4, 1, 0.2), (16, 2, 3, 5.0)])
def test_local_methods_match_the_cost_models_closed_form(H, F, tau, m):
    c = 0.5  # one inner step (accum micro-batches of 0.25 s)
    t = schedules.local(np.array([0.25]), ones(6 * H, 4), np.array([m / F]), accum=2, H=H, F=F, tau=tau)
    T = 5 * H  # the steady periods: costmodel.run_time's per-step rate without its final sync
    name = "streaming_diloco" if F > 1 else "diloco"
    final_sync = m if F > 1 else 0.0  # the streaming formula ends with every fragment's last sync
    expected = (costmodel.run_time(name, T, c, m, local=(H, F, tau)) - final_sync) / T
    assert t.step_s[0] == pytest.approx(expected)


def test_local_inner_step_adds_to_every_inner_step():
    t = schedules.local(np.array([0.25]), ones(48, 2), np.array([2.0]), accum=2, H=8, inner_step_s=0.1)
    assert t.step_s[0] == pytest.approx(2 * 0.25 + 0.1 + 2.0 / 8)
    assert t.idle[0] == pytest.approx((2.0 / 8) / (0.6 + 2.0 / 8))


def test_ring_all_reduce_time_formula():
    S, B, a = 1e9, 100e9 / 8, 30e-6
    # one GPU per node: the flat ring over the network, 2(N−1)α + 2(N−1)/N·S/B
    topo = topology(1, 16, 100, alpha_inter_us=30)
    assert all_reduce_s(S, topo) == pytest.approx(2 * 15 * a + 2 * 15 / 16 * S / B)
    # one node: the ring on NVLink
    topo = topology(8, 1, intra_gbytes=300, alpha_intra_us=10)
    assert all_reduce_s(S, topo) == pytest.approx(2 * 7 * 10e-6 + 2 * 7 / 8 * S / 300e9)
    # hierarchical: the intra ring, then the node's NIC moves (n−1)/n of the buffer
    topo = topology(8, 4, 100, intra_gbytes=300, alpha_intra_us=10, alpha_inter_us=30)
    assert reduce_scatter_s(S, topo) == pytest.approx(7 * 10e-6 + 7 / 8 * S / 300e9 + 3 * a + 3 / 4 * S / B)
    # buckets pay the latency again, not the bandwidth
    assert reduce_scatter_s(S, topo, buckets=10) - reduce_scatter_s(S, topo) == pytest.approx(9 * (7 * 10e-6 + 3 * a))


def test_sync_bytes_follow_table1():
    topo = topology(8, 8, 100, gpu="H100")
    P, N, hbm = 1e9, 64, 3.35e12
    # bf16 gradients out, bf16 parameters back, AdamW on the shard (30 B per parameter touched)
    assert sync_s("ddp", P, topo) == pytest.approx(2 * reduce_scatter_s(2 * P, topo) + P / N * 30 / hbm)
    # a tentative step (acco, wp) also saves and restores master, m, v
    assert sync_s("acco", P, topo) == pytest.approx(2 * reduce_scatter_s(2 * P, topo) + P / N * 54 / hbm)
    # fp32 gradients (train.grad_dtype=fp32)
    assert sync_s("ddp", P, topo, grad_bytes=4) == pytest.approx(
        reduce_scatter_s(4 * P, topo) + reduce_scatter_s(2 * P, topo) + P / N * 30 / hbm
    )
    # local methods: the fp32 pseudo-gradient and fp32 φ, one fragment of F
    assert sync_s("streaming_diloco", P, topo, fragments=4) == pytest.approx(
        2 * reduce_scatter_s(4 * P / 4, topo) + P / 4 / N * 20 / hbm
    )


def test_model_sizes_are_the_published_ones():
    published = {"125m": 125e6, "1.3b": 1.3e9, "2.7b": 2.7e9, "7b": 6.74e9, "13b": 13.0e9, "70b": 69.0e9}
    for key, size in published.items():
        assert MODELS[key].params == pytest.approx(size, rel=0.03), key


def test_stragglers_shapes():
    rng = np.random.default_rng(0)
    f = Stragglers("lognormal", sigma=0.3).factors(rng, 400, 2, 64, 8)
    assert f.mean() == pytest.approx(1.0, abs=0.01) and (f > 0).all()
    f = Stragglers("slow_node", factor=3).factors(rng, 5, 1, 16, 8)
    assert (f[..., :8] == 3).all() and (f[..., 8:] == 1).all()
    f = Stragglers("tail", p=0.01, factor=5).factors(rng, 1000, 1, 100, 8)
    assert set(np.unique(f)) == {1.0, 5.0} and (f == 5).mean() == pytest.approx(0.01, abs=0.002)
    assert parse("tail:0.01:3") == Stragglers("tail", p=0.01, factor=3)
    with pytest.raises(ValueError):
        parse("gamma:1")


def test_sweep_is_deterministic_and_paired():
    sc = [scenario("125m", topology(8, 4, 50), stragglers=Stragglers("lognormal", sigma=0.2), rounds=40)]
    a, b = run(sc), run(sc)
    assert [r["step_s"] for r in a] == [r["step_s"] for r in b]
    by = {r["method"]: r for r in a}
    assert by["ddp"]["speedup_vs_ddp"] == 1.0
    # the same samples per committed step for the deterministic methods
    assert by["acco"]["batch_per_step"] == by["ddp"]["batch_per_step"] == by["diloco"]["batch_per_step"]
    assert by["acco_adaptive"]["batch_per_step"] >= by["acco"]["batch_per_step"]
    assert not run([scenario("70b", topology(8, 8, 100), rounds=16)], ["ddp"])[0]["fits"]


def cli(*args):
    script = os.path.join(ROOT, "experiments", "simulate.py")
    return subprocess.run([sys.executable, script, *args], capture_output=True, text=True, timeout=120, cwd=ROOT)


def test_cli_prints_every_method():
    out = cli("--gpus-per-node", "8", "--nodes", "2", "--inter-gbps", "100", "--model", "125m", "--rounds", "16")
    assert out.returncode == 0, out.stderr
    for method in ("ddp", "dpu", "wp", "acco", "acco_adaptive", "diloco", "streaming_diloco"):
        assert f"\n{method} " in out.stdout
    assert "not loss" in out.stdout


@pytest.mark.parametrize(
    "args,word",
    [
        (["--nodes", "0"], "--nodes"),
        (["--model", "9b"], "--model"),
        (["--accum", "0"], "--accum"),
        (["--inter-gbps", "-1"], "--inter-gbps"),
        (["--stragglers", "lognormal"], "--stragglers"),
        (["--H", "32", "--tau", "-1"], "--tau"),
        (["--nonsense"], "nonsense"),
    ],
)
def test_cli_bad_input_exits_2_with_one_line(args, word, capsys):
    from acco.harness.simulation.cli import main

    assert main(args) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and word in lines[0]
    assert captured.out == ""


def test_cli_bad_input_from_the_script():
    out = cli("--model", "9b")
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("c,m", [(1.0, 0.3), (0.3, 1.0)])
def test_whole_run_times_equal_the_cost_models_run_time(c, m):
    # prologue round, overlapped rounds, the T-th commit: costmodel.run_time's closed forms
    T = 7
    acco = schedules.overlapped(np.array([c]), ones(2 * T + 2, 3), np.array([m]), 1, 2)
    assert acco.commit_s[T - 1, 0] == pytest.approx(costmodel.run_time("acco", T, c, m))
    dpu = schedules.overlapped(np.array([c]), ones(T + 2, 3), np.array([m]), 1, 1)
    assert dpu.commit_s[T - 1, 0] == pytest.approx(costmodel.run_time("dpu", T, c, m))
    ddp = schedules.ddp(np.array([c]), ones(T, 3), np.array([m]), 1)
    assert ddp.commit_s[T - 1, 0] == pytest.approx(costmodel.run_time("ddp", T, c, m))


def fake_run(method, steps, accum=2, deterministic=True, world=2, **method_cfg):
    from analysis.load import Run

    config = {
        "method": {"name": method, **method_cfg},
        "train": {"accum": accum, "steps": steps, "deterministic": deterministic},
        "data": {"micro_batch_size": 8},
        "world_size": world,
        "seed": 0,
    }
    summary = {"method": method, "world_size": world, "steps_completed": steps, "accum": accum}
    return Run("/nonexistent", "figX", "cpu", method, config, RunSummary.from_json(summary))


def test_validation_predicts_the_measured_window():
    from analysis.sim_validation import predict

    mu, m = 0.1, 0.25
    assert predict(fake_run("ddp", 20), mu, m) == (pytest.approx(2 * mu + m), 2 * 2 * 8)
    assert predict(fake_run("acco", 20, accum=1), mu, m)[0] == pytest.approx(2 * max(mu, m))
    # DPU: 5 sequential warmup steps inside the window, then overlapped rounds
    step = predict(fake_run("dpu", 20, warmup_steps=5), mu, m)[0]
    # window: commit 19 − commit 1 = 4 more warmup steps + prologue + 13 overlapped rounds + last sync
    assert step == pytest.approx((4 * (2 * mu + m) + 2 * mu + 13 * max(2 * mu, m) + m) / 18)
    # DiLoCo H=32 over 32 steps: its only sync is at the last step, outside the window
    assert predict(fake_run("diloco", 32, sync_every=32), mu, m)[0] == pytest.approx(2 * mu)


def drive_virtual_clock(method: str, costs: list[float], m: float, accum: int, steps: int, adaptive: bool):
    """acco/engine/virtual_clock.py's VirtualClock called in the order acco/engine/rounds.py's
    run_sequential / run_delayed / run_acco call it; (commit times, micro-batches per commit)."""
    from acco.engine.virtual_clock import VirtualClock

    clock = VirtualClock(costs, {"commit": m, "estimate": m})
    commits, counts = [], []

    def compute(beside_sync: bool):
        clock.compute_round(accum, adaptive and beside_sync)

    def finish():
        counts.append(clock.finish())
        commits.append(clock.now())

    if method == "ddp":
        for _ in range(steps):
            clock.empty()
            compute(False)
            clock.launch("commit", True)
            finish()
        return commits, counts
    clock.empty()
    compute(False)  # the prologue
    for _ in range(steps):
        if method == "acco":  # estimate round: the accumulator keeps G̃ and adds G on top
            clock.launch("estimate", False)
            compute(True)
            clock.finish()
        clock.launch("commit", True)
        clock.empty()
        compute(True)
        finish()
    return commits, counts


@pytest.mark.parametrize(
    "method,c,m,adaptive,slow",
    [
        ("ddp", 0.3, 0.5, False, 1.0),
        ("ddp", 0.3, 0.5, False, 3.0),
        ("dpu", 1.0, 0.4, False, 1.0),
        ("dpu", 0.4, 1.0, True, 1.0),
        ("acco", 1.0, 0.4, False, 1.0),
        ("acco", 0.4, 1.0, False, 1.0),
        ("acco", 0.3, 1.0, True, 1.0),
        ("acco", 0.3, 1.0, True, 3.0),
    ],
)
def test_two_workers_equal_the_virtual_clock(method, c, m, adaptive, slow):
    """At N = 2 the scale simulator and the engine's virtual clock (issue 31) give the same time
    per committed step and the same micro-batches per step (the clock logs a step when rank 0's
    round ends, the simulator when the sync ends: equal differences in steady state)."""
    accum, steps = 2, 12
    clock_t, clock_n = drive_virtual_clock(method, [c, c * slow], m, accum, steps, adaptive)
    f = ones(2 * steps + 4, 2)
    f[..., 1] = slow
    if method == "ddp":
        sim = schedules.ddp(np.array([c]), f, np.array([m]), accum)
    else:
        sim = schedules.overlapped(np.array([c]), f, np.array([m]), accum, 2 if method == "acco" else 1, adaptive)
    assert np.diff(clock_t)[2:] == pytest.approx(np.diff(sim.commit_s[:steps, 0])[2:])
    assert clock_n == list(sim.step_micro_batches[:steps, 0])


def test_simulation_section_reads_results_sim_alone(tmp_path):
    from analysis.sim_figures import simulation_section

    empty = simulation_section(str(tmp_path))
    assert "not loss" in empty and "No validation table yet" in empty
    sim = tmp_path / "sim"
    sim.mkdir()
    import pandas as pd

    pd.DataFrame(
        {
            "method": ["ACCO", "ACCO", "DDP"],
            "error % (sequential)": ["-10.0 % [-14.0, -6.0]", "+2.0 %", "-6.0 % [-7.0, -5.0]"],
            "error % (own)": ["-4.0 % [-5.0, -3.0]", "no trace", "-6.0 % [-7.0, -5.0]"],
        }
    ).to_csv(sim / "validation.csv", index=False)
    text = simulation_section(str(tmp_path))
    assert "ACCO 6 % from sequential primitives, 4 % from its own" in text
    assert "DDP 6 % from sequential primitives, 6 % from its own" in text


# -- issue 43: payload precision, replicas of many GPUs, overlap shapes, inputs, contention -------------


def test_every_method_has_a_payload_precision():
    from acco.harness.simulation.topology import PRECISION_BYTES, sync_parts

    topo = topology(8, 4, 100, gpu="H100")
    P = 1e9
    fp8 = sync_parts("acco", P, topo, grad_bytes=PRECISION_BYTES["fp8"], param_bytes=PRECISION_BYTES["bf16"])
    assert fp8.reduce_s == pytest.approx(reduce_scatter_s(1 * P, topo))
    assert fp8.gather_s == pytest.approx(reduce_scatter_s(2 * P, topo))
    # the outer gradients: all-reduced at their precision, divided by a compression ratio
    fp4 = sync_parts("diloco", P, topo, outer_bytes=PRECISION_BYTES["fp4"] / 2)
    assert fp4.reduce_s == fp4.gather_s == pytest.approx(reduce_scatter_s(0.25 * P, topo))
    sc32 = scenario("125m", topo, rounds=64)
    sc4 = scenario("125m", topo, rounds=64, outer_bytes=PRECISION_BYTES["fp4"], outer_compression=2)
    from acco.harness.simulation.sweep import primitives

    p32, p4 = primitives(sc32)["parts"]["diloco"], primitives(sc4)["parts"]["diloco"]
    assert p4.reduce_s == pytest.approx(reduce_scatter_s(0.25 * MODELS["125m"].params, topo))
    assert p32.reduce_s == pytest.approx(reduce_scatter_s(4 * MODELS["125m"].params, topo))


def test_replica_groups_and_the_outer_sync_between_replicas():
    from acco.harness.simulation.topology import Group, group_reduce_scatter_s, replica_groups, sync_parts

    topo = topology(8, 4, 100, alpha_inter_us=30, alpha_intra_us=10)
    assert replica_groups(topo, 8) == (Group(8, 1, 1), Group(1, 4, 8))
    assert replica_groups(topo, 2) == (Group(2, 1, 4), Group(4, 4, 2))
    assert replica_groups(topo, 16) == (Group(8, 2, 1), Group(1, 2, 8))
    with pytest.raises(ValueError):
        replica_groups(topo, 3)
    P, B = 1e9, 100e9 / 8
    # one replica per node: each GPU syncs its 1/8 shard with its peers, the 8 rings share the NIC —
    # the node moves (n-1)/n of the whole payload, as the flat outer sync's network part does
    out = sync_parts("diloco", P, topo, outer_bytes=2, replica_gpus=8, optimizer=False)
    assert out.reduce_s == pytest.approx(3 * 30e-6 + 3 / 4 * 2 * P / B)
    # inside the replica: the ring on NVLink only
    inside = replica_groups(topo, 8)[0]
    nvlink = topo.intra_bytes_per_s
    assert group_reduce_scatter_s(2 * P, topo, inside) == pytest.approx(7 * 10e-6 + 7 / 8 * 2 * P / nvlink)
    # replicas of two nodes: 2 replicas; the NIC carries half the payload
    out = sync_parts("diloco", P, topo, outer_bytes=2, replica_gpus=16, optimizer=False)
    assert out.reduce_s == pytest.approx(30e-6 + 1 / 2 * 2 * P / 2 / B)


def test_diloco_replicas_of_many_gpus_wait_for_their_slowest_gpu():
    from acco.harness.simulation.sweep import primitives

    topo = topology(8, 4, 100)
    base = scenario("1.3b", topo, rounds=64, H=16, replica_gpus=8, stragglers=Stragglers("slow_node", factor=2.0))
    rows = {r["method"]: r for r in run([base], ["ddp", "diloco"])}
    p = primitives(base)
    # the slow node is one whole replica: every inner step waits for it (2x), sharded step and all
    c = base.accum * p["micro_batch_s"]
    assert rows["diloco"]["step_s"] == pytest.approx(2 * c + p["inner_step_s"] + p["sync_s"]["diloco"] / 16, rel=1e-6)
    # the replica's GPUs all compute: samples per step count every GPU
    assert rows["diloco"]["batch_per_step"] == rows["ddp"]["batch_per_step"]
    # model state sharded inside the replica
    assert rows["diloco"]["memory_gb"] == pytest.approx((2 + 2 + 12 + 4) / 8 * MODELS["1.3b"].params / 1e9)


def test_prefetched_gather_and_the_zero_step_placement():
    from acco.harness.simulation.schedules import exposed_sync, prefetched_gather_s

    # a gather shorter than the forward leaves only its first layer's share exposed
    assert prefetched_gather_s(0.4, 1.0, 8) == pytest.approx(0.05)
    # a longer one: the pipeline's tail, AG - (L-1)/L forward
    assert prefetched_gather_s(2.0, 1.0, 4) == pytest.approx(2.0 - 0.75)
    assert prefetched_gather_s(2.0, 1.0, 0) == 2.0  # no layers known: nothing hides
    # the reduction and ZeRO's step stay exposed (the step sits between the reduction and the gather)
    assert exposed_sync(0.3, 0.1, 0.4, 1.0, 8, prefetch=True) == pytest.approx(0.3 + 0.1 + 0.05)
    assert exposed_sync(0.3, 0.1, 0.4, 1.0, 8, prefetch=False) == pytest.approx(0.8)
    topo = topology(8, 4, 50)
    plain = run([scenario("125m", topo, rounds=32)], ["ddp"])[0]
    pre = run([scenario("125m", topo, rounds=32, prefetch=True)], ["ddp"])[0]
    assert pre["step_s"] < plain["step_s"]


def test_fragments_need_not_divide_H_and_tau_may_cover_an_outer_step():
    from acco.harness.simulation.schedules import fragment_phases

    assert fragment_phases(100, 8) == [13, 25, 38, 50, 63, 75, 88, 100]
    assert fragment_phases(32, 4) == [8, 16, 24, 32]
    mu, H = np.array([0.5]), 100
    # H = 100, 8 fragments, each sync 3 s beside tau = 1 step of 1 s: every fragment waits 2 s
    t = schedules.local(mu, ones(4 * H, 2), np.array([3.0]), accum=2, H=H, F=8, tau=1)
    assert t.step_s[0] == pytest.approx(1.0 + 8 * 2.0 / H)
    # eager: tau = H, the link busy 8 x 3 = 24 s of every 100 s: nothing waits
    t = schedules.local(mu, ones(4 * H, 2), np.array([3.0]), accum=2, H=H, F=8, tau=H)
    assert t.step_s[0] == pytest.approx(1.0) and t.idle[0] == pytest.approx(0.0, abs=1e-9)
    # ... until the link itself is the bottleneck: 8 x 20 s per 100 s of compute
    t = schedules.local(mu, ones(20 * H, 2), np.array([20.0]), accum=2, H=H, F=8, tau=H)
    late = t.commit_s[:, 0]
    assert (late[-1] - late[-1 - 5 * H]) / (5 * H) == pytest.approx(8 * 20.0 / H)
    # the steady state is the link's own time per period, not the window's average over the backlog's growth
    assert t.step_s[0] == pytest.approx(8 * 20.0 / H) and t.idle[0] == pytest.approx(1 - 1.0 / 1.6)


def test_layerwise_diloco_hides_its_sync_behind_the_last_backward():
    # one micro-batch of 0.3 s per step (backward 0.2 s), one 24-layer sync of M = 1 s every H steps:
    # its layers go on the link as the backward finishes them (top first), the last one lands
    # M - (L-1)/L * backward after the step; the next forward needs layer 0 first
    L, H, M, mu = 24, 16, 1.0, 0.3
    plain = schedules.local(np.array([mu]), ones(4 * H, 2), np.array([M]), accum=1, H=H)
    lw = schedules.local(np.array([mu]), ones(4 * H, 2), np.array([M]), accum=1, H=H, layers=L)
    assert plain.step_s[0] == pytest.approx(mu + M / H)
    assert lw.step_s[0] == pytest.approx(mu + (M - (L - 1) / L * 2 / 3 * mu) / H)
    # streaming, layer-wise, tau = 0: a fragment higher up also has the next forward up to it
    F = 4
    sd = schedules.local(np.array([mu]), ones(4 * H, 2), np.array([M / F]), accum=1, H=H, F=F, layers=L)
    assert sd.step_s[0] < schedules.local(np.array([mu]), ones(4 * H, 2), np.array([M / F]), 1, H, F).step_s[0]


def test_contention_slows_compute_beside_a_sync():
    # ACCO deterministic, one micro-batch of 1 s per round beside a 1 s sync, compute 1.5x slower
    # while the sync runs: 2/3 of it done in the sync's second, the rest after: rounds of 4/3 s
    t = schedules.overlapped(np.array([1.0]), ones(40, 3), np.array([1.0]), 1, 2, contention=0.5)
    assert t.step_s[0] == pytest.approx(2 * (1 + 1 / 3))
    # a sync long enough to hold the slowed compute costs nothing more
    t = schedules.overlapped(np.array([1.0]), ones(40, 3), np.array([2.0]), 1, 2, contention=0.5)
    assert t.step_s[0] == pytest.approx(2 * 2.0)
    # adaptive: fewer micro-batches fit under the sync
    a = schedules.overlapped(np.array([1.0]), ones(40, 3), np.array([3.0]), 1, 2, adaptive=True)
    b = schedules.overlapped(np.array([1.0]), ones(40, 3), np.array([3.0]), 1, 2, adaptive=True, contention=0.5)
    assert a.micro_batches[0] == 2 * 3 * 3 and b.micro_batches[0] == 2 * 3 * 2
    # off by default on a GPU: a zero term changes nothing
    z = schedules.overlapped(np.array([1.0]), ones(40, 3), np.array([0.4]), 1, 2, contention=0.0)
    assert z.step_s[0] == pytest.approx(2.0)


def test_busbw_as_nccl_tests_prints_it():
    from acco.harness.simulation.topology import busbw_to_inter

    topo = topology(8, 2, intra_gbytes=232)
    B = busbw_to_inter(192, 8, 2, topo.intra_bytes_per_s)
    t = topology(8, 2, B * 8 / 1e9, intra_gbytes=232, alpha_intra_us=0, alpha_inter_us=0)
    S = 10 * 2**30  # all_reduce_perf's busbw: 2(N-1)/N S / time
    assert 2 * 15 / 16 * S / all_reduce_s(S, t) == pytest.approx(192e9)
    with pytest.raises(ValueError):
        busbw_to_inter(400, 8, 2, topo.intra_bytes_per_s)  # faster than NVLink allows


def test_cli_accepts_accum_1_precisions_replicas_and_own_model():
    out = cli(
        "--params", "1e9", "--layers", "24", "--step-time", "0.1", "--accum", "1", "--gpus-per-node", "8",
        "--nodes", "4", "--replica-gpus", "8", "--outer-precision", "fp4", "--grad-precision", "bf16",
        "--H", "100", "--F", "8", "--tau", "1", "--layerwise", "--prefetch", "--inter-busbw", "20@2", "--rounds", "400",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "\nddp " in out.stdout and "\nstreaming_diloco " in out.stdout and "\nacco " not in out.stdout
    assert "ACCO needs an even --accum" in out.stdout and "outer gradients fp4" in out.stdout
    assert "replicas of 8 GPUs" in out.stdout and "measured step time" in out.stdout


@pytest.mark.parametrize(
    "args,word",
    [
        (["--replica-gpus", "3"], "--replica-gpus"),
        (["--outer-compression", "0.5"], "--outer-compression"),
        (["--inter-busbw", "fast"], "--inter-busbw"),
        (["--contention", "-1"], "--contention"),
        (["--params", "1e9"], "--params"),
        (["--methods", "acco", "--accum", "1"], "--accum"),
        (["--grad-precision", "int3"], "--grad-precision"),
        (["--layerwise", "--F", "40", "--model", "125m"], "--layerwise"),
    ],
)
def test_cli_new_bad_input_exits_2_with_one_line(args, word, capsys):
    from acco.harness.simulation.cli import main

    assert main(args) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and word in lines[0]


def _printed_number(text: str, method: str) -> float:
    for line in text.splitlines():
        if line.strip().startswith(method + " "):
            return float(line.split()[1])
    raise AssertionError(f"no line for {method} in:\n{text}")


def test_published_rows_reproduce_from_their_commands(capsys):
    from acco.harness.simulation.cli import main
    from analysis.sim_published import all_rows, simulate

    rows = all_rows()
    bandwidth = next(r for r in rows if r.kind == "bandwidth" and r.method == "diloco" and r.target == 0.9)
    ours, _ = simulate(bandwidth)
    assert main([*bandwidth.args, "--find-bandwidth", "0.9"]) == 0
    assert _printed_number(capsys.readouterr().out, "diloco") == pytest.approx(ours, rel=5e-3)  # 3 digits
    nccl = next(r for r in rows if r.kind == "busbw" and "2 nodes" in r.setting)
    ours, _ = simulate(nccl)
    assert main(nccl.args) == 0
    assert f"busbw {ours:.1f} GB/s" in capsys.readouterr().out
    assert bandwidth.command().startswith("python experiments/simulate.py ") and "--find-bandwidth 0.9" in (
        bandwidth.command()
    )


def test_the_diloco_family_is_reproduced_within_the_papers_rounding():
    """Streaming DiLoCo's Table 4 for the 1B model, every local method: within 1.25x (the paper's grid
    steps by 1.21)."""
    from analysis.sim_published import diloco_rows, simulate

    rows = [
        r for r in diloco_rows() if r.setting.startswith("1B, ") and not r.data_parallel and "outer" not in r.setting
    ]
    assert len(rows) == 20
    for r in rows:
        ours, _ = simulate(r)
        assert 1 / 1.25 <= ours / r.published <= 1.25, (r.setting, r.quantity, ours, r.published)


def test_strided_fragments_spread_their_layers_over_the_depth():
    from acco.harness.simulation.schedules import _pieces

    seq, strided = _pieces(4, 12), _pieces(4, 12, strided=True)
    assert [d for d, _ in seq[0]] == pytest.approx([2 / 12, 1 / 12, 0.0])  # layers 0-2, top first
    assert [d for d, _ in strided[0]] == pytest.approx([8 / 12, 4 / 12, 0.0])  # layers 0, 4, 8
    assert all(sum(share for _, share in frag) == pytest.approx(1.0) for frag in seq + strided)
    # tau = 0: a strided fragment's upper layers land while the next forward climbs to them
    mu, H, M = np.array([0.3]), 16, np.array([0.25])
    a = schedules.local(mu, ones(4 * H, 2), M, 1, H, 4, 0, layers=12)
    b = schedules.local(mu, ones(4 * H, 2), M, 1, H, 4, 0, layers=12, strided=True)
    assert b.step_s[0] < a.step_s[0]


def test_replicated_ddp_all_reduces_its_buckets_in_the_backward_and_steps_the_whole_model():
    """ddp_allreduce (PyTorch DDP without ZeRO, the DiLoCo papers' Data-Parallel): each bucket
    all-reduced (twice a reduce-scatter's bytes) where ddp_overlap reduce-scatters it, the whole
    model's AdamW on every GPU where ZeRO-1 steps a shard, and no all-gather after the step."""
    from acco.harness.simulation.sweep import primitives
    from acco.harness.simulation.topology import ADAMW_BYTES_PER_PARAM, all_gather_s, ddp_overlap_parts

    topo = topology(1, 2, 100, alpha_inter_us=0)
    P, hbm = 1e8, topo.hbm_bytes_per_s
    buckets, reduce_rs, tail_rs = ddp_overlap_parts(P, topo, 2, 2)
    same, reduce_ar, tail_ar = ddp_overlap_parts(P, topo, 2, 2, replicated=True)
    assert same == buckets and len(buckets.entries) > 2
    assert reduce_ar == pytest.approx([2 * r for r in reduce_rs])
    assert tail_rs == pytest.approx(P / 2 * ADAMW_BYTES_PER_PARAM / hbm + all_gather_s(2 * P, topo))
    assert tail_ar == pytest.approx(P * ADAMW_BYTES_PER_PARAM / hbm)
    assert ddp_overlap_parts(P, topo, 2, 2, optimizer=False, replicated=True)[2] == 0.0
    # accum 1, no optimizer time, a step of 1 s (forward 1/3, backward 2/3): the all-reduce fits in
    # the backward save its last bucket's, so the replicated DDP beats ZeRO-1's exposed all-gather
    sc = scenario("125m", topo, accum=1, step_time_s=1.0, optimizer=False, rounds=20)
    prim = primitives(sc)
    assert sum(prim["ddp_allreduce"][1]) < 2 / 3  # the whole all-reduce shorter than the backward
    rows = {r["method"]: r for r in run([sc], ["ddp", "ddp_overlap", "ddp_allreduce"])}
    last = prim["ddp_allreduce"][1][-1]  # the bucket final when the backward ends is never hidden
    assert rows["ddp_allreduce"]["step_s"] == pytest.approx(1.0 + last, rel=1e-6)
    assert rows["ddp_overlap"]["step_s"] > rows["ddp_allreduce"]["step_s"]  # its gather is exposed
    assert rows["ddp"]["step_s"] == pytest.approx(1.0 + 2 * reduce_scatter_s(2 * sc.model.params, topo))
