"""A run's up-front validation: every problem is one line naming it and the fix; the entry point
prints the first one and exits with code 2 before any worker starts or any file is written.

`validate` runs the config's own checks (each field's type and range, declared beside the field:
check_settings) and those of each layer the run uses, each kept with what it is about: the
method's (check_method), the clock's, the link's (check_link), a cluster profile's, the launcher's;
and every setting that selects code against its choices (check_choices); the checks across fields
(a rank below the world, a window within train.steps) here."""

from __future__ import annotations

import os

import torch

from ...config.schema import check_settings
from ...config.slurm_profile import check_profile
from ...config.validate import (
    ConfigError,
    check_experiment,
    check_model_shape,
    check_pretrained_source,
    check_trace_steps,
    embedding_rows,
    parse_layout,
    setting_int,
)
from ...engine.virtual_clock import check_clock
from ...runtime.summary import run_completed
from ...train.settings import check_method, check_optimizer, check_precision_and_budget
from ..launch import START_METHODS, external_env, gpu_shortage, usable_cores
from .choices import check_choices


def check_gpus_per_node(
    world: int, launcher_world_size: int | None, gpus_here: int | None, launcher_local_world_size: int | None
) -> None:
    """One GPU per rank, refused before any worker starts: the local launcher puts all `world`
    ranks on this machine; under torchrun/srun this process's node holds its local world size
    (LOCAL_WORLD_SIZE / the step's tasks per node). A submission from a login node is checked
    against the profile's GPUs per node instead (acco.harness.slurm.dispatch.job_shape)."""
    per_node = world
    if launcher_world_size is not None:
        env = external_env()
        per_node = launcher_local_world_size or (env.local_world_size if env else world)
    gpus = torch.cuda.device_count() if gpus_here is None else gpus_here
    if gpus == 0:  # a caller's word that CUDA is there (sizing a GPU run on a CPU machine): no count
        return
    problem = gpu_shortage(per_node, gpus)
    if problem:
        raise ConfigError(problem)


WORKERS_PER_CORE = 4  # local CPU workers per usable core before a run is refused (dist.max_local_workers)


def check_local_workers(cfg: dict, world: int, launcher_world_size: int | None, cuda_available: bool) -> None:
    """The local launcher starts `world` processes on this machine: on CPU at most
    dist.max_local_workers (auto: 4 per usable core), so world_size=64 on 2 cores is refused at once
    instead of running 64 processes for minutes. With a layout of several nodes it says that they
    are all this machine's (the link settings emulate the network between them)."""
    if launcher_world_size is not None or (cfg.get("launcher") or {}).get("name") != "local":
        return  # torchrun / srun / Slurm: the ranks are where the launcher put them
    device = cfg.get("device", "auto")
    if device == "cuda" or (device == "auto" and cuda_available):
        return  # one GPU per rank: checked against the GPUs (check_gpus_per_node)
    cores = usable_cores()
    limit = (cfg.get("dist") or {}).get("max_local_workers", "auto")
    if limit in (None, "auto"):
        limit = WORKERS_PER_CORE * cores
    else:
        limit = int(limit)  # an integer >= 1: its field's check
    if world > limit:
        raise ConfigError(
            f"world_size={world} would start {world} worker processes on this machine's {cores} core(s) "
            f"(at most {limit}: dist.max_local_workers); use fewer workers, launcher=slurm, or "
            f"dist.max_local_workers={world} to run them here anyway"
        )


def check_unused_settings(cfg: dict) -> None:
    """A setting the run would record and never read is refused: a path (or hub id) for data the run
    generates itself, a tokenizer folder for a tokenizer it trains or takes from the model."""
    data = cfg.get("data") or {}
    for block, name in (
        (data.get("source"), "data.source"),
        (((cfg.get("final_eval") or {}).get("lambada_source")), "final_eval.lambada_source"),
    ):
        if not isinstance(block, dict) or not block.get("generator"):
            continue
        # a path set for it is the user's; a hub id only where the generated config sets none (the
        # evaluation's LAMBADA source keeps its hub id beside a generator: the default's)
        for key in ("path", "hub_id") if name == "data.source" else ("path",):
            if block.get(key):
                raise ConfigError(
                    f"{name}.{key}={block[key]}: this source is generated ({name}.generator={block['generator']}) "
                    f"and reads no {key.replace('_', ' ')}; drop it, or choose a dataset that reads one "
                    f"(data=tinystories, openwebtext or alpaca with data.source.path=<a local copy>)"
                )
    tokenizer = data.get("tokenizer") or {}
    if isinstance(tokenizer, dict) and tokenizer.get("kind") in ("bpe", "from_model") and tokenizer.get("path"):
        what = "trains its own BPE" if tokenizer["kind"] == "bpe" else "reads the one saved with the model"
        raise ConfigError(
            f"data.tokenizer.path={tokenizer['path']}: data.tokenizer.kind={tokenizer['kind']} {what} and reads no "
            "path; drop it, or set data.tokenizer.kind=pretrained to read a tokenizer folder"
        )


