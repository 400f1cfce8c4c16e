"""Up-front validation: every problem is one line naming it and the fix; the entry point prints
the first one and exits with code 2 before any worker starts or any file is written."""
from __future__ import annotations

import os
from typing import Iterable

from .engine.schedule import SCHEDULES
from .run_io import read_summary
from .trainer import METHODS

CONFIG_GROUPS = ("method", "model", "data", "launcher", "experiment")


class ConfigError(ValueError):
    pass


def check_overrides(argv: Iterable[str], conf_dir: str) -> None:
    """Catch unknown config-group options (`method=foo`) and keys before Hydra composes anything."""
    argv = list(argv)
    check_keys(argv, conf_dir)
    for arg in argv:
        if arg.startswith("-") or "=" not in arg:
            continue
        key, _, value = arg.lstrip("+~").partition("=")
        if key not in CONFIG_GROUPS:
            continue
        options = sorted(f[:-5] for f in os.listdir(os.path.join(conf_dir, key)) if f.endswith(".yaml")) \
            if os.path.isdir(os.path.join(conf_dir, key)) else []
        for choice in value.split(","):
            if choice and choice not in options and not choice.startswith(("range(", "choice(", "glob(")):
                raise ConfigError(f"unknown {key} {choice!r} ({arg}); choose one of: {', '.join(options)}")


# sections whose keys are all in conf/config.yaml (model.config, data.source, ... are open-ended)
FIXED_SECTIONS = ("train", "optim", "dist", "fault", "hetero")


def check_keys(argv: Iterable[str], conf_dir: str) -> None:
    """Catch misspelt keys before Hydra: `+train.stepz=5` would be added silently, `train.stepz=5`
    fails inside Hydra with a multi-line message."""
    import yaml
    with open(os.path.join(conf_dir, "config.yaml")) as f:
        base = yaml.safe_load(f)
    groups = {d for d in os.listdir(conf_dir) if os.path.isdir(os.path.join(conf_dir, d))}
    known = (set(base) - {"defaults"}) | groups
    # a task of one's own (task=module:function) may read a section of its own (+oracle.x=1)
    custom_task = any(a.split("=", 1)[0] == "task" for a in argv)
    for arg in argv:
        if arg.startswith("-") or "=" not in arg:
            continue
        key = arg.split("=", 1)[0].lstrip("+~")
        parts = key.split(".")
        top = parts[0].split("@")[0]
        if top == "hydra":
            continue
        if top not in known and not (custom_task and arg.startswith("+")):
            raise ConfigError(f"unknown key {key!r} ({arg}); check the spelling: the top-level keys are "
                              f"{', '.join(sorted(known))}")
        if top in FIXED_SECTIONS and len(parts) == 2 and parts[1] not in (base.get(top) or {}):
            raise ConfigError(f"unknown key {key!r} ({arg}); check the spelling: {top} has "
                              f"{', '.join(base[top])}")


def _int(cfg: dict, dotted: str, minimum: int | None = None, allow_none: bool = False):
    node = cfg
    for part in dotted.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    if node is None and allow_none:
        return None
    if isinstance(node, bool) or not isinstance(node, int):
        raise ConfigError(f"{dotted} must be an integer, got {node!r}; set e.g. {dotted}={minimum or 1}")
    if minimum is not None and node < minimum:
        raise ConfigError(f"{dotted} must be >= {minimum}, got {node}; set {dotted}={minimum} or more")
    return node


