"""Each setting's type and range is declared beside its field in the schema (acco/config/schema.py: a
Check in the field's metadata) and one walk applies them all to the composed config
(check_settings), before the checks across fields; each broken rule is one line naming the setting
and the fix, the same line the run's validation gives."""

from __future__ import annotations

import copy
import dataclasses
import typing

import pytest

from acco.config.experiments import compose
from acco.config.schema import DEFAULT_MTU, GROUP_KINDS, MAX_MTU, MIN_MTU, RunConfig, check_settings
from acco.config.validate import ConfigError
from acco.harness.run.validate import validate
from acco.methods import get
from acco.methods.diloco import LocalMethod
from acco.methods.settings import Check, field_checks


def checked_fields(cls=RunConfig, prefix=""):
    """(dotted key, check) of every schema field with a check; a group's kinds all (not the method's)."""
    for f in dataclasses.fields(cls):
        dotted = f"{prefix}{f.name}"
        if "check" in f.metadata:
            yield dotted, f.metadata["check"]
        if not prefix and f.name == "method":
            continue
        tp = typing.get_type_hints(cls)[f.name]
        args = [a for a in typing.get_args(tp) if a is not type(None)] or [tp]
        kinds = GROUP_KINDS.get(f.name, ()) if not prefix else ()
        for kind in dict.fromkeys((*kinds, *(a for a in args if dataclasses.is_dataclass(a)))):
            yield from checked_fields(kind, f"{dotted}.")


def breaking(check: Check):
    """A value the check refuses."""
    if check.kind == "bool":
        return "yes"
    if check.minimum is not None:
        return int(check.minimum) - 1 if check.kind == "int" else check.minimum - 1.0
    return 1.5 if check.kind == "int" else "many"


def put(cfg: dict, dotted: str, value) -> dict:
    cfg = copy.deepcopy(cfg)
    *sections, key = dotted.split(".")
    node = cfg
    for part in sections:
        node = node[part]
    node[key] = value
    return cfg


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    cfg = compose([])
    cfg["out_dir"] = str(tmp_path_factory.mktemp("run") / "run")
    return cfg


def test_the_schema_declares_the_checks():
    fields = dict(checked_fields())
    assert {"seed", "world_size", "train.accum", "optim.lr", "dist.timeout_s", "data.seq_len"} <= set(fields)
    assert not any(key.startswith("method.") for key in fields)  # the method's: its spec's (check_method)


def test_the_default_configs_pass(base):
    check_settings(base)
    check_settings(compose(["data=synthetic_instruct"]))  # no seq_len: a key absent is not checked


@pytest.mark.parametrize("key", list(dict(checked_fields())))  # a group's kinds share their base's fields
def test_a_broken_rule_is_one_line_naming_the_setting(key, base):
    check = dict(checked_fields())[key]
    if key.startswith("data.") and key.split(".")[1] not in base["data"]:
        pytest.skip(f"{key}: not a setting of the default data")
    cfg = put(base, key, breaking(check))
    with pytest.raises(ConfigError) as walked:
        check_settings(cfg)
    text = str(walked.value)
    assert text.startswith(f"{key} must be ") and "\n" not in text, text
    with pytest.raises(ConfigError) as validated:  # the run's validation gives the same line
        validate(cfg)
    assert str(validated.value) == text


def test_null_only_where_the_field_allows_it(base):
    check_settings(put(base, "train.steps", None))
    check_settings(put(base, "dist.step_timeout_s", None))
    with pytest.raises(ConfigError, match=r"^data.micro_batch_size must be an integer, got None; "):
        check_settings(put(base, "data.micro_batch_size", None))
    with pytest.raises(ConfigError, match=r"^optim.lr must be a number, got None$"):
        check_settings(put(base, "optim.lr", None))


def test_a_word_the_field_allows_passes_as_it_is(base):
    check_settings(put(base, "train.threads", "auto"))
    with pytest.raises(ConfigError, match=r"^train.threads must be an integer, got 'all'; set e.g. train.threads=1$"):
        check_settings(put(base, "train.threads", "all"))


def test_the_messages_keep_their_words(base):
    cases = {
        ("overwrite", 1): "overwrite must be true or false, got 1; set overwrite=true or overwrite=false",
        ("optim.eps", 0): "optim.eps must be > 0, got 0; set optim.eps > 0",
        ("optim.min_lr_ratio", 2): "optim.min_lr_ratio must be <= 1, got 2; set optim.min_lr_ratio <= 1",
        ("train.log_every", -1): "train.log_every must be >= 0, got -1; set train.log_every=0 or more",
        ("data.seq_len", 1): "data.seq_len must be >= 2, got 1; set data.seq_len=2 or more",
    }
    for (key, value), message in cases.items():
        with pytest.raises(ConfigError) as err:
            check_settings(put(base, key, value))
        assert str(err.value) == message


def test_the_clock_and_the_link_check_each_setting_beside_its_field():
    fields = dict(checked_fields())
    keys = ("mode", "micro_batch_s", "sync_s", "optimizer_step_s", "backward_share")
    assert {f"clock.{k}" for k in keys} | {"link.rate_mbit", "link.delay_ms", "link.mode", "link.mtu"} <= set(fields)
    assert fields["link.mtu"] == Check("int", MIN_MTU, MAX_MTU, default=DEFAULT_MTU)
    assert fields["dist.max_local_workers"].words == ("auto",)


