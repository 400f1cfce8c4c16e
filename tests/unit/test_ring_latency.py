"""A ring's latency pipelined behind the bytes before it (acco/analytic/overlap.py queued_s,
issue 51): buckets issued back to back pay one latency, a bucket that finds the link idle pays
its own; without latencies the rule is the virtual clock's, unchanged."""

import pytest

from acco.analytic.overlap import Buckets, back_to_back_s, hidden_s, queued_s, reductions_end
from acco.harness.simulation.sweep import primitives, scenario
from acco.harness.simulation.topology import (
    ddp_overlap_latency_s,
    reduce_scatter_s,
    ring_latency_s,
    sync_parts,
    topology,
)

N, LAT, BYTES = 1000, 280e-6, 20e-6  # 1,000 small buckets: 20 µs of bytes behind a 280 µs latency each
EVEN = Buckets.from_sizes([1] * N)


def test_queued_collective_runs_its_latency_beside_the_bytes_ahead():
    r = LAT + BYTES
    assert queued_s(1.0, None, r, LAT) == pytest.approx(1.0 + r)  # an idle link: all of it
    assert queued_s(1.0, 0.5, r, LAT) == pytest.approx(1.0 + r)  # the link freed before it was issued
    assert queued_s(1.0, 2.0, r, LAT) == pytest.approx(2.0 + BYTES)  # busy long enough: bytes only
    assert queued_s(1.0, 1.0001, r, LAT) == pytest.approx(1.0 + r)  # busy for less than its latency
    assert queued_s(1.0, 2.0, r) == pytest.approx(2.0 + r)  # no latency given: the clock's rule


def test_a_thousand_buckets_back_to_back_pay_one_latency():
    reduce = [LAT + BYTES] * N
    # all final at once (the backward's end): one latency and every bucket's bytes
    end = reductions_end(0.0, 0.0, EVEN, reduce, latency_s=[LAT] * N)
    assert float(end) == pytest.approx(LAT + N * BYTES)
    assert float(back_to_back_s(reduce, [LAT] * N)) == pytest.approx(LAT + N * BYTES)
    # without the pipelining every bucket pays its latency (the rule the virtual clock keeps)
    assert float(reductions_end(0.0, 0.0, EVEN, reduce)) == pytest.approx(N * (LAT + BYTES))
    # final faster than the link drains them (a backward of 10 ms, one every 10 µs): from the first
    # one's readiness, still one latency
    end = reductions_end(0.0, 0.01, EVEN, reduce, latency_s=[LAT] * N)
    assert float(end) == pytest.approx(0.01 / N + LAT + N * BYTES)


def test_buckets_that_find_the_link_idle_each_pay_their_latency():
    reduce = [LAT + BYTES] * N
    gap = 2 * (LAT + BYTES)  # each bucket final well after the one before has left the link
    bwd = N * gap
    piped = reductions_end(0.0, bwd, EVEN, reduce, latency_s=[LAT] * N)
    # the last one final at the backward's end, then its whole reduction: latency and bytes
    assert float(piped) == pytest.approx(bwd + LAT + BYTES)
    assert float(piped) == pytest.approx(float(reductions_end(0.0, bwd, EVEN, reduce)))
    # hidden: what the reductions would take back to back after the backward (one latency and the
    # bytes) less what stays exposed (the last bucket's whole reduction)
    assert float(hidden_s(0.0, bwd * 1.5, 1, EVEN, reduce, 2 / 3, [LAT] * N)) == pytest.approx(
        LAT + N * BYTES - (LAT + BYTES)
    )


def test_simulator_buckets_pipeline_their_ring_latency():
    """13B on 8x8 H100, one NIC per node (the issue's 1,000 buckets x 280 µs): the overlapped DDP's
    reductions issued back to back cost the one-buffer reduce-scatter, not 1,000 latencies more."""
    topo = topology(8, 8, gpu="H100", nics_per_node=1)
    assert ring_latency_s(topo) == pytest.approx(7 * 10e-6 + 7 * 30e-6)  # 280 µs
    assert ddp_overlap_latency_s(topo, replicated=True) == pytest.approx(2 * 280e-6)
    P = 13e9
    flat = sync_parts("ddp", P, topo)
    assert sync_parts("ddp", P, topo, ddp_bucket_mb=25).reduce_s == pytest.approx(flat.reduce_s)
    sc = scenario("125m", topo, rounds=20)
    prim = primitives(sc)
    buckets, reduce, tail = prim["ddp_overlap"]
    assert len(buckets) > 1
    assert prim["sync_s"]["ddp_overlap"] == pytest.approx(reduce_scatter_s(2 * sc.model.params, topo) + tail)
    assert sum(reduce) - prim["sync_s"]["ddp_overlap"] + tail == pytest.approx((len(buckets) - 1) * 280e-6)
