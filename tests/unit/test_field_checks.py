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
from acco.config.schema import GROUP_KINDS, RunConfig, check_settings
from acco.config.validate import ConfigError
from acco.harness.run.validate import validate
from acco.methods.settings import Check


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
