"""Wide-area links (acco/harness/simulation/wan.py): per-node bandwidths, the TCP cap over a long round
trip, jitter per outer sync, CPU quantisation and the int8/int4 payloads, on cases with known answers."""

import csv

import numpy as np
import pytest

from acco.harness.simulation import schedules
from acco.harness.simulation.cli import build, check, main, parse_args
from acco.harness.simulation.sweep import run
from acco.harness.simulation.topology import GBIT, PRECISION_BYTES, sync_parts, topology
from acco.harness.simulation.wan import MIB, REPORT_DRAWS, Links, outer_syncs, parse_bandwidths

P = 1e9
# one's own 1B model on 4 nodes of 8 GPUs, DiLoCo and Streaming DiLoCo beside DDP, a short run
BASE = ["--params", f"{P:g}", "--layers", "16", "--gpus-per-node", "8", "--nodes", "4", "--H", "16", "--F", "4"]
BASE += ["--rounds", "64", "--methods", "ddp,diloco,streaming_diloco"]
COMPARED = ("sync_s", "step_s", "samples_per_s", "idle_fraction", "outer_sync_p50_s", "outer_sync_p90_s")


def rows(*extra: str) -> dict[str, dict]:
    a = parse_args([*BASE, *extra])
    check(a)
    return {r["method"]: r for r in run([build(a)], a.methods.split(","))}


def same(a: dict[str, dict], b: dict[str, dict]) -> bool:
    return all(a[m][c] == b[m][c] or np.isnan(a[m][c]) and np.isnan(b[m][c]) for m in a for c in COMPARED)


def test_the_slowest_link_governs_every_ring():
    listed = rows("--inter-gbps", "10,10,2.5,10")
    assert same(listed, rows("--inter-gbps", "2.5"))  # the ring moves at its slowest node's pace
    fast = rows("--inter-gbps", "10")
    for m in ("ddp", "diloco", "streaming_diloco"):
        assert listed[m]["sync_s"] > fast[m]["sync_s"]
    assert listed["diloco"]["inter_gbps"] == pytest.approx(2.5)
    # each node's bandwidth kept as a multiple of the slowest one's
    assert parse_bandwidths("10,10,2.5,10", 4) == (2.5, (4.0, 4.0, 1.0, 4.0))


def test_one_value_in_a_list_is_the_float():
    assert same(rows("--inter-gbps", "40,40,40,40"), rows("--inter-gbps", "40"))
    assert parse_bandwidths("40", 4) == parse_bandwidths("40,40,40,40", 4) == (40.0, ())
    assert parse_bandwidths(None, 4) == (None, ())
    assert Links().uniform and Links(scale=(1.0, 1.0)).uniform


def test_rtt_caps_a_link_at_streams_times_window_over_rtt():
    links = Links(rtt_s=0.1, streams=3, tcp_window_bytes=4 * MIB)
    assert links.tcp_cap_bytes_per_s() == pytest.approx(3 * 4 * 2**20 / 0.1)
    topo = topology(8, 4, inter_gbps=10)
    assert links.ring_bytes_per_s(topo) == pytest.approx(3 * 4 * 2**20 / 0.1)  # 1.0 Gbit/s < 10
    # the outer sync at the capped link is the uniform model's at that bandwidth
    capped = sync_parts("diloco", P, links.effective(topo)).total
    assert capped == pytest.approx(sync_parts("diloco", P, topology(8, 4, inter_gbps=3 * 4 * 2**20 / 0.1 / GBIT)).total)
    # through the command line: 100 ms, one stream of 4 MiB = 0.3355 Gbit/s
    cap_gbps = 4 * 2**20 / 0.1 / GBIT
    got, want = rows("--inter-gbps", "10", "--rtt-ms", "100"), rows("--inter-gbps", f"{cap_gbps!r}")
    for m in ("ddp", "diloco", "streaming_diloco"):
        assert got[m]["sync_s"] == pytest.approx(want[m]["sync_s"], rel=1e-12)


def test_more_streams_lift_the_cap_up_to_the_link():
    topo = topology(8, 4, inter_gbps=10)
    rings = [Links(rtt_s=0.1, streams=k).ring_bytes_per_s(topo) for k in (1, 2, 4, 8, 16, 32, 64)]
    assert rings[1] == pytest.approx(2 * rings[0]) and rings[2] == pytest.approx(4 * rings[0])
    assert all(a <= b for a, b in zip(rings, rings[1:]))
    assert rings[-1] == topo.inter_bytes_per_s  # 64 streams carry 2.7 GB/s: the 10 Gbit/s link binds
    assert same(rows("--inter-gbps", "10", "--rtt-ms", "100", "--streams", "64"), rows("--inter-gbps", "10"))


def test_jitter_spreads_the_outer_syncs():
    plain = rows("--inter-gbps", "1")
    small = rows("--inter-gbps", "1", "--link-jitter", "lognormal:0.01")
    wide = rows("--inter-gbps", "1", "--link-jitter", "lognormal:0.3")
    for m in ("diloco", "streaming_diloco"):
        assert plain[m]["outer_sync_p50_s"] == plain[m]["outer_sync_p90_s"] == plain[m]["sync_s"]
        assert small[m]["outer_sync_p50_s"] == pytest.approx(plain[m]["sync_s"], rel=0.03)
        assert wide[m]["outer_sync_p90_s"] > wide[m]["outer_sync_p50_s"] > plain[m]["sync_s"]
        assert wide[m]["step_s"] > plain[m]["step_s"]  # the link-bound schedule meets each slow sync
    assert np.isnan(wide["ddp"]["outer_sync_p50_s"]) and wide["ddp"]["sync_s"] == plain["ddp"]["sync_s"]
    # seeded by --seed, apart from the stragglers' draws
    assert same(wide, rows("--inter-gbps", "1", "--link-jitter", "lognormal:0.3"))
    other = rows("--inter-gbps", "1", "--link-jitter", "lognormal:0.3", "--seed", "1")
    assert other["diloco"]["outer_sync_p50_s"] != wide["diloco"]["outer_sync_p50_s"]


