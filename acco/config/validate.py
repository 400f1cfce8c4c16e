"""Up-front validation of a composed config as data: every problem is one line naming it and the fix.

This module checks what the schema and the composition can tell (unknown groups and keys, numbers,
layouts, model shapes). The checks that need a run-time layer live with what they are about (a
method's settings: check_method, the clock's: check_clock, a local method's schedule:
check_local_method, a link's: check_link, a cluster profile's: check_profile); the run's `validate`
runs them all before any worker starts or any file is written, and the entry point prints the first
problem and exits with code 2."""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from ..methods.settings import Check


class ConfigError(ValueError):
    pass


def group_options(conf_dir: str, group: str) -> list[str]:
    """A config group's options as Hydra names them: conf/<group>/<a>/<b>.yaml is `a/b`; the
    method group has every registered method too (one defined outside acco has no file: its
    settings' defaults are its config, acco.config.schema.register)."""
    folder = os.path.join(conf_dir, group)
    files = {
        os.path.relpath(os.path.join(d, f), folder)[:-5]
        for d, _, files in os.walk(folder)
        for f in files
        if f.endswith(".yaml")
    }
    if group == "method":
        from ..methods import METHODS

        files |= set(METHODS)
    return sorted(files)


def check_overrides(argv: Iterable[str], conf_dir: str) -> None:
    """Catch unknown config-group options (`method=foo`) and keys before Hydra composes anything."""
    from .experiments import old_form_problem

    argv = list(argv)
    problem = old_form_problem(argv)
    if problem:
        raise ConfigError(problem)
    check_keys(argv, conf_dir)
    for arg in argv:
        if arg.startswith("-") or "=" not in arg:
            continue
        key, _, value = arg.lstrip("+~").partition("=")
        if key == "hydra/launcher" and value not in (launchers := (*group_options(conf_dir, key), "basic")):
            raise ConfigError(
                f"{arg}: not a launcher of acco's (choose one of: {', '.join(launchers)}); a sweep goes to "
                f"Slurm with launcher=slurm (or your profile): experiments/train.py -m ... launcher=slurm"
            )
        if key.split("/")[0] == "hydra" or not os.path.isdir(os.path.join(conf_dir, key)):
            continue  # not a config group (Hydra's groups are the folders of conf/)
        options = group_options(conf_dir, key)
        for choice in value.split(","):
            if choice and choice not in options and not choice.startswith(("range(", "choice(", "glob(")):
                hint = (
                    f"; a profile of your cluster goes in conf/launcher/{choice}.yaml (copy conf/launcher/slurm.yaml; "
                    "docs/cluster.md)"
                    if key == "launcher"
                    else ""
                )
                raise ConfigError(f"unknown {key} {choice!r} ({arg}); choose one of: {', '.join(options)}{hint}")
            if choice in options:
                check_option_file(conf_dir, key, choice)


def check_option_file(conf_dir: str, group: str, option: str) -> None:
    """A group option's own file (e.g. a cluster profile, conf/launcher/mycluster.yaml) against its
    kind's schema: an unknown key there is one line naming the file, not Hydra's composition error.
    Its kind is the schema its defaults list names, directly or through another option of the group
    (`defaults: [slurm, _self_]`)."""
    import dataclasses

    import yaml

    from .schema import GROUP_SCHEMAS

    kinds = GROUP_SCHEMAS.get(group)
    if not kinds:
        return
    keys: set[str] = set()
    seen, name, kind = set(), option, None
    while kind is None and name not in seen:
        seen.add(name)
        path = os.path.join(conf_dir, group, f"{name}.yaml")
        if not os.path.isfile(path):
            return
        with open(path) as f:
            data: Any = yaml.safe_load(f) or {}
        if name == option:
            keys = {k for k in data if k != "defaults"} if isinstance(data, dict) else set()
        entries = [d for d in (data.get("defaults") or []) if isinstance(d, str) and d != "_self_"]
        kind = next((kinds[d] for d in entries if d in kinds), None)
        name = next((d for d in entries if d not in kinds), name)
    if kind is None:
        return
    allowed = [f.name for f in dataclasses.fields(kind)]
    unknown = sorted(keys - set(allowed))
    if unknown:
        raise ConfigError(
            f"conf/{group}/{option}.yaml: unknown key {unknown[0]!r}; check the spelling: {group} has "
            f"{', '.join(allowed)}"
        )


