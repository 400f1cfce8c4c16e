"""The simulator's cluster networks (issue 51): NICs per node on the presets, the min(rings, NICs)
rule, the one-NIC-per-node setting, the A100-40GB preset and the flags' bad values."""

import pytest

from acco.analytic.costmodel import reduce_scatter_time
from acco.harness.simulation.cli import build, check, main, parse_args
from acco.harness.simulation.networks import GBIT, NETWORKS
from acco.harness.simulation.sweep import run, utilization
from acco.harness.simulation.topology import SIM_PRESETS, Group, group_reduce_scatter_s, reduce_scatter_s, topology


def args(*argv):
    a = parse_args(list(argv))
    check(a)
    return a


def test_every_preset_carries_nics_and_their_bandwidth():
    assert set(NETWORKS) == set(SIM_PRESETS)
    expected = {"A100": (8, 200), "A100-40GB": (4, 100), "H100": (8, 400), "H200": (8, 400)}
    for gpu, (nics, gbps) in expected.items():
        topo = topology(8, 4, gpu=gpu)
        assert (topo.nics_per_node, topo.inter_bytes_per_s) == (nics, pytest.approx(nics * gbps * GBIT))
        assert SIM_PRESETS[gpu].inter_bytes_per_s == pytest.approx(nics * gbps * GBIT)


def test_a_multi_node_h100_prediction_on_the_defaults_uses_8_x_400():
    topo = build(args("--gpu", "H100", "--nodes", "8")).topo
    assert topo.nics_per_node == 8 and topo.inter_bytes_per_s == pytest.approx(3200 * GBIT)
    # 8 rings across nodes (one per GPU) over 8 NICs: the node's whole 3,200 Gb/s
    S = 2 * 13e9
    inter = reduce_scatter_time(S, 8, topo.alpha_inter_s, 1 / (3200 * GBIT))
    intra = reduce_scatter_time(S, 8, topo.alpha_intra_s, 1 / topo.intra_bytes_per_s)
    assert reduce_scatter_s(S, topo) == pytest.approx(intra + inter)


def test_fewer_rings_than_nics_use_as_many_nics_as_rings():
    topo = topology(1, 4, gpu="H100")  # one GPU per node: one ring, one of the 8 NICs
    assert topo.inter_for(1) == pytest.approx(400 * GBIT)
    assert topology(2, 4, gpu="H100").inter_for(2) == pytest.approx(800 * GBIT)
    assert topology(8, 4, gpu="H100").inter_for(16) == pytest.approx(3200 * GBIT)  # at most all of them
    S = 1e9
    assert reduce_scatter_s(S, topo) == pytest.approx(reduce_scatter_time(S, 4, topo.alpha_inter_s, 1 / (400 * GBIT)))
    # the outer sync between replicas of one node: 8 rings (one per shard) share the node's NICs
    across = Group(1, 4, 8)
    assert group_reduce_scatter_s(S, topology(8, 4, gpu="H100"), across) == pytest.approx(
        reduce_scatter_time(8 * S, 4, topo.alpha_inter_s, 1 / (3200 * GBIT))
    )
    # A100-40GB: 4 NICs, 8 rings: all 4 carry them
    assert topology(8, 2, gpu="A100-40GB").inter_for(8) == pytest.approx(400 * GBIT)


def test_inter_gbps_is_the_nodes_total_and_one_link_unless_nics_are_given():
    alone = topology(1, 4, 800, gpu="H100")
    assert alone.nics_per_node == 1 and alone.inter_for(1) == pytest.approx(800 * GBIT)
    spread = topology(1, 4, 800, gpu="H100", nics_per_node=8)
    assert spread.inter_for(1) == pytest.approx(100 * GBIT)
    assert topology(8, 4, gpu="H100", nic_gbps=100).inter_bytes_per_s == pytest.approx(800 * GBIT)


def rows(*argv):
    return {r["method"]: r for r in run([build(args(*argv))], ["ddp", "ddp_overlap", "acco", "diloco"])}


@pytest.mark.parametrize(
    "gpu,one_nic,old",
    [("H100", ["--nics-per-node", "1"], "400"), ("A100", ["--nics-per-node", "1", "--nic-gbps", "100"], "100")],
)
def test_one_nic_per_node_reproduces_the_old_per_node_network(gpu, one_nic, old):
    """The presets before issue 51: one link per node, 400 Gb/s (H100) and 100 Gb/s (A100)."""
    base = ["--gpu", gpu, "--nodes", "4", "--model", "1.3b", "--rounds", "40", "--H", "8"]
    new, before = rows(*base, *one_nic), rows(*base, "--inter-gbps", old)
    for method in new:
        assert new[method]["step_s"] == before[method]["step_s"], method
        assert new[method]["sync_s"] == before[method]["sync_s"], method
    topo = build(args(*base, *one_nic)).topo
    S = 2 * 1.3e9  # the flat ddp's reduce-scatter on the old formula: one link of `old` Gb/s per node
    old_rs = reduce_scatter_time(S, 8, topo.alpha_intra_s, 1 / topo.intra_bytes_per_s) + reduce_scatter_time(
        S, 4, topo.alpha_inter_s, 1 / (float(old) * GBIT)
    )
    assert reduce_scatter_s(S, topo) == pytest.approx(old_rs)
    # 8 NICs make the same network's sync shorter
    assert rows(*base)["ddp"]["sync_s"] < new["ddp"]["sync_s"]


def test_a100_40gb_preset_runs(capsys):
    argv = ["--gpu", "A100-40GB", "--nodes", "2", "--model", "1.3b", "--methods", "ddp,acco", "--rounds", "20"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "A100-40GB" in out and "inter 400 Gbit/s per node (4 NICs)" in out and "GPU 40 GB" in out
    topo = topology(8, 2, gpu="A100-40GB")
    assert (topo.hbm_bytes_per_s, topo.memory_gb) == (1.555e12, 40.0)
    assert (topo.peak_flops, topo.intra_bytes_per_s, topo.mfu) == (
        topology(8, 2).peak_flops,
        topology(8, 2).intra_bytes_per_s,
        topology(8, 2).mfu,
    )


def test_bandwidth_sweeps_a_nodes_one_link():
    """--find-bandwidth's utilization sweeps the node's bandwidth as --inter-gbps alone sets it."""
    base = ["--gpus-per-node", "1", "--nodes", "2", "--model", "125m", "--rounds", "20", "--H", "4"]
    preset, one = build(args(*base, "--gpu", "H100")), build(args(*base, "--gpu", "H100", "--nics-per-node", "1"))
    assert list(utilization(preset, "diloco", [1.0, 10.0])) == list(utilization(one, "diloco", [1.0, 10.0]))


@pytest.mark.parametrize(
    "argv,message",
    [
        (["--nics-per-node", "0"], "--nics-per-node 0: at least 1"),
        (["--nic-gbps", "0"], "--nic-gbps 0: must be positive"),
        (["--nic-gbps", "-5"], "--nic-gbps -5: must be positive"),
        (["--nic-gbps", "100", "--inter-gbps", "800"], "give one"),
        (["--nic-gbps", "100", "--inter-busbw", "20@2"], "give one"),
        (["--nics-per-node", "4", "--inter-busbw", "20@2"], "leave --nics-per-node out"),
        (["--nics-per-node", "two"], "invalid int value"),
        (["--gpu", "A100-80GB"], "unknown --gpu"),
    ],
)
def test_bad_network_values_exit_2_with_one_line(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1, err