def test_a_lone_slow_link_gives_the_lognormal_quantiles():
    # node 1 is 100x faster, so the ring is node 0's jittered link: time ∝ 1/factor, whose median is
    # the no-jitter time and whose p90 is exp(1.2816·S) of it (the normal's 10th percentile, inverted)
    topo = topology(1, 2, inter_gbps=1, alpha_intra_us=0, alpha_inter_us=0)
    links = Links(scale=(1.0, 100.0), jitter_sigma=0.3)
    base = sync_parts("diloco", P, topo, optimizer=False).total
    per_sync = outer_syncs(links, topo, 4, 0, lambda t: sync_parts("diloco", P, t, optimizer=False), P)
    assert len(per_sync) == REPORT_DRAWS  # a short run's 4 syncs are too few for a p90
    assert np.percentile(per_sync, 50) == pytest.approx(base, rel=0.05)
    assert np.percentile(per_sync, 90) == pytest.approx(base * np.exp(1.2816 * 0.3), rel=0.05)


def test_the_schedule_takes_each_outer_sync_in_turn():
    # DiLoCo, 6 periods of H = 8 inner steps of 2 × 0.25 s; the syncs alternate 1 s and 3 s: the
    # steady state (periods 2-6) is 5 × 8 × 0.5 s + the syncs of periods 2-6 (3+1+3+1+3 = 11 s)
    per_sync = np.array([[1.0], [3.0]] * 3)
    t = schedules.local(np.array([0.25]), np.ones((48, 1, 2)), per_sync, accum=2, H=8)
    assert t.step_s[0] == pytest.approx((5 * 8 * 0.5 + 11) / 40)
    # one row for all is the one time
    one = schedules.local(np.array([0.25]), np.ones((48, 1, 2)), np.array([[2.0]]), accum=2, H=8)
    assert one.step_s[0] == schedules.local(np.array([0.25]), np.ones((48, 1, 2)), np.array([2.0]), 2, 8).step_s[0]


def test_int8_and_int4_payloads_halve_and_quarter_bf16():
    assert PRECISION_BYTES["int8"] == PRECISION_BYTES["bf16"] / 2 == PRECISION_BYTES["fp8"]
    assert PRECISION_BYTES["int4"] == PRECISION_BYTES["int8"] / 2
    topo = topology(8, 4, inter_gbps=10, alpha_intra_us=0, alpha_inter_us=0)  # bytes only, no latency
    bf16 = sync_parts("diloco", P, topo, outer_bytes=PRECISION_BYTES["bf16"], optimizer=False)
    int8 = sync_parts("diloco", P, topo, outer_bytes=PRECISION_BYTES["int8"], optimizer=False)
    assert int8.reduce_s == pytest.approx(bf16.reduce_s / 2) and int8.total == pytest.approx(bf16.total / 2)


@pytest.mark.parametrize("replica_gpus", [1, 8])
def test_quantisation_adds_values_times_4_over_q_twice(replica_gpus):
    extra = ["--inter-gbps", "10", "--replica-gpus", str(replica_gpus), "--outer-precision", "int8"]
    free, cpu = rows(*extra), rows(*extra, "--quantize-gbytes", "2")
    for m, F in (("diloco", 1), ("streaming_diloco", 4)):
        values = P / F / replica_gpus  # what one GPU sends in one outer sync
        assert cpu[m]["sync_s"] - free[m]["sync_s"] == pytest.approx(values * 4 / 2e9 * 2)
    assert cpu["ddp"]["sync_s"] == free["ddp"]["sync_s"]  # only the outer syncs quantise


def test_the_report_gives_the_median_and_p90(tmp_path, capsys):
    out = tmp_path / "rows.csv"
    args = [*BASE, "--inter-gbps", "1", "--link-jitter", "lognormal:0.3", "--csv", str(out)]
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "outer sync p50/p90 s" in printed and "log-normal jitter per outer sync" in printed
    with open(out) as fh:
        table = {r["method"]: r for r in csv.DictReader(fh)}
    assert float(table["diloco"]["outer_sync_p90_s"]) > float(table["diloco"]["outer_sync_p50_s"])
    assert table["ddp"]["outer_sync_p50_s"] == "nan"


@pytest.mark.parametrize(
    "args,word",
    [
        (["--inter-gbps", "10,10,10"], "--nodes 4"),
        (["--inter-gbps", "10,-1,10,10"], "positive"),
        (["--inter-gbps", "10,x,10,10"], "--inter-gbps"),
        (["--link-jitter", "gamma:0.3"], "gamma"),
        (["--link-jitter", "lognormal:-1"], "--link-jitter"),
        (["--link-jitter", "lognormal"], "--link-jitter"),
        (["--rtt-ms", "-5"], "--rtt-ms"),
        (["--streams", "0"], "--streams"),
        (["--tcp-window-mb", "0"], "--tcp-window-mb"),
        (["--quantize-gbytes", "-1"], "--quantize-gbytes"),
    ],
)
def test_bad_wide_area_values_exit_2_with_one_line(args, word, capsys):
    assert main([*BASE, *args]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and word in lines[0]