def _number(value, name: str, minimum: float | None = None, maximum: float | None = None,
            strict_min: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
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
    scales = exp.get("scales") or {}
    if not any((scales.get(s) or {}).get("runs") for s in scales):
        raise ConfigError(f"experiment {exp['id']} ({exp.get('title')}) has no training runs of its own: "
                          f"it is computed from other experiments' results (make reproduce-{exp['id']})")
    scale = cfg.get("scale")
    gpus = (scales.get(scale) or {}).get("gpus")
    if scale == "paper" and gpus and not cuda_available and (cfg.get("launcher") or {}).get("name") == "local":
        raise ConfigError(f"experiment {exp['id']} at scale=paper trains on {gpus} GPUs and no GPU is "
                          f"visible here; use scale=cpu, or launcher=slurm on a GPU cluster")


def _bool(cfg: dict, dotted: str) -> None:
    node = cfg
    for part in dotted.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    if node is not None and not isinstance(node, bool):
        raise ConfigError(f"{dotted} must be true or false, got {node!r}; set {dotted}=true or {dotted}=false")


def check_run_settings(cfg: dict, world: int) -> None:
    """Logging, threads, checkpoints, timeouts and fault injection."""
    train = cfg["train"]
    steps = train["steps"]
    _int(cfg, "train.log_every", 0)
    _int(cfg, "train.checkpoint_every", 0, allow_none=True)
    _int(cfg, "train.keep_checkpoints", 1, allow_none=True)
    for key in ("trace", "save_final_params", "save_model", "bf16"):
        _bool(cfg, f"train.{key}")
    _bool(cfg, "overwrite")
    _bool(cfg, "optim.decay_bias_and_norm")
    threads = train.get("threads")
    if threads not in (None, "auto"):
        _int(cfg, "train.threads", 1)
    _number(cfg["optim"].get("min_lr_ratio", 0.0), "optim.min_lr_ratio", 0.0, 1.0)
    data = cfg.get("data") or {}
    if "val_fraction" in data:
        fraction = _number(data["val_fraction"], "data.val_fraction", 0.0)
        if fraction >= 1.0:
            raise ConfigError(f"data.val_fraction must be below 1 (a fraction held out), got {fraction}; "
                              f"use e.g. data.val_fraction=0.05")
    if isinstance(data.get("source"), dict) and data["source"].get("num_stories") is not None:
        _int(cfg, "data.source.num_stories", 1)
    dist_cfg = cfg.get("dist") or {}
    _number(dist_cfg.get("timeout_s", 300), "dist.timeout_s", 0.0, strict_min=True)
    _number(dist_cfg.get("step_timeout_s", 30), "dist.step_timeout_s", 0.0, strict_min=True)
    resume = cfg.get("resume")
    if resume is not None and not isinstance(resume, str):
        raise ConfigError(f"resume must be auto or a checkpoint/run folder, got {resume!r}; "
                          f"use resume=auto or resume=<folder>")
    fault = cfg.get("fault") or {}
    for key in ("kill_rank", "hang_rank", "signal_rank"):
        rank = _int(cfg, f"fault.{key}", 0, allow_none=True)
        if rank is None:
            continue
        if rank >= world:
            raise ConfigError(f"fault.{key}={rank} but there are only {world} ranks (0..{world - 1}); "
                              f"pick a rank below {world}")
        at = _int(cfg, "fault.at_step", 1, allow_none=True)
        if at is None or at > steps:
            raise ConfigError(f"fault.{key} needs fault.at_step between 1 and train.steps={steps}, "
                              f"got {at}; set e.g. fault.at_step={max(1, steps // 2)}")
    if fault.get("signal_rank") is not None and str(fault.get("signal")) not in ("SIGUSR1", "SIGUSR2", "SIGTERM"):
        raise ConfigError(f"fault.signal must be SIGUSR1, SIGUSR2 or SIGTERM, got {fault.get('signal')!r}; "
                          f"set e.g. fault.signal=SIGUSR1")
    nan_at = _int(cfg, "fault.nan_at_step", 1, allow_none=True)
    if nan_at is not None and nan_at > steps:
        raise ConfigError(f"fault.nan_at_step={nan_at} is past train.steps={steps}; pick a step from 1 to {steps}")


def check_model_shape(cfg: dict) -> None:
    """What the model's own constructor would reject only inside the workers."""
    config = (cfg.get("model") or {}).get("config") or {}
    hidden = config.get("hidden_size")
    for heads_key in ("num_heads", "num_attention_heads"):
        heads = config.get(heads_key)
        if heads is None:
            continue
        heads = _int(cfg, f"model.config.{heads_key}", 1)
        if isinstance(hidden, int) and not isinstance(hidden, bool) and hidden % heads:
            raise ConfigError(f"model.config.hidden_size={hidden} is not divisible by model.config.{heads_key}="
                              f"{heads}; use a multiple of {heads} (e.g. {heads * max(1, hidden // heads)})")
    for key in ("hidden_size", "num_layers", "num_hidden_layers", "intermediate_size"):
        if config.get(key) is not None:
            _int(cfg, f"model.config.{key}", 1)


def validate(cfg: dict, launcher_world_size: int | None = None, cuda_available: bool = False) -> int:
    """Check the resolved config; return the world size the run will use."""
    check_experiment(cfg, cuda_available)
    method = (cfg.get("method") or {}).get("name")
    if method not in METHODS:
        raise ConfigError(f"unknown method {method!r}; choose one of: {', '.join(METHODS)}")
    if method == "ddp" and cfg["method"].get("impl", "torch") not in ("torch", "flat"):
        raise ConfigError(f"method.impl must be torch or flat, got {cfg['method'].get('impl')!r}; "
                          f"set method.impl=torch or method.impl=flat")
    if method in ("dpu", "wp"):
        _int(cfg, "method.warmup_steps", 0)
    world = _int(cfg, "world_size", 1, allow_none=True)
    if cfg.get("layout"):
        nodes, per_node = parse_layout(cfg["layout"])
        if world is not None and world != nodes * per_node:
            raise ConfigError(f"layout={cfg['layout']} makes {nodes * per_node} workers but world_size={world}; "
                              f"drop world_size or make it {nodes * per_node}")
        world = nodes * per_node
    if launcher_world_size is not None:
        if world is not None and world != launcher_world_size:
            raise ConfigError(f"world_size={world} but the launcher started {launcher_world_size} "
                              f"ranks; drop world_size or make it {launcher_world_size}")
        world = launcher_world_size
    world = world or 1
    _int(cfg, "train.steps", 1)
    _int(cfg, "train.accum", 1)
    _int(cfg, "train.max_accum_factor", 1)
    _int(cfg, "train.eval_every", 0)
    _int(cfg, "train.eval_batches", 0)
    _int(cfg, "seed", 0)
    if not isinstance(cfg["train"].get("deterministic"), bool):
        raise ConfigError("train.deterministic must be true or false")
    hetero = cfg.get("hetero") or {}
    factor = _number(hetero.get("factor", 1.0), "hetero.factor")
    if factor < 1.0:
        raise ConfigError(f"hetero.factor must be >= 1 (a slowdown), got {factor}; use e.g. hetero.factor=4")
    slow = _int(cfg, "hetero.slow_rank", 0, allow_none=True)
    if slow is not None and slow >= world:
        raise ConfigError(f"hetero.slow_rank={slow} but there are only {world} ranks (0..{world - 1}); "
                          f"pick a rank below {world}")
    optim = cfg["optim"]
    _number(optim.get("lr"), "optim.lr", 0.0, strict_min=True)
    _number(optim.get("weight_decay"), "optim.weight_decay", 0.0)
    _number(optim.get("eps"), "optim.eps", 0.0, strict_min=True)
    _number(optim.get("clip_norm"), "optim.clip_norm", 0.0)
    betas = optim.get("betas")
    if not isinstance(betas, (list, tuple)) or len(betas) != 2:
        raise ConfigError(f"optim.betas must be a pair, got {betas!r}; set e.g. optim.betas=[0.9,0.95]")
    for i, b in enumerate(betas):
        _number(b, f"optim.betas[{i}]", 0.0, 0.999999)
    if optim.get("schedule") not in SCHEDULES:
        raise ConfigError(f"optim.schedule must be one of {', '.join(SCHEDULES)}, got {optim.get('schedule')!r}")
    _int(cfg, "optim.warmup_steps", 0)
    device = cfg.get("device", "auto")
    if device not in ("auto", "cpu", "cuda"):
        raise ConfigError(f"device must be auto, cpu or cuda, got {device!r}")
    if device == "cuda" and not cuda_available:
        raise ConfigError("device=cuda but no CUDA GPU is visible here; use device=cpu (or auto)")
    data = cfg.get("data") or {}
    if "micro_batch_size" in data:
        _int(cfg, "data.micro_batch_size", 1)
    if "seq_len" in data:
        seq = _int(cfg, "data.seq_len", 2)
        max_pos = ((cfg.get("model") or {}).get("config") or {}).get("max_position_embeddings")
        if isinstance(max_pos, int) and seq > max_pos:
            raise ConfigError(f"data.seq_len={seq} exceeds the model's max_position_embeddings={max_pos}; "
                              f"lower data.seq_len or pick a larger model")
    task = cfg.get("task")
    if not isinstance(task, str) or ":" not in task:
        raise ConfigError(f"task must look like 'package.module:function', got {task!r}")
    from .testbed.link import check_link
    check_link(cfg, external_launcher=launcher_world_size is not None
               or (cfg.get("launcher") or {}).get("name") == "slurm")
    check_run_settings(cfg, world)
    check_model_shape(cfg)
    out_dir = cfg.get("out_dir")
    if not out_dir:
        raise ConfigError("out_dir is empty; set out_dir=results/<name>")
    longest = max(len(part.encode()) for part in str(out_dir).split(os.sep))
    if longest > 255:  # a default name lists every override: many of them make it too long
        raise ConfigError(f"out_dir has a folder name of {longest} bytes, over the file system's 255 "
                          f"({str(out_dir)[:60]}...); set out_dir=<a shorter path>")
    summary = read_summary(out_dir)
    if summary and summary.get("status") == "completed" and not cfg.get("overwrite"):
        raise ConfigError(f"{out_dir} already holds a completed run; choose another out_dir or pass overwrite=true")
    return world
