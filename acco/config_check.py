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
    """Catch unknown config-group options (`method=foo`) before Hydra composes anything."""
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
        raise ConfigError(f"{name} must be {op} {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise ConfigError(f"{name} must be <= {maximum}, got {value}")
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


def validate(cfg: dict, launcher_world_size: int | None = None, cuda_available: bool = False) -> int:
    """Check the resolved config; return the world size the run will use."""
    check_experiment(cfg, cuda_available)
    method = (cfg.get("method") or {}).get("name")
    if method not in METHODS:
        raise ConfigError(f"unknown method {method!r}; choose one of: {', '.join(METHODS)}")
    if method == "ddp" and cfg["method"].get("impl", "torch") not in ("torch", "flat"):
        raise ConfigError(f"method.impl must be torch or flat, got {cfg['method'].get('impl')!r}")
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
        raise ConfigError(f"optim.betas must be a pair like [0.9, 0.95], got {betas!r}")
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
    out_dir = cfg.get("out_dir")
    if not out_dir:
        raise ConfigError("out_dir is empty; set out_dir=results/<name>")
    summary = read_summary(out_dir)
    if summary and summary.get("status") == "completed" and not cfg.get("overwrite"):
        raise ConfigError(f"{out_dir} already holds a completed run; choose another out_dir or pass overwrite=true")
    return world
