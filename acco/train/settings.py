"""A method's and its optimizer's settings, checked up front (the run's validate runs them): the
method registry, DDP's implementations and communication hooks, the local methods' schedule
(check_local_method), precision and the run's budget."""

from __future__ import annotations

from ..config.validate import ConfigError, check_value, setting_number
from ..engine.local_rounds import check_local_method
from ..engine.schedule import SCHEDULES
from ..methods import METHODS
from ..methods.settings import Check, field_checks


def check_method(cfg: dict) -> None:
    """method.name in the registry, and the settings that method reads: its impl among its
    spec's, each field's check (its settings dataclass), and a local
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
    for key, check in field_checks(spec.config).items():
        check_setting(cfg, key, check)
    if spec.local:
        check_local_method(cfg)


def check_setting(cfg: dict, key: str, check: Check) -> None:
    """method.<key> against its field's check; one line naming the setting and the fix."""
    dotted, value = f"method.{key}", cfg["method"].get(key, check.default)
    if check.kind == "bool" and not isinstance(value, bool) and not (value is None and check.optional):
        # a method's flag: its line names no fix (acco.Overlapped words its own for Python)
        raise ConfigError(f"{dotted} must be true or false, got {value!r}")
    check_value(dotted, value, check)


def check_optimizer(cfg: dict) -> None:
    """optim.betas and the learning-rate schedule; AdamW's other numbers are their fields' checks
    (OptimConfig)."""
    optim = cfg["optim"]
    betas = optim.get("betas")
    if not isinstance(betas, (list, tuple)) or len(betas) != 2:
        raise ConfigError(f"optim.betas must be a pair, got {betas!r}; set e.g. optim.betas=[0.9,0.95]")
    for i, b in enumerate(betas):
        setting_number(b, f"optim.betas[{i}]", 0.0, 0.999999)
    if optim.get("schedule") not in SCHEDULES:
        raise ConfigError(f"optim.schedule must be one of {', '.join(SCHEDULES)}, got {optim.get('schedule')!r}")


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
    tokens, samples = train.get("tokens"), train.get("samples")  # their ranges: TrainConfig's checks
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
