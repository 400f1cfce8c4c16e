"""The method registry (acco/methods/): every method's spec exists and agrees with what the code that
runs it does: the schedule of rounds (driven here on a recording engine: rounds per committed step,
the kinds of sync launched), the method's config file (its settings, ddp's default impl), the memory
model's layout and the analysis's Table 1 row. An unknown name is one line naming the known ones; a
method registered from outside the package is in METHODS."""

from __future__ import annotations

from dataclasses import replace

import pytest
import yaml

from acco import methods
from acco.config.location import conf_dir
from acco.engine.rounds import StopRule
from acco.engine.sync import SyncKind
from acco.methods import METHODS, MethodSpec
from tests.helpers.recording_engine import RecordingEngine

SUITE = ("ddp", "dpu", "wp", "acco", "diloco", "streaming_diloco")


def method_conf(name: str) -> dict:
    with open(f"{conf_dir()}/method/{name}.yaml") as f:
        conf = yaml.safe_load(f)
    conf.pop("defaults", None)
    return conf


def test_every_suite_method_has_one_spec_in_the_suites_order():
    assert tuple(METHODS)[: len(SUITE)] == SUITE
    for name in SUITE:
        spec = methods.get(name)
        assert isinstance(spec, MethodSpec) and spec.name == name and spec.label


@pytest.mark.parametrize("name", [n for n in SUITE if METHODS[n].backend == methods.FLAT])
def test_flat_schedule_agrees_with_the_spec(name):
    from acco.train.backend_flat import SCHEDULES

    spec = methods.get(name)
    engine, steps, warmup = RecordingEngine(), 6, 2
    # a budget's end (not known in advance): every step computes its rounds
    settings = {"warmup_steps": warmup}  # the method's settings (dpu, wp read theirs)
    SCHEDULES[spec.schedule](engine, StopRule(lambda t: t >= steps), lambda t, result: None, 0, settings)
    assert engine.rounds == steps * spec.rounds_per_step
    assert engine.kinds == set(spec.sync_kinds)
    assert all(SyncKind(kind) for kind in spec.sync_kinds)


def test_rounds_per_step_is_the_budgets():
    from acco.train.budget import nominal_samples_per_step

    for name in SUITE:
        assert nominal_samples_per_step(name, 2, 3, 4) == 2 * 3 * 4 * METHODS[name].rounds_per_step
    assert METHODS["acco"].rounds_per_step == 2
    assert all(METHODS[n].rounds_per_step == 1 for n in SUITE if n != "acco")


@pytest.mark.parametrize("name", SUITE)
def test_settings_are_the_method_configs(name):
    spec, conf = methods.get(name), method_conf(name)
    assert conf.pop("name") == name
    assert set(spec.settings) == set(conf)
    if spec.impls:
        assert spec.default_impl == conf["impl"] and conf["impl"] in spec.impl_names


@pytest.mark.parametrize("name", SUITE)
def test_memory_layout_agrees_with_the_spec(name):
    from acco.train.memory import TORCH_ZERO1, state_layout

    spec = methods.get(name)
    for impl in spec.impl_names or (None,):
        conf = method_conf(name) | ({"impl": impl} if impl else {})
        cfg = {"method": conf, "train": {"precision": "bf16", "grad_dtype": "auto"}, "device": "cuda"}
        layout = state_layout(cfg)
        assert (layout is TORCH_ZERO1) == (spec.backend_for(conf) == methods.TORCH_DDP)
        assert bool(layout.local_fragments) == spec.local


def test_table1_rows_are_the_analysis():
    from acco.analytic.table1 import TABLE1_FORMULAS, TABLE1_NAMES
    from analysis.load import spec_of

    for name in SUITE:  # analysis/tables.py reads a run's Table 1 row from its spec
        assert METHODS[name].table1_row in TABLE1_NAMES
    assert spec_of("ddp_overlap").table1_row == "zero1"  # a variant's row is its method's

    assert TABLE1_FORMULAS[METHODS["acco"].table1_row][0](12, 4) == 2 + 2 + 2 + 12 / 4


def test_unknown_method_is_one_line_naming_the_known_ones():
    with pytest.raises(ValueError) as err:
        methods.get("adam")
    message = str(err.value)
    assert "\n" not in message and "'adam'" in message
    assert all(name in message for name in SUITE)


def test_a_registered_method_is_in_the_registry():
    spec = replace(methods.get("dpu"), name="test_local_sgd", label="local SGD (test)")
    try:
        assert methods.register(spec) is spec
        assert METHODS["test_local_sgd"] is spec and methods.get("test_local_sgd") is spec
        with pytest.raises(ValueError, match="already registered"):
            methods.register(replace(spec, label="another"))
        from acco.train.budget import nominal_samples_per_step

        assert nominal_samples_per_step("test_local_sgd", 2, 1, 1) == 2
    finally:
        METHODS.pop("test_local_sgd", None)
    assert "test_local_sgd" not in METHODS


def test_the_registry_imports_only_the_standard_library():
    """acco.methods is read before any dependency is known to be there (a plan on a submit host,
    gpu_check's import check): importing it loads no third-party package, and its MISSING is OmegaConf's."""
    import subprocess
    import sys

    code = (
        "import sys; import acco.methods, acco.methods.variants; "
        "print(sorted(m for m in ('omegaconf', 'hydra', 'torch', 'yaml') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
    from omegaconf import MISSING

    from acco.methods import settings

    assert settings.MISSING == MISSING