def check_keys(argv: Iterable[str], conf_dir: str) -> None:
    """Every `key=value` on the command line against the schema, before
    Hydra composes: an unknown key (`train.stepz=5`, `+train.stepz=5`) or a value of the wrong type
    (`train.steps=5.5`, `overwrite=yes`, which OmegaConf would take as true) is one line naming it;
    Hydra's own message for these is many lines and exit code 1."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    from .schema import check_override, top_level_keys

    argv = [a for a in argv if not a.startswith("-") and "=" in a]
    groups = {d for d in os.listdir(conf_dir) if os.path.isdir(os.path.join(conf_dir, d))}
    # a task of one's own (task=module:function) may read a section of its own (+oracle.x=1)
    custom_task = any(a.split("=", 1)[0] == "task" for a in argv)
    parser = OverridesParser.create()
    options = chosen_options(argv, conf_dir)
    for arg in argv:
        key = arg.split("=", 1)[0].lstrip("+~")
        top = key.split(".")[0].split("/")[0].split("@")[0]
        if top == "hydra" or arg.startswith("~") or ("." not in key and top in groups):
            continue  # Hydra's own settings, deletions, group choices (checked by check_overrides)
        if custom_task and arg.startswith("+") and top not in top_level_keys():
            continue
        if key == "train.bf16":  # before train.precision
            raise ConfigError(
                f"train.bf16 was replaced by train.precision ({arg}); use train.precision=bf16, "
                f"fp32 or auto (bf16 on GPU, fp32 on CPU)"
            )
        try:
            (override,) = parser.parse_overrides([arg])
        except HydraException as exc:
            raise ConfigError(
                f"cannot read {arg!r}: {str(exc).splitlines()[0]}; quote a value with special "
                f"characters, e.g. key='a=b'"
            ) from None
        if not override.is_sweep_override():
            values = [override.value()]
        elif override.is_discrete_sweep():
            values = list(override.sweep_iterator())
        else:
            continue  # an interval: the sweeper draws the values
        check_override(key, values, arg, options)


def chosen_options(argv: list[str], conf_dir: str) -> dict[str, str]:
    """group -> option for the groups whose option is known before composition: chosen on the
    command line (one value), else conf/config.yaml's default where no experiment may replace it."""
    import yaml

    with open(os.path.join(conf_dir, "config.yaml")) as f:
        defaults = yaml.safe_load(f).get("defaults") or []
    chosen = {
        k: v
        for k, v in (e.popitem() for e in (dict(d) for d in defaults if isinstance(d, dict)))
        if isinstance(v, str) and "/" not in k
    }
    if any(a.lstrip("+").split("=", 1)[0] == "experiment" for a in argv):
        for group in ("model", "data"):  # an experiment chooses these
            chosen.pop(group, None)
    for arg in argv:
        key, _, value = arg.lstrip("+").partition("=")
        if key in chosen or key in ("model", "data"):
            if "," in value or "(" in value:
                chosen.pop(key, None)  # a sweep: several options
            else:
                chosen[key] = value
    return chosen


def check_value(dotted: str, value, check: Check) -> None:
    """A setting's value against its field's check (a Check; the schema's
    fields: check_settings): one line naming the setting and the fix."""
    if (value is None and check.optional) or (isinstance(value, str) and value in check.words):
        return
    if check.kind == "int" and check.maximum is not None:  # both bounds: one line names the range
        low, high = int(check.minimum or 0), int(check.maximum)
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            example = low if check.default is None else check.default
            raise ConfigError(
                f"{dotted} must be an integer in [{low}, {high}], got {value!r}; set e.g. {dotted}={example}"
            )
    elif check.kind == "int":
        int_value(value, dotted, None if check.minimum is None else int(check.minimum))
    elif check.kind == "number":
        setting_number(value, dotted, check.minimum, check.maximum, strict_min=check.above)
    elif check.kind == "bool" and not isinstance(value, bool):
        raise ConfigError(f"{dotted} must be true or false, got {value!r}; set {dotted}=true or {dotted}=false")
    elif check.kind == "choice" and value not in check.choices:
        raise ConfigError(
            f"{dotted} must be one of {', '.join(check.choices)}, got {value!r}; set e.g. {dotted}={check.choices[0]}"
        )


def setting_int(cfg: dict, dotted: str, minimum: int | None = None, allow_none: bool = False):
    node: Any = cfg
    for part in dotted.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    if node is None and allow_none:
        return None
    return int_value(node, dotted, minimum)


