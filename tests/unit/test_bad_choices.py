"""Every setting whose value selects code (acco/harness/run/choices.py CHOICES), given a value it
does not know: one line naming the setting and every valid choice, raised by the same check
overrides + compose + validate as the entry point, before anything is written. The run-level part
(exit 2, no traceback, no folder) is tests/integration/test_bad_choices.py."""

from __future__ import annotations

import dataclasses
import typing

import pytest

from acco.config import schema
from acco.config.experiments import CONF_DIR, compose
from acco.config.validate import ConfigError, check_overrides
from acco.harness.run.choices import CHOICES, Choice
from acco.harness.run.validate import validate

BAD = "no_such_choice"

# the schema's string settings whose value is free text or checked as what it is (a path, a name,
# a layout): not a choice among code paths. A new string setting is either here or in CHOICES.
FREE_TEXT = {
    "data.name", "data.cache_dir", "model.name", "model.hub_id", "model.pretrained_path",
    "model.pretrained_from.experiment", "model.pretrained_from.scale",  # checked: check_pretrained_source
    "model.pretrained_from.overrides", "launcher.profile", "launcher.account", "launcher.constraint",
    "launcher.partition", "launcher.qos", "launcher.log_dir", "launcher.env", "launcher.sbatch_options",
    "launcher.setup", "logger.project", "logger.entity", "layout", "out_dir", "results_root", "resume",
    "task", "train.threads", "dist.max_local_workers",
    # open sections: their choice keys (source/lambada_source generator, tokenizer kind,
    # model_type) are in CHOICES
    "data.source", "data.tokenizer", "final_eval.lambada_source", "model.config",
}  # fmt: skip
METADATA = "experiment."  # an experiment's description and claims: read by analysis/, not by a run


def string_settings() -> set[str]:
    """Every dotted key of the schema (its sections and every group's kinds) typed str or Any."""
    found: set[str] = set()

    def walk(cls, prefix: str) -> None:
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            tp = hints[f.name]
            inner = [a for a in typing.get_args(tp) if a is not type(None)] or [tp]
            if dataclasses.is_dataclass(inner[0]):
                walk(inner[0], f"{prefix}{f.name}.")
            elif inner[0] is str or tp is typing.Any:
                found.add(prefix + f.name)

    walk(schema.RunConfig, "")
    for group, kinds in schema.GROUP_KINDS.items():
        for kind in kinds:
            walk(kind, f"{group}.")
    return {key for key in found if not key.startswith(METADATA)}


def test_every_string_setting_is_a_checked_choice_or_free_text():
    unclassified = string_settings() - {c.key for c in CHOICES} - FREE_TEXT
    assert not unclassified, (
        f"{sorted(unclassified)}: add each to acco/harness/run/choices.py CHOICES if its value selects "
        "code, else to FREE_TEXT here"
    )


def composed(args: list[str], tmp_path) -> dict:
    check_overrides(args, CONF_DIR)
    cfg = compose(args)
    cfg["out_dir"] = str(tmp_path / "run")
    return cfg


@pytest.mark.parametrize("choice", CHOICES, ids=[c.key for c in CHOICES])
def test_the_context_makes_a_run_read_the_setting(choice: Choice, tmp_path):
    """The overrides the bad value is tried under are a valid run that reads the setting."""
    cfg = composed(list(choice.context), tmp_path)
    validate(cfg)
    assert choice.applies(cfg)


@pytest.mark.parametrize("choice", CHOICES, ids=[c.key for c in CHOICES])
def test_an_unknown_value_is_one_line_naming_every_choice(choice: Choice, tmp_path):
    args = [*choice.context, f"{'+' if choice.added else ''}{choice.key}={BAD}"]
    with pytest.raises((ConfigError, ValueError)) as err:  # ValueError: the link's LinkConfigError
        validate(composed(args, tmp_path))
    text = str(err.value)
    assert "\n" not in text and BAD in text, text
    missing = [option for option in choice.options() if option not in text]
    assert not missing, f"{choice.key}: the message leaves out {missing}: {text}"
    assert not (tmp_path / "run").exists()


def test_family_auto_without_a_model_type_names_the_types(tmp_path):
    with pytest.raises(ConfigError, match=r"model.config.model_type is not set; choose one of: .*qwen2"):
        validate(composed(["model.family=auto"], tmp_path))
