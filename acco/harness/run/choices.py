"""Every setting whose value selects code, in one table: the values each may take, read from the
code that dispatches on it where it keeps them, and when the setting is read. An unknown value is one
line naming the setting and its choices, raised before any worker starts or any folder is made
(`validate` runs `check_choices`); without it the value reaches the code that
dispatches on it only inside the workers (a KeyError traceback per rank).

A new setting of this kind goes in CHOICES: tests/unit/test_bad_choices.py walks the table with a
bad value for each, and fails for a string setting of the schema that is neither here nor named
there as free text."""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ...config.validate import ConfigError

# values dispatched on where no constant names them: the launcher (slurm submits, local starts
# workers here), the device and process-group backend (`validate` checks them with their own
# messages), the tokenizer's kind (from_model: the fine-tuning task's), the data's kind (instruct,
# else packed pretraining) and DDP's implementations (torch, else the flat engine)
LAUNCHERS = ("local", "slurm")
DEVICES = ("auto", "cpu", "cuda")
DIST_BACKENDS = ("auto", "nccl", "gloo")
TOKENIZER_KINDS = ("bpe", "pretrained", "from_model")
DATA_KINDS = ("pretrain", "instruct")
LOGGERS = ("none", "wandb")  # make_logger's
WANDB_MODES = ("offline", "online", "disabled")


def _methods() -> tuple[str, ...]:
    from ...methods import METHODS

    return tuple(METHODS)


def _ddp_impls() -> tuple[str, ...]:
    from ...methods import get

    return get("ddp").impl_names


def _comm_hooks() -> tuple[str, ...]:
    from ...engine.torch_ddp import COMM_HOOKS

    return COMM_HOOKS


def _families() -> tuple[str, ...]:
    from ...models.causal_lm import family_names

    return family_names()


def _causal_lm_types() -> tuple[str, ...]:
    from ...models.causal_lm import causal_lm_types

    return causal_lm_types()


def _generators() -> tuple[str, ...]:
    from ...data.generated_corpora import generator_names

    return generator_names()


def _schedules() -> tuple[str, ...]:
    from ...engine.schedule import SCHEDULES

    return tuple(SCHEDULES)


def _precisions() -> tuple[str, ...]:
    from ...train.precision import PRECISIONS

    return PRECISIONS


def _grad_dtypes() -> tuple[str, ...]:
    from ...train.precision import GRAD_DTYPES

    return GRAD_DTYPES


def _fault_signals() -> tuple[str, ...]:
    from ...train.signals import CHECKPOINT_SIGNALS

    return tuple(s.name for s in CHECKPOINT_SIGNALS)


def _clock_modes() -> tuple[str, ...]:
    from ...config.schema import CLOCK_MODES

    return CLOCK_MODES


def _link_modes() -> tuple[str, ...]:
    from ...config.schema import LINK_MODES

    return LINK_MODES


def _start_methods() -> tuple[str, ...]:
    from ..launch import START_METHODS

    return START_METHODS


def _gpu_presets() -> tuple[str, ...]:
    from ...analytic.costmodel import PRESETS

    return tuple(PRESETS)


def _scales() -> tuple[str, ...]:
    from ...config.experiments import SCALES

    return SCALES


def _get(cfg: dict, dotted: str) -> Any:
    node: Any = cfg
    for part in dotted.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    return node


def _always(cfg: dict) -> bool:
    return True


@dataclass(frozen=True)
class Choice:
    key: str  # the dotted setting
    options: Callable[[], tuple[str, ...]]  # the values the code dispatches on
    applies: Callable[[dict], bool] = _always  # whether this run reads the setting
    nullable: bool = False  # null (or absent) is a choice too: the default
    context: tuple[str, ...] = ()  # overrides under which a run reads it (the test sets them)
    added: bool = False  # not in the default config: set with +key=value


def _method(name: str) -> Callable[[dict], bool]:
    return lambda cfg: _get(cfg, "method.name") == name


def _fresh_auto_model(cfg: dict) -> bool:
    return _get(cfg, "model.family") == "auto" and not _get(cfg, "model.pretrained_path")


CHOICES: tuple[Choice, ...] = (
    Choice("method.name", _methods),
    Choice("method.impl", _ddp_impls, _method("ddp"), nullable=True, context=("method=ddp",)),
    Choice("method.comm_hook", _comm_hooks, _method("ddp"), nullable=True, context=("method=ddp",)),
    Choice("model.family", _families),
    Choice("model.config.model_type", _causal_lm_types, _fresh_auto_model, context=("model=qwen2_tiny",)),
    Choice("data.kind", lambda: DATA_KINDS),
    Choice("data.source.generator", _generators, nullable=True),
    Choice("data.tokenizer.kind", lambda: TOKENIZER_KINDS),
    Choice("final_eval.lambada_source.generator", _generators, nullable=True, added=True),
    Choice("optim.schedule", _schedules),
    Choice("train.precision", _precisions, nullable=True),
    Choice("train.grad_dtype", _grad_dtypes, nullable=True),
    Choice("clock.mode", _clock_modes, nullable=True),
    Choice("link.mode", _link_modes, nullable=True),
    Choice("dist.start_method", _start_methods, nullable=True),
    Choice("dist.backend", lambda: DIST_BACKENDS, nullable=True),
    Choice("device", lambda: DEVICES, nullable=True),
    Choice(
        "fault.signal",
        _fault_signals,
        lambda cfg: _get(cfg, "fault.signal_rank") is not None,
        context=("fault.signal_rank=0", "fault.at_step=2"),
    ),
    Choice("scale", _scales),
    Choice("launcher.name", lambda: LAUNCHERS),
    Choice("launcher.gpu", _gpu_presets, nullable=True),
    Choice("logger.name", lambda: LOGGERS),
    Choice(
        "logger.mode",
        lambda: WANDB_MODES,
        lambda cfg: _get(cfg, "logger.name") == "wandb",
        nullable=True,
        context=("logger=wandb",),
    ),
)


def choice_problem(cfg: dict, choice: Choice) -> str | None:
    """The one line for `choice`'s value in `cfg`, or None when the value is one of its options
    (or the run does not read it)."""
    if not choice.applies(cfg):
        return None
    value = _get(cfg, choice.key)
    if value is None and choice.nullable:
        return None
    options = choice.options()
    if isinstance(value, str) and value in options:
        return None
    if value is None:
        return f"{choice.key} is not set; choose one of: {', '.join(options)}"
    close = difflib.get_close_matches(str(value), options, n=3)
    hint = f" (closest: {', '.join(close)})" if close and len(options) > 10 else ""
    return f"unknown {choice.key} {value!r}{hint}; choose one of: {', '.join(options)}"


def check_choices(cfg: dict) -> None:
    """Every setting of CHOICES against its options; the first problem as a ConfigError."""
    for choice in CHOICES:
        problem = choice_problem(cfg, choice)
        if problem:
            raise ConfigError(problem)