def int_value(value, dotted: str, minimum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{dotted} must be an integer, got {value!r}; set e.g. {dotted}={minimum or 1}")
    if minimum is not None and value < minimum:
        raise ConfigError(f"{dotted} must be >= {minimum}, got {value}; set {dotted}={minimum} or more")
    return value


def setting_number(
    value, name: str, minimum: float | None = None, maximum: float | None = None, strict_min: bool = False
) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:  # NaN is no number
        raise ConfigError(f"{name} must be a number, got {value!r}")
    if minimum is not None and (value < minimum or (strict_min and value == minimum)):
        op = ">" if strict_min else ">="
        raise ConfigError(f"{name} must be {op} {minimum:g}, got {value}; set {name} {op} {minimum:g}")
    if maximum is not None and value > maximum:
        raise ConfigError(f"{name} must be <= {maximum:g}, got {value}; set {name} <= {maximum:g}")
    return float(value)


def parse_layout(layout) -> tuple[int, int]:
    """'2x4' -> (2 nodes, 4 GPUs/tasks per node)."""
    parts = str(layout).lower().split("x")
    if len(parts) != 2 or not all(p.isdigit() and int(p) > 0 for p in parts):
        raise ConfigError(f"layout must look like NODESxGPUS (e.g. 2x4), got {layout!r}")
    return int(parts[0]), int(parts[1])


def check_experiment(cfg: dict, cuda_available: bool) -> None:
    exp = cfg.get("experiment")
    if not exp:
        return
    if not exp.get("runs"):
        raise ConfigError(
            f"experiment {exp['id']} ({exp.get('title')}) has no training runs of its own: "
            f"it is computed from other experiments' results (make reproduce-{exp['id']})"
        )
    scale = cfg.get("scale")
    gpus = exp.get("gpus")
    if scale == "paper" and gpus and not cuda_available and (cfg.get("launcher") or {}).get("name") == "local":
        raise ConfigError(
            f"experiment {exp['id']} at scale=paper trains on {gpus} GPUs and no GPU is "
            f"visible here; use experiment={exp['id']}/cpu, or launcher=slurm on a GPU cluster"
        )


def check_trace_steps(window) -> None:
    """train.trace_steps: null (every step) or [first, last] committed steps, 0 <= first <= last."""
    if window is None:
        return
    if (
        not isinstance(window, (list, tuple))
        or len(window) != 2
        or any(isinstance(v, bool) or not isinstance(v, int) for v in window)
        or not 0 <= window[0] <= window[1]
    ):
        raise ConfigError(
            f"train.trace_steps must be null or two steps [first, last] with 0 <= first <= last, "
            f"got {window!r}; set e.g. train.trace_steps=[100,110]"
        )


def check_model_shape(cfg: dict) -> None:
    """What the model's own constructor would reject only inside the workers."""
    config = (cfg.get("model") or {}).get("config") or {}
    hidden = config.get("hidden_size")
    for heads_key in ("num_heads", "num_attention_heads"):
        heads = config.get(heads_key)
        if heads is None:
            continue
        heads = setting_int(cfg, f"model.config.{heads_key}", 1)
        if isinstance(hidden, int) and not isinstance(hidden, bool) and hidden % heads:
            raise ConfigError(
                f"model.config.hidden_size={hidden} is not divisible by model.config.{heads_key}="
                f"{heads}; use a multiple of {heads} (e.g. {heads * max(1, hidden // heads)})"
            )
    for key in ("hidden_size", "num_layers", "num_hidden_layers", "intermediate_size"):
        if config.get(key) is not None:
            setting_int(cfg, f"model.config.{key}", 1)


def check_pretrained_source(cfg: dict) -> None:
    """Where a pretrained model comes from: a saved folder (model.pretrained_path) or a run of ours
    (model.pretrained_from: an experiment that exists at that scale); and a tokenizer read from the
    model folder needs one of them."""
    model = cfg.get("model") or {}
    spec = model.get("pretrained_from")
    if spec and not model.get("pretrained_path"):
        from .experiments import experiment_ids, scales_of

        exp, scale = spec.get("experiment"), spec.get("scale", "cpu")
        if exp not in experiment_ids():
            raise ConfigError(
                f"model.pretrained_from.experiment={exp!r} is not an experiment; choose one of "
                f"{', '.join(experiment_ids())}"
            )
        if scale not in scales_of(exp):
            raise ConfigError(
                f"model.pretrained_from.scale={scale!r}: experiment {exp} has the scales "
                f"{', '.join(scales_of(exp))}; choose one of them"
            )
    tokenizer = (cfg.get("data") or {}).get("tokenizer") or {}
    if tokenizer.get("kind") == "from_model" and not model.get("pretrained_path") and not spec:
        raise ConfigError(
            "data.tokenizer.kind=from_model reads the tokenizer saved with the pretrained model, and this "
            "model has none (model.pretrained_path and model.pretrained_from are null); set "
            "model.pretrained_path=<a saved model folder>, or leave model.pretrained_from as the experiment sets it"
        )


def embedding_rows(cfg: dict) -> tuple[int, str] | None:
    """The model's embedding size: the pretrained model's config.json, else model.config.vocab_size
    (None: taken from the tokenizer, so it always fits)."""
    model = cfg.get("model") or {}
    path = model.get("pretrained_path")
    if path:
        import json

        try:
            with open(os.path.join(os.path.expanduser(str(path)), "config.json")) as f:
                n = json.load(f)["vocab_size"]
        except (OSError, ValueError, KeyError, TypeError):
            return None
        return n, f"vocab_size={n} in {path}/config.json"
    n = (model.get("config") or {}).get("vocab_size")
    return (n, f"model.config.vocab_size={n}") if isinstance(n, int) and not isinstance(n, bool) else None


def out_dir_problem(out_dir: str | None) -> str | None:
    """Why out_dir cannot be made or written (a file in the way, a read-only or unwritable folder), or
    None: checked on its nearest existing ancestor, before anything is created."""
    if not out_dir:
        return None
    probe = os.path.abspath(out_dir)
    while not os.path.lexists(probe) and os.path.dirname(probe) != probe:
        probe = os.path.dirname(probe)
    if not os.path.isdir(probe):
        return f"out_dir={out_dir} cannot be created: {probe} is a file, not a folder; choose another out_dir"
    if not os.access(probe, os.W_OK | os.X_OK):
        return (
            f"out_dir={out_dir} cannot be written: {probe} is read-only or not writable by this user; "
            "choose a writable out_dir"
        )
    return None
