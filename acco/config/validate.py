"""Up-front validation: every problem is one line naming it and the fix; the entry point prints
the first one and exits with code 2 before any worker starts or any file is written."""

from __future__ import annotations

import os
from collections.abc import Iterable

import torch

from ..engine.schedule import SCHEDULES
from ..run.files import read_summary
from ..run.launch import START_METHODS, external_env, gpu_shortage
from ..train.trainer import METHODS


class ConfigError(ValueError):
    pass


def group_options(conf_dir: str, group: str) -> list[str]:
    """A config group's options as Hydra names them: conf/<group>/<a>/<b>.yaml is `a/b`."""
    folder = os.path.join(conf_dir, group)
    return sorted(
        os.path.relpath(os.path.join(d, f), folder)[:-5]
        for d, _, files in os.walk(folder)
        for f in files
        if f.endswith(".yaml")
    )


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
        if key.split("/")[0] == "hydra" or not os.path.isdir(os.path.join(conf_dir, key)):
            continue  # not a config group (Hydra's groups are the folders of conf/)
        options = group_options(conf_dir, key)
        for choice in value.split(","):
            if choice and choice not in options and not choice.startswith(("range(", "choice(", "glob(")):
                raise ConfigError(f"unknown {key} {choice!r} ({arg}); choose one of: {', '.join(options)}")
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
            data = yaml.safe_load(f) or {}
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
    """Every `key=value` on the command line against the schema (acco/config/schema.py), before
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


def _number(
    value, name: str, minimum: float | None = None, maximum: float | None = None, strict_min: bool = False
) -> float:
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


def check_gpus_per_node(
    world: int, launcher_world_size: int | None, gpus_here: int | None, launcher_local_world_size: int | None
) -> None:
    """One GPU per rank, refused before any worker starts: the local launcher puts all `world`
    ranks on this machine; under torchrun/srun this process's node holds its local world size
    (LOCAL_WORLD_SIZE / the step's tasks per node). A submission from a login node is checked
    against the profile's GPUs per node instead (acco.slurm.submit.job_shape)."""
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
    for key in ("trace", "save_final_params", "save_model", "activation_checkpointing"):
        _bool(cfg, f"train.{key}")
    check_precision_and_budget(cfg)
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
            raise ConfigError(
                f"data.val_fraction must be below 1 (a fraction held out), got {fraction}; "
                f"use e.g. data.val_fraction=0.05"
            )
    if isinstance(data.get("source"), dict) and data["source"].get("num_stories") is not None:
        _int(cfg, "data.source.num_stories", 1)
    _int(cfg, "data.num_proc", 1, allow_none=True)
    dist_cfg = cfg.get("dist") or {}
    _number(dist_cfg.get("timeout_s", 300), "dist.timeout_s", 0.0, strict_min=True)
    _number(dist_cfg.get("step_timeout_s", 30), "dist.step_timeout_s", 0.0, strict_min=True)
    start_method = dist_cfg.get("start_method", "auto")
    if start_method not in START_METHODS:
        raise ConfigError(
            f"dist.start_method must be one of {', '.join(START_METHODS)}, got {start_method!r}; "
            "use dist.start_method=auto"
        )
    if dist_cfg.get("final_timeout_s") is not None:
        _number(dist_cfg["final_timeout_s"], "dist.final_timeout_s", 0.0, strict_min=True)
    if dist_cfg.get("checkpoint_timeout_s") is not None:
        _number(dist_cfg["checkpoint_timeout_s"], "dist.checkpoint_timeout_s", 0.0, strict_min=True)
    check_trace_steps(train.get("trace_steps"))
    resume = cfg.get("resume")
    if resume is not None and not isinstance(resume, str):
        raise ConfigError(
            f"resume must be auto or a checkpoint/run folder, got {resume!r}; use resume=auto or resume=<folder>"
        )
    fault = cfg.get("fault") or {}
    for key in ("kill_rank", "hang_rank", "signal_rank"):
        rank = _int(cfg, f"fault.{key}", 0, allow_none=True)
        if rank is None:
            continue
        if rank >= world:
            raise ConfigError(
                f"fault.{key}={rank} but there are only {world} ranks (0..{world - 1}); pick a rank below {world}"
            )
        at = _int(cfg, "fault.at_step", 1, allow_none=True)
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
        _number(fault["final_eval_sleep_s"], "fault.final_eval_sleep_s", 0.0)
        sleep_rank = _int(cfg, "fault.final_eval_sleep_rank", 0, allow_none=True)
        if sleep_rank is not None and sleep_rank >= world:
            raise ConfigError(
                f"fault.final_eval_sleep_rank={sleep_rank} but there are only {world} ranks "
                f"(0..{world - 1}); pick a rank below {world}"
            )
    nan_at = _int(cfg, "fault.nan_at_step", 1, allow_none=True)
    if nan_at is not None and steps is not None and nan_at > steps:
        raise ConfigError(f"fault.nan_at_step={nan_at} is past train.steps={steps}; pick a step from 1 to {steps}")


def check_precision_and_budget(cfg: dict) -> None:
    """train.precision; train.samples / train.tokens budgets (at most one; tokens only where every
    sample has the same length) and train.steps, which a budget may replace (null)."""
    from ..train.precision import PRECISIONS

    train = cfg["train"]
    if train.get("precision", "auto") not in PRECISIONS:
        raise ConfigError(
            f"train.precision must be one of {', '.join(PRECISIONS)}, got {train.get('precision')!r}; "
            f"set e.g. train.precision=bf16"
        )
    from ..train.precision import GRAD_DTYPES

    if (train.get("grad_dtype") or "auto") not in GRAD_DTYPES:
        raise ConfigError(
            f"train.grad_dtype must be one of {', '.join(GRAD_DTYPES)}, got {train.get('grad_dtype')!r}; "
            f"set e.g. train.grad_dtype=fp32"
        )
    tokens = _int(cfg, "train.tokens", 1, allow_none=True)
    samples = _int(cfg, "train.samples", 1, allow_none=True)
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
        heads = _int(cfg, f"model.config.{heads_key}", 1)
        if isinstance(hidden, int) and not isinstance(hidden, bool) and hidden % heads:
            raise ConfigError(
                f"model.config.hidden_size={hidden} is not divisible by model.config.{heads_key}="
                f"{heads}; use a multiple of {heads} (e.g. {heads * max(1, hidden // heads)})"
            )
    for key in ("hidden_size", "num_layers", "num_hidden_layers", "intermediate_size"):
        if config.get(key) is not None:
            _int(cfg, f"model.config.{key}", 1)


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
    from ..data.tokenizer import load_tokenizer

    try:
        return len(load_tokenizer(os.path.expanduser(str(path)))), f"the tokenizer at {path}"
    except Exception:  # noqa: BLE001 - not loadable: the preflight reports it with its own line
        return None


def _embedding_rows(cfg: dict) -> tuple[int, str] | None:
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


def check_vocabulary(cfg: dict) -> None:
    """A tokenizer with more ids than the model's embedding has rows fails at the first forward
    (an index error inside every worker): catch it before anything starts."""
    if cfg.get("task") != "acco.tasks:build_task":
        return  # a task of one's own builds its model and data its own way
    tok, emb = _tokenizer_ids(cfg), _embedding_rows(cfg)
    if tok and emb and tok[0] > emb[0]:
        raise ConfigError(
            f"{tok[1]} has {tok[0]} token ids but the model's embedding has {emb[0]} rows "
            f"({emb[1]}); use the model's own tokenizer (data.tokenizer.path) or a model "
            f"whose vocab_size is at least {tok[0]}"
        )


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


def check_clock(cfg: dict) -> None:
    """clock.*: a mode, and on the virtual clock costs it can use (acco/engine/virtual_clock.py)."""
    from ..engine.virtual_clock import MODES

    clock = cfg.get("clock") or {}
    mode = clock.get("mode", "real")
    if mode not in MODES:
        raise ConfigError(f"clock.mode must be one of {', '.join(MODES)}, got {mode!r}; set clock.mode=real or virtual")
    for key in ("micro_batch_s", "sync_s", "optimizer_step_s"):
        if clock.get(key) is not None:
            _number(clock[key], f"clock.{key}", 0.0)
    if mode != "virtual":
        return
    if clock.get("micro_batch_s") is None or clock["micro_batch_s"] <= 0:
        raise ConfigError(
            f"clock.mode=virtual needs the seconds of one micro-batch, got clock.micro_batch_s="
            f"{clock.get('micro_batch_s')}; set e.g. clock.micro_batch_s=0.1"
        )
    rate = (cfg.get("link") or {}).get("rate_mbit") or 0
    if clock.get("sync_s") is None and not rate > 0:
        raise ConfigError(
            "clock.mode=virtual with clock.sync_s=null takes a sync's time from the link model, and "
            "link.rate_mbit is 0 (unlimited); set clock.sync_s (seconds) or link.rate_mbit > 0"
        )


def check_local_method(cfg: dict) -> None:
    """diloco / streaming_diloco: a schedule that can run, and a run of known length (it ends with
    every fragment synchronised after its last step)."""
    from ..engine.local_rounds import LocalSchedule, check_schedule

    name = cfg["method"]["name"]
    for key in ("sync_every", "fragments"):
        _int(cfg, f"method.{key}", 1)
    _int(cfg, "method.overlap_steps", 0)
    m = cfg["method"]
    schedule = LocalSchedule(
        int(m["sync_every"]),
        int(m["fragments"]),
        int(m["overlap_steps"]),
        _number(m.get("mixing"), "method.mixing", 0.0, 1.0),
        _number(m.get("outer_lr"), "method.outer_lr", 0.0, strict_min=True),
        _number(m.get("outer_momentum"), "method.outer_momentum", 0.0, 0.999999),
    )
    problem = check_schedule(schedule)
    if problem:
        raise ConfigError(f"method={name}: {problem}; see conf/method/{name}.yaml")
    train = cfg["train"]
    if not train.get("steps") or train.get("samples") or train.get("tokens"):
        raise ConfigError(
            f"method={name} needs a run of known length: set train.steps and train.samples=null "
            f"train.tokens=null (its last step synchronises every fragment)"
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
    method = (cfg.get("method") or {}).get("name")
    if method not in METHODS:
        raise ConfigError(f"unknown method {method!r}; choose one of: {', '.join(METHODS)}")
    if method == "ddp" and cfg["method"].get("impl", "torch") not in ("torch", "flat"):
        raise ConfigError(
            f"method.impl must be torch or flat, got {cfg['method'].get('impl')!r}; "
            f"set method.impl=torch or method.impl=flat"
        )
    from ..engine.torch_ddp import COMM_HOOKS

    if method == "ddp" and cfg["method"].get("comm_hook", "allreduce") not in COMM_HOOKS:
        raise ConfigError(
            f"method.comm_hook must be one of {', '.join(COMM_HOOKS)}, got {cfg['method'].get('comm_hook')!r}; "
            f"set e.g. method.comm_hook=allreduce"
        )
    if method in ("dpu", "wp"):
        _int(cfg, "method.warmup_steps", 0)
    if method in ("diloco", "streaming_diloco"):
        check_local_method(cfg)
    world = _int(cfg, "world_size", 1, allow_none=True)
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
    _int(cfg, "train.steps", 1, allow_none=True)  # null: a budget (train.samples/tokens) ends the run
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
        raise ConfigError(
            f"hetero.slow_rank={slow} but there are only {world} ranks (0..{world - 1}); pick a rank below {world}"
        )
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
    if "micro_batch_size" in data:
        _int(cfg, "data.micro_batch_size", 1)
    if "seq_len" in data:
        seq = _int(cfg, "data.seq_len", 2)
        max_pos = ((cfg.get("model") or {}).get("config") or {}).get("max_position_embeddings")
        if isinstance(max_pos, int) and seq > max_pos:
            raise ConfigError(
                f"data.seq_len={seq} exceeds the model's max_position_embeddings={max_pos}; "
                f"lower data.seq_len or pick a larger model"
            )
    task = cfg.get("task")
    if not isinstance(task, str) or ":" not in task:
        raise ConfigError(f"task must look like 'package.module:function', got {task!r}")
    from ..engine.virtual_clock import is_virtual
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
        from ..slurm.profile import check_profile

        check_profile(cfg["launcher"])
    check_model_shape(cfg)
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
    summary = read_summary(out_dir)
    if summary and summary.get("status") == "completed" and not cfg.get("overwrite"):
        raise ConfigError(f"{out_dir} already holds a completed run; choose another out_dir or pass overwrite=true")
    return world
