"""A method's and its optimizer's settings, checked up front (acco/harness/run/validate.py runs them): the
method registry (acco/methods/), DDP's implementations and communication hooks, the
local methods' schedule (acco/engine/local_rounds.py), precision and the run's budget."""

from __future__ import annotations

import dataclasses

from ..config.validate import ConfigError, setting_int, setting_number
from ..engine.local_rounds import check_local_method
from ..engine.schedule import SCHEDULES
from ..methods import METHODS
from ..methods.settings import Check


def check_method(cfg: dict) -> None:
    """method.name in the registry, and the settings that method reads: its impl among its
    spec's, each field's check (its settings dataclass, acco/methods/settings.py), and a local
    method's schedule."""
    method = (cfg.get("method") or {}).get("name")
    if not isinstance(method, str) or method not in METHODS:
        raise ConfigError(f"unknown method {method!r}; choose one of: {', '.join(METHODS)}")
    spec, options = METHODS[method], cfg["method"]
    if spec.impls and options.get("impl", spec.default_impl) not in spec.impl_names:
        impls = spec.impl_names
        raise ConfigError(
            f"method.impl must be {' or '.join(impls)}, got {options.get('impl')!r}; "
            f"set {' or '.join(f'method.impl={i}' for i in impls)}"
        )
    for f in dataclasses.fields(spec.config):
        if "check" in f.metadata:
            check_setting(cfg, f.name, f.metadata["check"])
    if spec.local:
        check_local_method(cfg)


def check_setting(cfg: dict, key: str, check: Check) -> None:
    """method.<key> against its field's check; one line naming the setting and the fix."""
    dotted, value = f"method.{key}", cfg["method"].get(key, check.default)
    if value is None and check.optional:
        return
    if check.kind == "int":
        setting_int(cfg, dotted, None if check.minimum is None else int(check.minimum))
    elif check.kind == "number":
        setting_number(value, dotted, check.minimum, check.maximum, strict_min=check.above)
    elif check.kind == "bool" and not isinstance(value, bool):
        raise ConfigError(f"{dotted} must be true or false, got {value!r}")
    elif check.kind == "choice" and value not in check.choices:
        raise ConfigError(
            f"{dotted} must be one of {', '.join(check.choices)}, got {value!r}; set e.g. {dotted}={check.choices[0]}"
        )


def check_optimizer(cfg: dict) -> None:
    """optim.*: AdamW's numbers and the learning-rate schedule."""
    optim = cfg["optim"]
    setting_number(optim.get("lr"), "optim.lr", 0.0, strict_min=True)
    setting_number(optim.get("weight_decay"), "optim.weight_decay", 0.0)
    setting_number(optim.get("eps"), "optim.eps", 0.0, strict_min=True)
    setting_number(optim.get("clip_norm"), "optim.clip_norm", 0.0)
    betas = optim.get("betas")
    if not isinstance(betas, (list, tuple)) or len(betas) != 2:
        raise ConfigError(f"optim.betas must be a pair, got {betas!r}; set e.g. optim.betas=[0.9,0.95]")
    for i, b in enumerate(betas):
        setting_number(b, f"optim.betas[{i}]", 0.0, 0.999999)
    if optim.get("schedule") not in SCHEDULES:
        raise ConfigError(f"optim.schedule must be one of {', '.join(SCHEDULES)}, got {optim.get('schedule')!r}")
    setting_int(cfg, "optim.warmup_steps", 0)


def check_precision_and_budget(cfg: dict) -> None:
    """train.precision; train.samples / train.tokens budgets (at most one; tokens only where every
    sample has the same length) and train.steps, which a budget may replace (null)."""
    from .precision import PRECISIONS

    train = cfg["train"]
    if train.get("precision", "auto") not in PRECISIONS:
        raise ConfigError(
            f"train.precision must be one of {', '.join(PRECISIONS)}, got {train.get('precision')!r}; "
            f"set e.g. train.precision=bf16"
        )
    from .precision import GRAD_DTYPES

    if (train.get("grad_dtype") or "auto") not in GRAD_DTYPES:
        raise ConfigError(
            f"train.grad_dtype must be one of {', '.join(GRAD_DTYPES)}, got {train.get('grad_dtype')!r}; "
            f"set e.g. train.grad_dtype=fp32"
        )
    tokens = setting_int(cfg, "train.tokens", 1, allow_none=True)
    samples = setting_int(cfg, "train.samples", 1, allow_none=True)
    if tokens is not None and samples is not None:
        raise ConfigError(
            f"train.tokens={tokens} and train.samples={samples} are both set; keep one budget "
            f"(train.tokens=null or train.samples=null)"
        )
    if tokens is not None and (cfg.get("data") or {}).get("kind") == "instruct":
        raise ConfigError(
            f"train.tokens={tokens} needs packed pretraining data (a fixed number of tokens per "
            f"sample); instruction data varies in length: use train.samples instead"
        )
    if train.get("steps") is None and tokens is None and samples is None:
        raise ConfigError("train.steps is null and there is no budget; set train.steps, train.samples or train.tokens")