def check_run_settings(cfg: dict, world: int) -> None:
    """What their fields' checks (check_settings) cannot say of the run's settings: the budget,
    the trace window, resume, a data source's size, the start method, and fault injection's ranks
    and steps against the world and train.steps."""
    train = cfg["train"]
    steps = train["steps"]
    check_precision_and_budget(cfg)
    data = cfg.get("data") or {}
    if "val_fraction" in data:
        fraction = float(data["val_fraction"])
        if fraction >= 1.0:
            raise ConfigError(
                f"data.val_fraction must be below 1 (a fraction held out), got {fraction}; "
                f"use e.g. data.val_fraction=0.05"
            )
    if isinstance(data.get("source"), dict) and data["source"].get("num_stories") is not None:
        setting_int(cfg, "data.source.num_stories", 1)
    dist_cfg = cfg.get("dist") or {}
    start_method = dist_cfg.get("start_method", "auto")
    if start_method not in START_METHODS:
        raise ConfigError(
            f"dist.start_method must be one of {', '.join(START_METHODS)}, got {start_method!r}; "
            "use dist.start_method=auto"
        )
    check_trace_steps(train.get("trace_steps"))
    resume = cfg.get("resume")
    if resume is not None and not isinstance(resume, str):
        raise ConfigError(
            f"resume must be auto or a checkpoint/run folder, got {resume!r}; use resume=auto or resume=<folder>"
        )
    fault = cfg.get("fault") or {}
    for key in ("kill_rank", "hang_rank", "signal_rank"):
        rank = fault.get(key)
        if rank is None:
            continue
        if rank >= world:
            raise ConfigError(
                f"fault.{key}={rank} but there are only {world} ranks (0..{world - 1}); pick a rank below {world}"
            )
        at = setting_int(cfg, "fault.at_step", 1, allow_none=True)
        if at is None or (steps is not None and at > steps):
            raise ConfigError(
                f"fault.{key} needs fault.at_step between 1 and train.steps={steps}, "
                f"got {at}; set e.g. fault.at_step={max(1, (steps or 2) // 2)}"
            )
    if fault.get("signal_rank") is not None and str(fault.get("signal")) not in ("SIGUSR1", "SIGUSR2", "SIGTERM"):
        raise ConfigError(
            f"fault.signal must be SIGUSR1, SIGUSR2 or SIGTERM, got {fault.get('signal')!r}; "
            f"set e.g. fault.signal=SIGUSR1"
        )
    if fault.get("final_eval_sleep_s") is not None:
        sleep_rank = setting_int(cfg, "fault.final_eval_sleep_rank", 0, allow_none=True)
        if sleep_rank is not None and sleep_rank >= world:
            raise ConfigError(
                f"fault.final_eval_sleep_rank={sleep_rank} but there are only {world} ranks "
                f"(0..{world - 1}); pick a rank below {world}"
            )
    nan_at = fault.get("nan_at_step")
    if nan_at is not None and steps is not None and nan_at > steps:
        raise ConfigError(f"fault.nan_at_step={nan_at} is past train.steps={steps}; pick a step from 1 to {steps}")


def _tokenizer_ids(cfg: dict) -> tuple[int, str] | None:
    """The number of ids the data's tokenizer produces, and where that number comes from; None when
    it is not known before the run (a missing tokenizer is the preflight's one-line error)."""
    spec = (cfg.get("data") or {}).get("tokenizer") or {}
    kind = spec.get("kind")
    if kind == "bpe":
        n = spec.get("vocab_size")
        if isinstance(n, bool) or not isinstance(n, int):
            return None
        return n, f"the BPE tokenizer (data.tokenizer.vocab_size={n})"
    path = (
        spec.get("path")
        if kind == "pretrained"
        else (cfg.get("model") or {}).get("pretrained_path")
        if kind == "from_model"
        else None
    )
    if not path or not os.path.exists(os.path.expanduser(str(path))):
        return None
    from ...data.tokenizer import load_tokenizer

    try:
        return len(load_tokenizer(os.path.expanduser(str(path)))), f"the tokenizer at {path}"
    except Exception:  # noqa: BLE001 - not loadable: the preflight reports it with its own line
        return None


def check_vocabulary(cfg: dict) -> None:
    """A tokenizer with more ids than the model's embedding has rows fails at the first forward
    (an index error inside every worker): catch it before anything starts."""
    if cfg.get("task") != "acco.tasks:build_task":
        return  # a task of one's own builds its model and data its own way
    tok, emb = _tokenizer_ids(cfg), embedding_rows(cfg)
    if tok and emb and tok[0] > emb[0]:
        raise ConfigError(
            f"{tok[1]} has {tok[0]} token ids but the model's embedding has {emb[0]} rows "
            f"({emb[1]}); use the model's own tokenizer (data.tokenizer.path) or a model "
            f"whose vocab_size is at least {tok[0]}"
        )


