"""What a method owns, found through its spec (acco/methods/): its settings' dataclass is the config
schema of its group option, its fields carry their checks, its reference update, schedule of rounds
and backend are table entries by the names the spec gives, and a method registered from outside
acco (tests/plugins/local_sgd.py) is a config option of its own. The runs of such a method:
tests/integration/test_method_plugin.py."""

from __future__ import annotations

import dataclasses
import importlib
import sys

import pytest
import yaml

from acco import methods
from acco.config import schema
from acco.config.location import conf_dir
from acco.config.validate import ConfigError, check_overrides
from acco.engine.rounds import StopRule, run_sequential
from acco.methods import METHODS
from acco.methods.tables import lookup
from acco.train.settings import check_method

SUITE = ("ddp", "dpu", "wp", "acco", "diloco", "streaming_diloco")


@pytest.fixture
def local_sgd():
    spec = importlib.import_module("tests.plugins.local_sgd").SPEC
    methods.register(spec)
    yield spec
    METHODS.pop(spec.name, None)


@pytest.fixture
def ddp_then_dpu():
    """A method on the flat engine defined outside acco, registered for the test."""
    spec = importlib.import_module("tests.plugins.ddp_then_dpu").SPEC
    methods.register(spec)
    yield spec
    METHODS.pop(spec.name, None)


@pytest.mark.parametrize("name", SUITE)
def test_each_methods_settings_class_is_its_config_files_schema(name):
    spec = methods.get(name)
    with open(f"{conf_dir()}/method/{name}.yaml") as f:
        conf = yaml.safe_load(f)
    assert conf["defaults"][0] == spec.config_schema
    assert schema.option_kind("method", name) is spec.config
    assert schema.GROUP_SCHEMAS["method"][spec.config_schema] is spec.config
    fields = {f.name for f in dataclasses.fields(spec.config)} - {"name"}
    assert fields == set(spec.settings)


@pytest.mark.parametrize(
    ("name", "setting", "value", "message"),
    [
        ("ddp", "comm_hook", "ring", "method.comm_hook must be one of allreduce, reduce_scatter"),
        ("ddp", "overlap_backward", "yes", "method.overlap_backward must be true or false, got 'yes'"),
        ("ddp", "bucket_mb", 0, "method.bucket_mb must be > 0, got 0"),
        ("dpu", "warmup_steps", -1, "method.warmup_steps must be >= 0, got -1"),
        ("wp", "warmup_steps", 1.5, "method.warmup_steps must be an integer, got 1.5"),
    ],
)
def test_a_fields_check_is_one_line_naming_the_setting(name, setting, value, message):
    conf = {f.name: f.default for f in dataclasses.fields(methods.get(name).config)}
    conf |= {"name": name, "impl": "torch", "warmup_steps": 0, setting: value}
    with pytest.raises(ConfigError) as err:
        check_method({"method": conf})
    assert message in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("name", [n for n in SUITE if not methods.get(n).local])
def test_the_config_files_settings_pass_their_checks(name):
    with open(f"{conf_dir()}/method/{name}.yaml") as f:
        conf = yaml.safe_load(f)
    conf.pop("defaults")
    check_method({"method": conf})


def test_every_suite_method_names_its_reference_rule_schedule_and_backend():
    from acco.train.backend_flat import SCHEDULES
    from acco.train.backend_local import LOCAL_SCHEDULES
    from acco.train.build import BUILDERS
    from acco.train.reference import RULES

    for name in SUITE:
        spec = methods.get(name)
        assert spec.reference in RULES
        assert spec.schedule in (LOCAL_SCHEDULES if spec.local else SCHEDULES)
        assert {spec.backend_for({"impl": impl}) for impl in spec.impl_names or (None,)} <= set(BUILDERS)


def test_a_table_entry_is_registered_or_named_as_module_function():
    from acco.train.backend_flat import SCHEDULES, register_schedule
    from tests.helpers.recording_engine import RecordingEngine

    def twice_sequential(engine, until, on_step, start, settings):
        run_sequential(engine, until, on_step, start)

    register_schedule("test_sequential", twice_sequential)
    try:
        assert lookup(SCHEDULES, "test_sequential", "schedule") is twice_sequential
        with pytest.raises(ValueError, match="already registered"):
            register_schedule("test_sequential", lambda *a: None)
        engine = RecordingEngine()
        SCHEDULES["test_sequential"](engine, StopRule(lambda t: t >= 3), lambda t, result: None, 0, {})
        assert engine.rounds == 3
    finally:
        SCHEDULES.pop("test_sequential")
    from acco.train.reference import RULES

    rule = lookup(RULES, "tests.plugins.local_sgd:average_every", "rule")
    assert rule is importlib.import_module("tests.plugins.local_sgd").average_every
    with pytest.raises(ValueError) as err:
        lookup(RULES, "no_such_rule", "reference update rule")
    assert "\n" not in str(err.value) and "sequential" in str(err.value)
    RULES.pop("tests.plugins.local_sgd:average_every")


