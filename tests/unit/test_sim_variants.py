"""The simulator speaks the trainer's vocabulary and schedules a method by its spec's facts
(acco/harness/simulation/variants.py): `--methods` takes trainer spellings and the old keys, each
result key's schedule follows from its method's facts and settings, and a method registered beside
the suite's is simulated (and priced by the cost model) with no simulator file naming it."""

from __future__ import annotations

from dataclasses import replace

import pytest

from acco import methods
from acco.analytic import costmodel
from acco.harness.simulation import variants as sim
from acco.harness.simulation.cli import main
from acco.harness.simulation.sweep import primitives, run, scenario
from acco.harness.simulation.topology import topology
from acco.methods import variants as spellings

# each built-in key: (schedule, rounds per committed step, adaptive, fragmented)
EXPECTED = {
    "ddp": (sim.SEQUENTIAL, 1, False, False),
    "ddp_overlap": (sim.BUCKETED, 1, False, False),
    "ddp_allreduce": (sim.BUCKETED, 1, False, False),
    "fsdp": (sim.LAYERWISE, 1, False, False),
    "fsdp_grad_op": (sim.LAYERWISE, 1, False, False),
    "dpu": (sim.OVERLAPPED, 1, False, False),
    "wp": (sim.OVERLAPPED, 1, False, False),
    "acco": (sim.OVERLAPPED, 2, False, False),
    "acco_adaptive": (sim.OVERLAPPED, 2, True, False),
    "diloco": (sim.LOCAL, 1, False, False),
    "streaming_diloco": (sim.LOCAL, 1, False, True),
}


@pytest.mark.parametrize("key", list(EXPECTED))
def test_each_keys_schedule_follows_from_its_methods_facts(key):
    f = sim.modelled(key)
    assert (f.schedule, f.rounds_per_step, f.adaptive, f.fragmented) == EXPECTED[key]


def test_the_table_is_the_suites_keys_in_order():
    assert sim.keys() == tuple(EXPECTED)


@pytest.fixture
def registered():
    """Three methods defined here, not in acco/methods: a DDP under another name, a local method
    (DiLoCo's facts) and an overlapped one of two rounds (ACCO's); removed afterwards."""
    specs = [
        replace(methods.get("ddp"), name="test_sequential", label="sequential (test)"),
        replace(methods.get("diloco"), name="test_local_sgd", label="local SGD (test)"),
        replace(methods.get("acco"), name="test_two_rounds", label="two rounds (test)"),
    ]
    for spec in specs:
        methods.register(spec)
    yield [spec.name for spec in specs]
    for spec in specs:
        del methods.METHODS[spec.name]


def _by_method(rows):
    return {r["method"]: r for r in rows}


def test_a_registered_method_is_simulated_by_its_facts(registered):
    assert sim.keys()[-3:] == tuple(registered)
    assert sim.modelled("test_local_sgd").schedule == sim.LOCAL
    sc = scenario("125m", topology(8, 2, 100.0), rounds=16)
    rows = _by_method(run([sc]))  # every key by default, the registered ones too
    assert rows["test_sequential"]["label"] == "sequential (test)"
    # the same facts as a suite method's variant at the same settings: the same numbers
    for twin, of in (("test_sequential", "ddp"), ("test_local_sgd", "diloco"), ("test_two_rounds", "acco_adaptive")):
        for column in ("sync_s", "step_s", "samples_per_s", "idle_fraction", "memory_gb"):
            assert rows[twin][column] == rows[of][column], (twin, column)
    assert primitives(sc)["sync_s"]["test_two_rounds"] == primitives(sc)["sync_s"]["acco"]


def test_the_cost_model_prices_a_registered_method_by_its_facts(registered):
    c, m, T = 1.0, 0.4, 10
    assert costmodel.run_time("test_sequential", T, c, m) == costmodel.run_time("ddp", T, c, m)
    assert costmodel.run_time("test_two_rounds", T, c, m) == costmodel.run_time("acco", T, c, m)
    local = (8, 1, 0)
    assert costmodel.run_time("test_local_sgd", T, c, m, local=local) == costmodel.run_time("diloco", T, c, m, 0, local)
    with pytest.raises(methods.UnknownMethod):
        costmodel.run_time("sgd", T, c, m)


ARGS = ["--model", "125m", "--nodes", "2", "--inter-gbps", "100", "--rounds", "16"]


def test_the_command_line_shows_a_registered_method(registered, capsys, tmp_path):
    assert main([*ARGS, "--methods", "ddp,test_sequential,test_two_rounds:deterministic=false"]) == 0
    out = capsys.readouterr().out
    assert "\ntest_sequential " in out and "\ntest_two_rounds " in out


def test_trainer_spellings_give_the_old_keys_rows(tmp_path, capsys):
    spelled, keyed = tmp_path / "spelled.csv", tmp_path / "keyed.csv"
    new = "ddp:overlap_backward=true,acco:deterministic=false,acco,dpu"
    assert main([*ARGS, "--methods", new, "--csv", str(spelled)]) == 0
    assert capsys.readouterr().err == ""
    spellings._told.clear()
    assert main([*ARGS, "--methods", "ddp_overlap,acco_adaptive,acco,dpu", "--csv", str(keyed)]) == 0
    err = capsys.readouterr().err.splitlines()  # each old key says its spelling, once
    assert len(err) == 2 and "'acco:deterministic=false'" in err[1]
    assert spelled.read_text() == keyed.read_text()  # the `method` column keeps the keys
    assert spelled.read_text().splitlines()[1].startswith("ddp_overlap,")


@pytest.mark.parametrize("typed", ["sgd", "ddp:impl=torch", "acco:deterministic=maybe", "ddp,"])
def test_an_unknown_method_is_one_line_exit_2(typed, capsys):
    assert main([*ARGS, "--methods", typed]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: --methods")
