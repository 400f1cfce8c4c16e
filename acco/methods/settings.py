"""A method's settings as the config declares them (`method.*`): each method's module defines a
dataclass over MethodConfig, its fields' defaults and checks beside them. The config schema
registers these classes with Hydra, so a misspelt key or a wrongly typed value in
conf/method/<name>.yaml or on the command line is refused at composition; the values themselves
stay in the YAML files (MISSING here), so nothing is set twice. A method defined outside acco may
give its fields real defaults instead of a YAML file (docs/methods.md).

A field's `check` is a rule the run's up-front validation applies to its value (check_method):
a range or a set of choices, each broken rule one line naming the setting and the fix."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

# OmegaConf's MISSING (omegaconf.MISSING is this string: a structured config's field without a value).
# Spelt here so that acco.methods imports nothing outside the standard library: a submit host's plan
# and experiments/gpu_check.py's own import check read the registry before any dependency is known
# to be there (tests/unit/test_method_registry.py checks the two agree).
MISSING: Any = "???"

__all__ = ["MISSING", "Check", "MethodConfig", "field_checks", "setting"]


@dataclass(frozen=True)
class Check:
    """What a setting's value must be: `kind` int | number | bool | choice; for an int or a number
    the bounds (`above`: strictly greater than `minimum`); `optional`: null is allowed too; `words`:
    names that stand for a value and are allowed as they are (train.threads: auto)."""

    kind: str
    minimum: float | None = None
    maximum: float | None = None
    above: bool = False
    optional: bool = False
    choices: tuple[str, ...] = ()
    default: Any = None  # the value a config without the key gets
    words: tuple[str, ...] = ()


def setting(default: Any = MISSING, check: Check | None = None) -> Any:
    """A settings field with its check beside it."""
    return field(default=default, metadata={"check": check} if check is not None else {})


def field_checks(cls: type) -> dict[str, Check]:
    """name -> check of a settings dataclass's fields. A field declared again in a subclass to give
    it a default of its own (a method defined outside acco over LocalMethod) keeps the check of the
    nearest class that declares one, so a new default does not drop the rule."""
    checks = {}
    for f in fields(cls):
        for base in cls.__mro__:
            declared = vars(base).get("__dataclass_fields__", {}).get(f.name)
            if declared is not None and "check" in declared.metadata:
                checks[f.name] = declared.metadata["check"]
                break
    return checks


@dataclass
class MethodConfig:  # conf/method/acco.yaml: a method without settings of its own
    name: str = MISSING