@pytest.mark.parametrize(
    "key,value,message",
    [
        ("clock.mode", "modelled", "clock.mode must be one of real, virtual, got 'modelled'; set e.g. clock.mode=real"),
        ("clock.sync_s", -1.0, "clock.sync_s must be >= 0, got -1.0; set clock.sync_s >= 0"),
        ("clock.micro_batch_s", -0.1, "clock.micro_batch_s must be >= 0, got -0.1; set clock.micro_batch_s >= 0"),
        ("clock.optimizer_step_s", -1, "clock.optimizer_step_s must be >= 0, got -1; set clock.optimizer_step_s >= 0"),
        ("clock.backward_share", 1.5, "clock.backward_share must be <= 1, got 1.5; set clock.backward_share <= 1"),
        ("link.rate_mbit", -5, "link.rate_mbit must be >= 0, got -5; set link.rate_mbit >= 0"),
        ("link.delay_ms", float("nan"), "link.delay_ms must be a number, got nan"),
        ("link.mode", "wifi", "link.mode must be one of auto, netns, delay, got 'wifi'; set e.g. link.mode=auto"),
        ("link.mtu", 100, "link.mtu must be an integer in [576, 65535], got 100; set e.g. link.mtu=9000"),
        ("link.mtu", 65536, "link.mtu must be an integer in [576, 65535], got 65536; set e.g. link.mtu=9000"),
        ("link.mtu", 1500.0, "link.mtu must be an integer in [576, 65535], got 1500.0; set e.g. link.mtu=9000"),
        (
            "dist.max_local_workers",
            0,
            "dist.max_local_workers must be >= 1, got 0; set dist.max_local_workers=1 or more",
        ),
    ],
)
def test_a_setting_moved_beside_its_field_is_refused_there(key, value, message, base):
    """On a virtual-clock config: the clock's rules across settings (check_clock) let each through."""
    virtual = put(put(put(base, "clock.mode", "virtual"), "clock.micro_batch_s", 0.1), "clock.sync_s", 1.0)
    cfg = put(virtual, key, value)
    with pytest.raises(ConfigError) as err:
        check_settings(cfg)
    assert str(err.value) == message
    with pytest.raises(ConfigError) as validated:
        validate(cfg)
    assert str(validated.value) == message
    check_settings(put(cfg, key, base[key.split(".")[0]][key.split(".")[1]]))  # the default value passes


LOCAL_SETTINGS = {
    "sync_every": Check("int", 1),
    "fragments": Check("int", 1),
    "overlap_steps": Check("int", 0),
    "mixing": Check("number", 0.0, 1.0),
    "outer_lr": Check("number", 0.0, above=True),
    "outer_momentum": Check("number", 0.0, 0.999999),
}


def test_the_local_methods_check_each_setting_beside_its_field():
    for name in ("diloco", "streaming_diloco"):
        assert field_checks(get(name).config) == LOCAL_SETTINGS


@pytest.mark.parametrize(
    "method,key,value,message",
    [
        ("diloco", "sync_every", 0, "method.sync_every must be >= 1, got 0; set method.sync_every=1 or more"),
        ("streaming_diloco", "fragments", 0, "method.fragments must be >= 1, got 0; set method.fragments=1 or more"),
        (
            "streaming_diloco",
            "overlap_steps",
            -1,
            "method.overlap_steps must be >= 0, got -1; set method.overlap_steps=0 or more",
        ),
        ("diloco", "mixing", 2, "method.mixing must be <= 1, got 2; set method.mixing <= 1"),
        ("diloco", "outer_lr", 0, "method.outer_lr must be > 0, got 0; set method.outer_lr > 0"),
        (
            "diloco",
            "outer_momentum",
            1,
            "method.outer_momentum must be <= 0.999999, got 1; set method.outer_momentum <= 0.999999",
        ),
    ],
)
def test_a_local_methods_setting_alone_is_refused_by_its_field(method, key, value, message, tmp_path):
    cfg = compose([f"method={method}"])
    cfg["out_dir"] = str(tmp_path / "run")
    validate(cfg)
    with pytest.raises(ConfigError) as err:
        validate(put(cfg, f"method.{key}", value))
    assert str(err.value) == message


def test_acco_overlapped_applies_the_same_field_checks():
    """acco.Overlapped's method options are checked by the same fields, in Python's words."""
    from acco.api import _check_method_options

    good = {"sync_every": 8, "fragments": 4, "overlap_steps": 1, "mixing": 0.5, "outer_lr": 0.7, "outer_momentum": 0.9}
    _check_method_options("streaming_diloco", good)
    with pytest.raises(ValueError, match=r"^streaming_diloco option mixing must be a number >= 0 and <= 1, got 2$"):
        _check_method_options("streaming_diloco", {**good, "mixing": 2})
    with pytest.raises(ValueError, match=r"^diloco option sync_every must be a whole number >= 1, got 0$"):
        _check_method_options("diloco", {**good, "sync_every": 0})


def test_a_field_given_a_new_default_in_a_subclass_keeps_its_check() -> None:
    """A method defined outside acco that gives LocalMethod's settings defaults of its own (as
    tests/plugins/local_sgd.py does) keeps their checks."""

    @dataclasses.dataclass
    class Defaults(LocalMethod):
        sync_every: int = 4
        outer_lr: float = 1.0

    assert field_checks(Defaults) == LOCAL_SETTINGS
    assert "check" not in {f.name: f for f in dataclasses.fields(Defaults)}["sync_every"].metadata