def validate(
    cfg: dict,
    launcher_world_size: int | None = None,
    cuda_available: bool = False,
    gpus_here: int | None = None,
    launcher_local_world_size: int | None = None,
) -> int:
    """Check the resolved config; return the world size the run will use."""
    check_experiment(cfg, cuda_available)
    check_method(cfg)
    check_settings(cfg)  # each field's type and range, declared beside it in the schema
    world = cfg.get("world_size")
    if cfg.get("layout"):
        nodes, per_node = parse_layout(cfg["layout"])
        if world is not None and world != nodes * per_node:
            raise ConfigError(
                f"layout={cfg['layout']} makes {nodes * per_node} workers but world_size={world}; "
                f"drop world_size or make it {nodes * per_node}"
            )
        world = nodes * per_node
    if launcher_world_size is not None:
        if world is not None and world != launcher_world_size:
            raise ConfigError(
                f"world_size={world} but the launcher started {launcher_world_size} "
                f"ranks; drop world_size or make it {launcher_world_size}"
            )
        world = launcher_world_size
    world = world or 1
    check_local_workers(cfg, world, launcher_world_size, cuda_available)
    if not isinstance(cfg["train"].get("deterministic"), bool):
        raise ConfigError("train.deterministic must be true or false")
    hetero = cfg.get("hetero") or {}
    factor = float(hetero.get("factor", 1.0))
    if factor < 1.0:
        raise ConfigError(f"hetero.factor must be >= 1 (a slowdown), got {factor}; use e.g. hetero.factor=4")
    slow = hetero.get("slow_rank")
    if slow is not None and slow >= world:
        raise ConfigError(
            f"hetero.slow_rank={slow} but there are only {world} ranks (0..{world - 1}); pick a rank below {world}"
        )
    check_optimizer(cfg)
    device = cfg.get("device", "auto")
    if device not in ("auto", "cpu", "cuda"):
        raise ConfigError(f"device must be auto, cpu or cuda, got {device!r}")
    # submitted to Slurm from here (a login node): the GPUs are on the compute nodes, not here
    submitting = launcher_world_size is None and (cfg.get("launcher") or {}).get("name") == "slurm"
    if device == "cuda" and not cuda_available and not submitting:
        raise ConfigError("device=cuda but no CUDA GPU is visible here; use device=cpu (or auto)")
    dist_backend = (cfg.get("dist") or {}).get("backend", "auto")
    if dist_backend not in ("auto", "nccl", "gloo"):
        raise ConfigError(f"dist.backend={dist_backend!r}: use auto, nccl or gloo")
    if dist_backend == "nccl" and device == "cpu":
        raise ConfigError("dist.backend=nccl needs device=cuda: use dist.backend=auto (gloo on CPU)")
    # gloo on CUDA stages every collective through host memory: ranks may share a GPU
    if device != "cpu" and cuda_available and not submitting and dist_backend != "gloo":
        check_gpus_per_node(world, launcher_world_size, gpus_here, launcher_local_world_size)
    data = cfg.get("data") or {}
    if "seq_len" in data:
        seq = data["seq_len"]
        max_pos = ((cfg.get("model") or {}).get("config") or {}).get("max_position_embeddings")
        if isinstance(max_pos, int) and seq > max_pos:
            raise ConfigError(
                f"data.seq_len={seq} exceeds the model's max_position_embeddings={max_pos}; "
                f"lower data.seq_len or pick a larger model"
            )
    task = cfg.get("task")
    if not isinstance(task, str) or ":" not in task:
        raise ConfigError(f"task must look like 'package.module:function', got {task!r}")
    from ...engine.virtual_clock import is_virtual
    from ..testbed.link import check_link

    # on the virtual clock the link is only numbers for its model: no namespaces are made, so none are needed
    link_cfg = cfg if not is_virtual(cfg) else {**cfg, "link": {**(cfg.get("link") or {}), "mode": "delay"}}
    check_link(
        link_cfg,
        external_launcher=launcher_world_size is not None or (cfg.get("launcher") or {}).get("name") == "slurm",
    )
    check_clock(cfg)
    check_run_settings(cfg, world)
    if (cfg.get("launcher") or {}).get("name") == "slurm":  # a Slurm profile's setup, options, env, signal
        check_profile(cfg["launcher"])
    check_choices(cfg)  # after the layers' own checks of theirs: each says it in its own words
    check_model_shape(cfg)
    check_unused_settings(cfg)
    check_pretrained_source(cfg)
    check_vocabulary(cfg)
    out_dir = cfg.get("out_dir")
    if not out_dir:
        raise ConfigError("out_dir is empty; set out_dir=results/<name>")
    longest = max(len(part.encode()) for part in str(out_dir).split(os.sep))
    if longest > 255:  # a default name lists every override: many of them make it too long
        raise ConfigError(
            f"out_dir has a folder name of {longest} bytes, over the file system's 255 "
            f"({str(out_dir)[:60]}...); set out_dir=<a shorter path>"
        )
    if run_completed(out_dir) and not cfg.get("overwrite"):
        raise ConfigError(f"{out_dir} already holds a completed run; choose another out_dir or pass overwrite=true")
    return world
