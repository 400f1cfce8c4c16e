"""The α-β cost model: closed forms of ring collectives, the step-time models, calibration that
recovers known parameters, and the shape of its paper-hardware predictions."""

from __future__ import annotations

import math

import pytest

from acco.analytic import costmodel as cm


@pytest.mark.parametrize("n", [2, 3, 8, 64])
def test_ring_closed_forms(n):
    S, a, b = 1e9, 5e-6, 1 / 25e9
    rs = cm.reduce_scatter_time(S, n, a, b)
    assert rs == pytest.approx((n - 1) * a + (n - 1) / n * S * b)
    assert cm.all_gather_time(S, n, a, b) == pytest.approx(rs)
    assert cm.all_reduce_time(S, n, a, b) == pytest.approx(2 * rs)  # all-reduce = RS + AG
    # pure bandwidth: an all-reduce moves 2(N-1)/N of the buffer over the slowest link
    assert cm.all_reduce_time(S, n, 0.0, b) == pytest.approx(2 * (n - 1) / n * S * b)
    # pure latency: 2(N-1) sequential steps
    assert cm.all_reduce_time(0.0, n, a, b) == pytest.approx(2 * (n - 1) * a)


def test_one_worker_communicates_nothing():
    assert cm.all_reduce_time(1e9, 1, 1e-3, 1e-9) == 0.0
    assert cm.reduce_scatter_time(1e9, 1, 1e-3, 1e-9) == 0.0


def test_step_models():
    assert cm.ddp_step_time(1.0, 0.5) == 1.5
    assert cm.acco_round_time(1.0, 0.5) == 1.0
    assert cm.acco_round_time(1.0, 3.0) == 3.0
    assert cm.acco_reduction(1.0, 1.0) == pytest.approx(0.5)  # perfect overlap halves the time at m = c
    assert cm.acco_reduction(1.0, 0.0) == 0.0


def test_hardware_link_switches_to_the_network_across_nodes():
    a8, b8 = cm.A100.link(8)
    a16, b16 = cm.A100.link(16)
    assert b8 == pytest.approx(1 / 300e9) and b16 == pytest.approx(8 / 100e9)
    assert a16 >= a8


def test_calibration_recovers_known_alpha_and_efficiency():
    alpha, eff = 0.004, 0.8
    samples = []
    for n in (2, 4):
        for rate in (25.0, 50.0, 200.0, 800.0):
            for kind in ("reduce_scatter", "all_gather"):
                nbytes = 2e6
                sent = (n - 1) / n * nbytes
                secs = (n - 1) * alpha + sent / (eff * rate * 1e6 / 8)
                samples.append({"kind": kind, "nbytes": nbytes, "workers": n, "rate_mbit": rate, "seconds": secs})
    fit = cm.calibrate(samples, {2: 0.1})
    assert fit.alpha_s == pytest.approx(alpha, rel=1e-6)
    assert fit.efficiency == pytest.approx(eff, rel=1e-6)
    assert fit.collective_s("all_gather", 2e6, 4, 50.0) == pytest.approx(3 * alpha + 0.75 * 2e6 / (eff * 50e6 / 8))


def test_calibration_never_credits_a_link_above_its_rate():
    samples = [
        {"kind": "reduce_scatter", "nbytes": 1e6, "workers": 2, "rate_mbit": r, "seconds": 0.5 * 0.5e6 / (r * 1e6 / 8)}
        for r in (10.0, 100.0)
    ]
    assert cm.calibrate(samples).efficiency == 1.0


def test_fig4_shape():
    rows = cm.fig4_curve()
    by_n = {r["workers"]: r["ratio"] for r in rows}
    assert by_n[8] < 1.0  # inside a node (NVLink) the all-reduce is cheaper than the compute
    assert by_n[16] > 2.0  # crossing the 100 Gb/s network it dominates
    ratios = [by_n[n] for n in sorted(by_n) if n >= 16]
    assert all(b >= a for a, b in zip(ratios, ratios[1:]))  # and keeps growing with N


def test_table3_predictions_are_bounded_by_perfect_overlap():
    for row in cm.table3_rows():
        assert 0.0 <= row["predicted_reduction_pct"] <= 100 / 3 + 1e-9
        assert math.isfinite(row["paper_reduction_pct"])