def test_a_registered_method_is_a_config_option_with_its_defaults(local_sgd):
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    check_overrides(["method=local_sgd", "method.sync_every=8"], conf_dir())
    with pytest.raises(ConfigError, match="method.warmup_steps is not a setting of method=local_sgd"):
        check_overrides(["method=local_sgd", "method.warmup_steps=1"], conf_dir())
    schema.register()
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=conf_dir(), version_base="1.3"):
        cfg = compose("config", overrides=["method=local_sgd", "method.sync_every=8"])
    GlobalHydra.instance().clear()
    assert dict(cfg.method) == {
        "name": "local_sgd",
        "sync_every": 8,
        "fragments": 1,
        "overlap_steps": 0,
        "mixing": 0.0,
        "outer_lr": 1.0,
        "outer_momentum": 0.0,
    }
    assert schema.option_kind("method", "local_sgd") is local_sgd.config


def test_a_method_registered_after_the_schema_is_a_kind_of_the_method_section_at_once():
    """The schema reads the registry when it needs the method section's kinds: no call refreshes it."""
    from omegaconf import OmegaConf

    from acco.config.experiments import compose

    cfg = compose(["method=ddp"])  # Hydra's store made before the method exists
    cfg["method"] = {"name": "ddp_then_dpu", "ddp_steps": 3}
    with pytest.raises(ConfigError, match="unknown key 'method.ddp_steps'"):
        schema.check_config(cfg)
    spec = methods.register(importlib.import_module("tests.plugins.ddp_then_dpu").SPEC)
    try:
        schema.check_config(cfg)
        view = schema.typed(cfg)
        assert OmegaConf.get_type(view.method) is spec.config and view.method.ddp_steps == 3
        assert schema.option_kind("method", spec.name) is spec.config
        check_overrides(["method=ddp_then_dpu", "method.ddp_steps=1"], conf_dir())
    finally:
        METHODS.pop(spec.name, None)
    with pytest.raises(ConfigError, match="unknown key 'method.ddp_steps'"):  # and gone once removed
        schema.check_config(cfg)


def test_acco_methods_names_the_modules_to_import():
    sys.modules.pop("tests.plugins.local_sgd", None)  # imported afresh: its import registers it
    methods.import_plugins({methods.PLUGINS_ENV: "tests.plugins.local_sgd"})
    try:
        assert "local_sgd" in METHODS
    finally:
        METHODS.pop("local_sgd", None)
    with pytest.raises(ImportError) as err:
        methods.import_plugins({methods.PLUGINS_ENV: "tests.plugins.no_such_method"})
    assert "ACCO_METHODS=tests.plugins.no_such_method" in str(err.value)


def test_a_flat_schedule_gets_its_methods_settings(ddp_then_dpu):
    from acco.train.backend_flat import SCHEDULES
    from tests.helpers.recording_engine import RecordingEngine

    class CountingSequential(RecordingEngine):
        sequential = 0

        def sequential_round(self):
            self.sequential += 1
            return super().sequential_round()

    schedule = lookup(SCHEDULES, ddp_then_dpu.schedule, "flat schedule of rounds")
    for ddp_steps in (0, 3):
        engine = CountingSequential()
        schedule(engine, StopRule(lambda t: t >= 5), lambda t, result: None, 0, {"ddp_steps": ddp_steps})
        assert engine.rounds == 5 and engine.sequential == ddp_steps
    SCHEDULES.pop(ddp_then_dpu.schedule)


def test_the_api_takes_a_plugins_defaults_and_checks_from_its_settings_class(ddp_then_dpu):
    from acco.api import _check_method_options, method_defaults

    assert method_defaults("ddp_then_dpu") == {"ddp_steps": 2}  # no conf/method/ddp_then_dpu.yaml
    _check_method_options("ddp_then_dpu", {"ddp_steps": 0})
    with pytest.raises(ValueError) as err:
        _check_method_options("ddp_then_dpu", {"ddp_steps": -1})
    assert str(err.value) == "ddp_then_dpu option ddp_steps must be a whole number >= 0, got -1"
    with pytest.raises(ConfigError, match="method.ddp_steps must be >= 0"):  # the config's check, the same rule
        check_method({"method": {"name": "ddp_then_dpu", "ddp_steps": -1}})


def test_an_older_checkpoint_gets_the_settings_its_methods_spec_added_since(ddp_then_dpu):
    from acco.train.checkpoint import with_added_settings

    older = {"method": {"name": "ddp", "impl": "flat", "comm_hook": "allreduce"}}
    assert with_added_settings(older)["method"] == {**older["method"], **dict(methods.get("ddp").added_settings)}
    later = dataclasses.replace(ddp_then_dpu, name="ddp_then_dpu_v2", added_settings=(("ddp_steps", 0),))
    methods.register(later)
    try:
        assert with_added_settings({"method": {"name": "ddp_then_dpu_v2"}})["method"]["ddp_steps"] == 0
        assert with_added_settings({"method": {"name": "ddp_then_dpu_v2", "ddp_steps": 3}})["method"]["ddp_steps"] == 3
    finally:
        METHODS.pop(later.name)
    assert with_added_settings({"method": {"name": "acco"}})["method"] == {"name": "acco"}