def test_run_time_closed_forms():
    """A run of T steps, built round by round as acco/engine/rounds.py schedules them."""
    c, m, T = 1.0, 0.4, 10
    assert cm.run_time("ddp", T, c, m) == pytest.approx(T * (c + m))
    # acco: prologue (compute only), 2T rounds of max(c, m) of which the last has no compute
    assert cm.run_time("acco", T, c, m) == pytest.approx(c + (2 * T - 1) * max(c, m) + m)
    # dpu with W sequential steps, then a prologue round, T - W overlapped rounds, the last sync alone
    W = 3
    assert cm.run_time("dpu", T, c, m, W) == pytest.approx(W * (c + m) + c + (T - W - 1) * c + m)
    assert cm.run_time("wp", T, c, m, T) == pytest.approx(cm.run_time("ddp", T, c, m))
    # communication-bound: every overlapped round costs m
    assert cm.run_time("acco", T, 0.1, 2.0) == pytest.approx(0.1 + (2 * T - 1) * 2.0 + 2.0)
    # the same micro-batches per step (DDP accumulates ACCO's two rounds): while the sync hides
    # under a round (m <= c) ACCO saves the m of every step; ACCO syncs twice per step, so when
    # communication dominates it does not
    for c, m in [(1.0, 0.1), (1.0, 1.0)]:
        assert cm.run_time("acco", T, c, m) == pytest.approx(cm.run_time("ddp", T, 2 * c, m) - (T - 1) * m)
    assert cm.run_time("acco", T, 0.2, 1.0) > cm.run_time("ddp", T, 0.4, 1.0)


def test_run_time_of_the_local_methods():
    """DiLoCo waits for an outer sync every H steps (and the last step's); Streaming DiLoCo's
    fragment syncs (1/F of the bytes each) hide under τ inner steps where they can."""
    c, m = 1.0, 4.0
    assert cm.run_time("diloco", 64, c, m, local=(32, 1, 0)) == pytest.approx(64 * c + 2 * m)
    assert cm.run_time("diloco", 40, c, m, local=(32, 1, 0)) == pytest.approx(40 * c + 2 * m)  # 32, and 40
    assert cm.run_time("diloco", 64, c, m, local=(8, 1, 0)) == pytest.approx(64 * c + 8 * m)
    # F = 4 fragments of 1.0 s each: one inner step of 1.0 s hides it, only the final sync shows
    assert cm.run_time("streaming_diloco", 64, c, m, local=(32, 4, 1)) == pytest.approx(64 * c + m)
    # a slow link: each fragment's sync exposes m/F - τ c
    exposed = 64 * 4 / 32 * (40.0 / 4 - 1.0)
    assert cm.run_time("streaming_diloco", 64, c, 40.0, local=(32, 4, 1)) == pytest.approx(64 * c + exposed + 40.0)
    assert cm.run_time("streaming_diloco", 64, c, 40.0, local=(32, 4, 1)) < cm.run_time("ddp", 64, c, 40.0)


def test_torch_zero1_sync_moves_fp32_gradients_and_parameters():
    hw, n, P = cm.A100, 8, 1e9
    alpha, beta = hw.link(n)
    assert cm.zero1_torch_sync_time(P, n, hw) == pytest.approx(
        cm.all_reduce_time(4 * P, n, alpha, beta) + cm.all_gather_time(4 * P, n, alpha, beta)
    )
    # three fp32 ring passes against the flat engine's two bf16 ones: 3x the bytes
    flat = cm.sync_time(cm.Workload("w", P, 1, grad_bytes=2), n, hw)
    assert cm.zero1_torch_sync_time(P, n, replace_alpha(hw)) == pytest.approx(
        3 * cm.sync_time(cm.Workload("w", P, 1, grad_bytes=2), n, replace_alpha(hw))
    )
    assert flat < cm.zero1_torch_sync_time(P, n, hw)


def replace_alpha(hw):
    from dataclasses import replace

    return replace(hw, alpha_intra_s=0.0, alpha_inter_s=0.0)


def test_node_size_moves_the_ring_onto_the_network():
    """2x4 (Fig. 8): 8 workers already cross nodes; 1x8 stays on NVLink."""
    _, b18 = cm.on_nodes_of(cm.A100, 8).link(8)
    _, b24 = cm.on_nodes_of(cm.A100, 4).link(8)
    assert b24 > 10 * b18
