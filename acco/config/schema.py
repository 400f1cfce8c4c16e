"""The run configuration's schema, declared once: what keys exist and of what type. The values
stay in conf/ (the YAML files); every field here is MISSING or None, so nothing is set twice.

Registered in Hydra's ConfigStore (`register()`): conf/config.yaml starts its defaults list with
`acco_schema`, and each group option starts its own with its kind's schema (conf/method/dpu.yaml:
`- schema_warmup`, the settings dataclass of the dpu module: a method's is declared by its
module), so Hydra/OmegaConf reject a misspelt key or a wrongly typed value in any config file at
composition. Open-ended parts stay open: `model.config` is a Hugging Face config,
`data.source` and `data.tokenizer` are specs whose keys depend on their kind, `experiment` holds
an experiment's metadata and run lists.

OmegaConf converts leniently (`yes` -> true, `2` -> true, `3` -> "3"), so the command line gets a
strict check first (`check_override`): an unknown key or a value of the wrong type is one line
naming it and the fix. A config built outside Hydra composition (the experiment merge layer, a
config.yaml read back) is checked with `check_config`.

Past the front door (a command's checks of the values as written), code reads the config through
one object, `typed(cfg)` (`RunView`): a read-only DictConfig typed by this schema
(`cfg.train.accum`, `cfg.hetero.factor`), made once where a checked config enters a process (the
train command's precheck, before the memory, step-timeout, data and disk checks; a spawned or
Slurm-started rank; the dry run, the sbatch checks, the GPU check, the data preparation command,
the reference's entry points); given a view, `typed` returns it as is. What a run learns after it
is made (its world size, step timeout, pretrained model, checkpoint to resume, link runtime) is
noted in it (`noted`); a "what if" (another profile, another length) is a copy (`changed`). Every
key the schema declares is there (conf/ sets it, or it is null), so code reads it without a
default. Where plain data is needed (config.yaml, summary.json, the pickle sent to spawned workers
or to submitit, the data layer's cache keys) `acco.config.plain.plain(view)` converts back. Per-step
code reads what it needs once, at construction (an attribute access costs microseconds)."""

from __future__ import annotations

import copy
import dataclasses
import difflib
import functools
import os
import types
import typing
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeAlias, TypeVar

from omegaconf import MISSING, DictConfig, OmegaConf, read_write

from ..methods import METHODS
from ..methods.settings import Check, MethodConfig, setting
from .location import conf_dir
from .validate import ConfigError, check_value, group_options

SEE = "conf/config.yaml"
DEFAULT_TASK = "acco.tasks:build_task"  # another task (task=module:function) may read sections of its own
CONF_DIR = conf_dir()  # acco/conf, the package's


def _help(must: str, example: str):
    """Field metadata: what a value must be and an example, for the one-line error."""
    return {"must": must, "example": example}


# a field's range, checked up front (check_settings)
COUNT = Check("int", 1)  # an integer >= 1
COUNT_OR_NULL = Check("int", 1, optional=True)
INDEX = Check("int", 0)  # an integer >= 0
INDEX_OR_NULL = Check("int", 0, optional=True)
POSITIVE = Check("number", 0.0, above=True)
POSITIVE_OR_NULL = Check("number", 0.0, above=True, optional=True)
NONNEGATIVE = Check("number", 0.0)
FLAG = Check("bool", optional=True)


# -- config groups: one dataclass per kind of option ---------------------------------------------
# a method's settings are declared by its module (acco/methods/<name>.py, spec.config)


@dataclass
class PretrainedFrom:  # a model trained by another experiment's run (fig8 <- fig7)
    experiment: str = MISSING
    scale: str = "cpu"
    overrides: list[str] = field(default_factory=list)


@dataclass
class ModelConfig:  # conf/model/*.yaml
    name: str = MISSING
    family: str = MISSING  # gpt_neo | llama | auto (any causal LM transformers knows: config.model_type)
    pretrained_path: str | None = None
    hub_id: str | None = None
    config: dict[str, Any] = MISSING  # the Hugging Face config's keys (open-ended)
    pretrained_from: PretrainedFrom | None = None


@dataclass
class DataConfig:
    name: str = MISSING
    kind: str = MISSING  # pretrain | instruct
    source: dict[str, Any] = MISSING  # hub_id/path/split/... or generator: its keys depend on the source
    tokenizer: dict[str, Any] = MISSING  # kind: bpe | pretrained | from_model, and that kind's keys
    micro_batch_size: int = setting(check=COUNT)
    val_fraction: float = setting(check=NONNEGATIVE)  # below 1 too (check_run_settings)
    seed: int = MISSING
    cache_dir: str = MISSING


@dataclass
class PretrainData(DataConfig):  # conf/data/{synthetic,tinystories,openwebtext}.yaml
    seq_len: int = setting(check=Check("int", 2))
    num_proc: int | None = setting(None, COUNT_OR_NULL)


@dataclass
class InstructData(DataConfig):  # conf/data/{alpaca,synthetic_instruct}.yaml
    max_len: int = MISSING
    response_only_loss: bool = MISSING


@dataclass
class LauncherConfig:  # conf/launcher/local.yaml
    name: str = MISSING  # local | slurm
    profile: str = MISSING
    gpu: str | None = None
    gpu_mem_gb: float | None = None
    mfu: float | None = None
    # the cluster's usable bandwidth between nodes, Gbit/s, as nccl-tests' all-reduce bus bandwidth
    # (its busbw in GB/s x 8): the dry run's sync times and the sized step timeout; null: the preset's
    inter_gbps: float | None = None


@dataclass
class SlurmLauncher(LauncherConfig):  # conf/launcher/slurm.yaml, slurm_local.yaml
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    constraint: str | None = None
    time_min: int = MISSING
    mem_gb: int | None = None
    cpus_per_task: int = MISSING
    nodes: int | None = None
    tasks_per_node: int | None = None
    gpus_per_node: int | None = None
    # null: sized from the run's estimated checkpoint save at the paper scale (the plan's
    # signal_delay), else 90
    signal_delay_s: int | None = MISSING
    max_requeues: int = MISSING
    wait: bool = MISSING
    log_dir: str = MISSING
    # what a real cluster needs besides the shape: shell lines before the run
    # (`module load ...`), extra `#SBATCH` options in long form (`--exclusive`, `--gres=nvme:1`; not GPUs:
    # acco asks for one per task with --gpus-per-node), and environment variables for the job (`NAME`:
    # the submitting shell's value; `NAME=value`: that value)
    setup: list[str] = MISSING
    sbatch_options: list[str] = MISSING
    env: list[str] = MISSING
    # write bandwidth of out_dir's filesystem for the whole job (all ranks together), GB/s: sizes the
    # checkpoint save in the dry run and the signal delay
    checkpoint_write_gb_s: float = MISSING
    # GPU runs ask for whole nodes (--exclusive, and --mem=0 unless mem_gb says how much): a node
    # shared with another job shares its NICs, host memory and PCIe links with it
    whole_nodes: bool = True


@dataclass
class LoggerConfig:  # conf/logger/none.yaml
    name: str = MISSING


@dataclass
class WandbLogger(LoggerConfig):  # conf/logger/wandb.yaml
    mode: str = MISSING  # offline | online | disabled
    project: str = MISSING
    entity: str | None = None


# -- sections of conf/config.yaml -----------------------------------------------------------------


@dataclass
class TrainConfig:
    steps: int | None = setting(check=COUNT_OR_NULL)  # null: a budget (samples/tokens) ends the run
    samples: int | None = setting(check=COUNT_OR_NULL)
    tokens: int | None = setting(check=COUNT_OR_NULL)
    accum: int = setting(check=COUNT)
    deterministic: bool = MISSING  # checked with its own line (validate)
    max_accum_factor: int = setting(check=COUNT)
    eval_every: int = setting(check=INDEX)
    eval_batches: int = setting(check=INDEX)
    log_every: int = setting(check=INDEX)
    trace: bool = setting(check=FLAG)
    trace_steps: list[int] | None = MISSING
    save_final_params: bool = setting(check=FLAG)
    save_model: bool = setting(check=FLAG)
    threads: Any = field(
        default=MISSING,
        metadata={**_help("auto or an integer >= 1", "auto"), "check": Check("int", 1, optional=True, words=("auto",))},
    )
    precision: str = MISSING
    grad_dtype: str = MISSING
    activation_checkpointing: bool = setting(check=FLAG)
    checkpoint_every: int | None = setting(check=INDEX_OR_NULL)
    keep_checkpoints: int | None = setting(check=COUNT_OR_NULL)
    # every collective each rank issues, in out_dir/collectives.rank<r>.jsonl
    audit_collectives: bool = MISSING


@dataclass
class OptimConfig:
    lr: float = setting(check=POSITIVE)
    betas: list[float] = MISSING
    eps: float = setting(check=POSITIVE)
    weight_decay: float = setting(check=NONNEGATIVE)
    decay_bias_and_norm: bool = setting(check=FLAG)
    clip_norm: float = setting(check=NONNEGATIVE)
    schedule: str = MISSING
    warmup_steps: int = setting(check=INDEX)
    min_lr_ratio: float = setting(check=Check("number", 0.0, 1.0))


@dataclass
class FinalEvalConfig:
    lambada: bool = MISSING
    heldout: bool = MISSING
    lambada_source: dict[str, Any] = MISSING  # hub_id/path/split/config_name, or a generator


# how the testbed emulates the link: auto | netns (namespaces, kernel shaping) | delay (in-process sleeps)
LINK_MODES = ("auto", "netns", "delay")
# The namespaces' packet size. Every packet costs the kernel the same CPU (TCP, veth, bridge, tbf) on
# the cores that also compute; a cluster's NICs offload that work and its Ethernet runs jumbo frames,
# so 9000 keeps the emulation's own CPU cost nearer a real link's (measured, 4 workers at 50 Mbit/s:
# 0.20 s of machine CPU per sync at 1500, 0.08 s at 9000).
DEFAULT_MTU, MIN_MTU, MAX_MTU = 9000, 576, 65535
CLOCK_MODES = ("real", "virtual")  # virtual: time is the schedule's modelled time (VirtualClock)


@dataclass
class LinkConfig:
    rate_mbit: float = setting(check=NONNEGATIVE)  # 0: unlimited
    delay_ms: float = setting(check=NONNEGATIVE)  # 0: none
    # (the testbed adds `runtime` when the run starts: not a setting)
    mode: str = setting(check=Check("choice", choices=LINK_MODES, default="auto"))
    # bytes per packet on the namespaces' veth links
    mtu: int = setting(check=Check("int", MIN_MTU, MAX_MTU, default=DEFAULT_MTU))


@dataclass
class ClockConfig:  # the virtual clock's (VirtualClock) costs; what they need of each other: check_clock
    mode: str = setting(check=Check("choice", choices=CLOCK_MODES, default="real"))
    micro_batch_s: float | None = setting(check=Check("number", 0.0, optional=True))
    # null: the link model (link.rate_mbit, link.delay_ms)
    sync_s: float | None = setting(check=Check("number", 0.0, optional=True))
    optimizer_step_s: float = setting(check=NONNEGATIVE)
    # the backward's share of a micro-batch; null: 2/3 (FLOPs)
    backward_share: float | None = setting(None, Check("number", 0.0, 1.0, optional=True))


@dataclass
class HeteroConfig:
    slow_rank: int | None = setting(check=INDEX_OR_NULL)
    factor: float = setting(check=Check("number"))  # >= 1 too, with its own line


@dataclass
class FaultConfig:  # at_step, signal and final_eval_sleep_rank: checked where a fault reads them
    kill_rank: int | None = setting(check=INDEX_OR_NULL)
    hang_rank: int | None = setting(check=INDEX_OR_NULL)
    signal_rank: int | None = setting(check=INDEX_OR_NULL)
    signal: str = MISSING
    at_step: int | None = MISSING
    nan_at_step: int | None = setting(check=COUNT_OR_NULL)
    final_eval_sleep_s: float | None = setting(check=Check("number", 0.0, optional=True))
    final_eval_sleep_rank: int = MISSING


@dataclass
class DistConfig:
    timeout_s: float = setting(check=POSITIVE)
    # null: sized before the workers start, by the run's plan
    step_timeout_s: float | None = setting(check=POSITIVE_OR_NULL)
    final_timeout_s: float | None = setting(check=POSITIVE_OR_NULL)
    # the cross-rank waits of a checkpoint save
    checkpoint_timeout_s: float = setting(check=POSITIVE_OR_NULL)
    start_method: str = MISSING  # auto | fork | spawn | forkserver (worker_start_method)
    comm_thread: bool = True  # false: the flat engine's syncs inline, no thread or stream (make gpu-check)
    backend: str = "auto"  # auto (nccl on CUDA, gloo on CPU) | nccl | gloo (on CUDA: host copies, GPUs shared)
    # CPU workers the local launcher may start: auto (4 per core) | a number
    max_local_workers: Any = setting("auto", Check("int", 1, optional=True, words=("auto",)))


@dataclass
class ClaimConfig:  # one claim of the paper, tested by the analysis
    name: str = MISSING
    paper: str = ""  # the paper's number or wording
    a: dict[str, Any] = field(default_factory=dict)  # run identity -> value (or min / 2nd / max)
    b: dict[str, Any] = field(default_factory=dict)
    metric: str = MISSING  # analysis/claims.py METRICS
    expect: str = MISSING  # matches / worse / better: A against B
    question: str = "dynamics"  # dynamics (loss at equal work) or wall-clock (time on a link)
    if_not_reproduced: str = ""  # the report's reading of the runs when the verdict is not the paper's
    tests: str = "size"  # what the paper claims: size (against the metric's margin) or sign (against 0)
    looks: list[int] | None = None  # the planned looks, numbers of paired seeds (None: analysis/stats.py LOOKS)
    versus: str | None = None  # a second metric: the claim is on the per-seed difference of the two gaps
    scales: list[str] | None = None  # the scales whose runs test it (None: every scale the experiment has)


@dataclass
class ExperimentConfig:  # conf/experiment_info/<id>.yaml + conf/experiment/<id>/<scale>.yaml
    id: str = MISSING
    title: str = MISSING
    paper: dict[str, Any] = field(default_factory=dict)  # the paper's numbers (free-form)
    gpus: int | None = None  # GPUs the paper-scale runs train on
    runs: list[Any] | None = None  # the run list: {key: value or [values]} each (acco.config.experiments)
    rehearsal_maps: dict[str, Any] | None = None  # scale=rehearsal: paper value -> rehearsal value
    claims: list[ClaimConfig] = field(default_factory=list)  # what the reproduction report tests
    lr_choice: dict[str, Any] | None = None  # how the experiment's rate was chosen (fig6: from lr_sweep's DDP runs)
    # how the local methods' outer optimizer was chosen (beyond_diloco: from outer_sweep's runs)
    outer_choice: dict[str, Any] | None = None


@dataclass
class RunConfig:
    """The whole run (conf/config.yaml with its groups; comments there say what each key does)."""

    method: MethodConfig = MISSING
    model: ModelConfig = MISSING
    data: DataConfig = MISSING
    launcher: LauncherConfig = MISSING
    logger: LoggerConfig = MISSING
    experiment: ExperimentConfig | None = None  # experiment=<id>/<scale>: its metadata and run list
    seed: int = setting(check=INDEX)
    scale: str = MISSING
    layout: str | None = MISSING
    world_size: int | None = setting(check=COUNT_OR_NULL)
    device: str = MISSING
    out_dir: str | None = MISSING
    results_root: str = MISSING
    overwrite: bool = setting(check=FLAG)
    resume: str | None = field(default=MISSING, metadata=_help("auto or a checkpoint/run folder", "auto"))
    task: str = MISSING
    train: TrainConfig = MISSING
    optim: OptimConfig = MISSING
    final_eval: FinalEvalConfig = MISSING
    link: LinkConfig = MISSING
    clock: ClockConfig = MISSING
    hetero: HeteroConfig = MISSING
    fault: FaultConfig = MISSING
    dist: DistConfig = MISSING


# the kinds of the groups other than method: each option's kind by the name its YAML file lists
# first in its defaults
_FIXED_GROUP_SCHEMAS: dict[str, dict[str, type]] = {
    "model": {"schema": ModelConfig},
    "data": {"schema_pretrain": PretrainData, "schema_instruct": InstructData},
    "launcher": {"schema_local": LauncherConfig, "schema_slurm": SlurmLauncher},
    "logger": {"schema_none": LoggerConfig, "schema_wandb": WandbLogger},
}


def method_schemas() -> dict[str, type]:
    """The method group's kinds, read from the registry (acco.methods) when asked: each spec's
    settings dataclass under the name its conf/method/<name>.yaml lists first (the base MethodConfig
    first: a method without settings of its own)."""
    kinds: dict[str, type] = {"schema_acco": MethodConfig}
    for spec in METHODS.values():
        kinds.setdefault(spec.config_schema, spec.config)
    return kinds


def _group_schemas(group: str) -> dict[str, type]:
    return method_schemas() if group == "method" else _FIXED_GROUP_SCHEMAS[group]


_V = TypeVar("_V")


class _ByGroup(Mapping[str, _V]):
    """A read-only mapping of the config groups whose values are made at each lookup (`of(group)`):
    the method group's from the registry as it is then, so a method registered after this module
    was imported (a plugin, a test's) is a kind of the method section with no call to refresh it."""

    def __init__(self, of: Callable[[str], _V]):
        self._of = of

    def __getitem__(self, group: str) -> _V:
        if group not in self:
            raise KeyError(group)
        return self._of(group)

    def __contains__(self, group: object) -> bool:
        return group == "method" or group in _FIXED_GROUP_SCHEMAS

    def __iter__(self) -> Iterator[str]:
        return iter(("method", *_FIXED_GROUP_SCHEMAS))

    def __len__(self) -> int:
        return 1 + len(_FIXED_GROUP_SCHEMAS)


# each group option's kind: the name its YAML file lists first in its defaults
GROUP_SCHEMAS: Mapping[str, dict[str, type]] = _ByGroup(_group_schemas)
# every kind of a group, for checks made before the option is known (the command line)
GROUP_KINDS: Mapping[str, tuple[type, ...]] = _ByGroup(lambda g: tuple(dict.fromkeys(_group_schemas(g).values())))


def register() -> None:
    """Put the schemas in Hydra's ConfigStore; before Hydra composes (the train command and
    acco.config.experiments.compose call it). Storing again replaces: calling twice is harmless.
    A registered method without a conf/method/<name>.yaml (one defined outside acco) is an option
    of the method group too: its settings dataclass with its defaults (docs/methods.md)."""
    from hydra.core.config_store import ConfigStore

    cs = ConfigStore.instance()
    cs.store(name="acco_schema", node=RunConfig)
    for group, kinds in GROUP_SCHEMAS.items():
        for name, node in kinds.items():
            cs.store(group=group, name=name, node=node)
    for spec in METHODS.values():
        if not os.path.exists(os.path.join(CONF_DIR, "method", f"{spec.name}.yaml")):
            cs.store(group="method", name=spec.name, node=spec.config(name=spec.name))


# -- strict checks with one-line messages ---------------------------------------------------------

_KIND_WORDS = {
    int: ("an integer", "1"),
    float: ("a number", "1.0"),
    bool: ("true or false", "true"),
    str: ("a string", "<text>"),
}


def _unwrap(tp) -> tuple[Any, bool]:
    """(type, None allowed) of Optional[X] / X."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return args[0], True
    return tp, False


@functools.cache
def _fields(cls) -> dict[str, tuple[dataclasses.Field, Any]]:
    """name -> (field, declared type) of a schema dataclass (its annotations resolved)."""
    hints = typing.get_type_hints(cls)
    return {f.name: (f, hints[f.name]) for f in dataclasses.fields(cls)}


def _unknown(dotted: str, arg: str, options, prefix: str) -> ConfigError:
    name = dotted.rsplit(".", 1)[-1]
    given = f" ({arg})" if arg else ""
    close = difflib.get_close_matches(name, list(options), n=1, cutoff=0.6)
    if close:
        return ConfigError(
            f"unknown key {dotted!r}{given}: did you mean {prefix}{close[0]}? check the spelling "
            f"({SEE} lists every key)"
        )
    where = f"{prefix[:-1]} has {', '.join(options)}" if prefix else f"the top-level keys are {', '.join(options)}"
    return ConfigError(f"unknown key {dotted!r}{given}; check the spelling: {where} ({SEE})")


def _check_value(dotted: str, value, f: dataclasses.Field | None, tp) -> None:
    """A value (as Hydra's override parser or a YAML file gives it) against its declared type,
    without OmegaConf's lenient conversions."""
    tp, optional = _unwrap(tp)
    if value is None:
        if optional or tp is Any:
            return
    elif tp is Any or (isinstance(value, str) and "${" in value):
        return  # open-ended, or an interpolation (resolved and checked after composition)
    elif tp in _KIND_WORDS:
        ok = (
            isinstance(value, bool)
            if tp is bool
            else isinstance(value, int) and not isinstance(value, bool)
            if tp is int
            else isinstance(value, (int, float)) and not isinstance(value, bool)
            if tp is float
            else isinstance(value, str)
        )
        if ok:
            return
    elif typing.get_origin(tp) is list:
        if isinstance(value, (list, tuple)):
            (item,) = typing.get_args(tp) or (Any,)
            for i, v in enumerate(value):
                _check_value(f"{dotted}[{i}]", v, None, item)
            return
    elif typing.get_origin(tp) is dict or dataclasses.is_dataclass(tp):
        if isinstance(value, dict):
            return  # its keys are checked by the caller (check_config) or are open-ended
    meta = dict(f.metadata) if f is not None else {}
    word, example = _KIND_WORDS.get(tp, (None, None))
    if typing.get_origin(tp) is list:
        word, example = "a list", "[...]"
    must = meta.get("must") or word or "a section"
    example = meta.get("example") or example or "{...}"
    if optional and "must" not in meta:
        must += " or null"
    raise ConfigError(f"{dotted} must be {must}, got {value!r}; set e.g. {dotted}={example}")


def _lookup(dotted: str, arg: str, groups: dict[str, str] | None = None):
    """The dataclass field a dotted key names: (field, type), (None, Any) inside an open-ended
    part; an unknown key raises. A group's key is looked up in its chosen option's kind, or in
    any kind of the group when the option is not known yet."""
    parts = dotted.split(".")
    classes: tuple = (RunConfig,)
    f, tp = None, RunConfig
    for i, part in enumerate(parts):
        found = None
        for cls in classes:
            found = _fields(cls).get(part)
            if found is not None:
                break
        prefix = ".".join(parts[:i]) + "." if i else ""
        if found is None:
            options = list(dict.fromkeys(n for cls in classes for n in _fields(cls)))
            raise _unknown(dotted, arg, options, prefix)
        f, decl = found
        tp, _ = _unwrap(decl)
        if i == 0 and part in GROUP_KINDS:
            kind = (groups or {}).get(part)
            classes = (kind,) if kind is not None else GROUP_KINDS[part]
        elif dataclasses.is_dataclass(tp):
            classes = (tp,)
        else:
            return (None, Any) if i < len(parts) - 1 else (f, decl)
    return f, decl


def check_override(key: str, values: list, arg: str, options: dict[str, str] | None = None) -> None:
    """One command-line override (`train.steps=5`; `values`: what Hydra's override parser gives,
    several for a sweep) against the schema: the key exists, each value has the declared type.
    `options`: the group options chosen (method -> dpu), so a key of another option's kind
    (method.warmup_steps with method=acco) is named as such; a group not in it: any kind."""
    group = key.split(".")[0]
    if group in GROUP_KINDS and "." not in key:
        return  # a group choice (method=dpu): acco.config.validate.check_overrides checks the option
    option = (options or {}).get(group)
    kind = option_kind(group, option) if option else None
    try:
        f, tp = _lookup(key, arg, {group: kind} if kind else None)
    except ConfigError:
        if kind is None:
            raise
        others = sorted(
            o
            for o in group_options(CONF_DIR, group)
            if option_kind(group, o) not in (None, kind) and _has(group, option_kind(group, o), key)
        )
        if not others:
            raise
        raise ConfigError(
            f"{key} is not a setting of {group}={option} ({arg}); it belongs to "
            f"{' and '.join(f'{group}={o}' for o in others)}: drop it or choose one of those"
        ) from None
    for value in values:
        _check_value(key, value, f, tp)


def _has(group: str, kind, dotted: str) -> bool:
    try:
        _lookup(dotted, "", {group: kind})
    except ConfigError:
        return False
    return True


def option_kind(group: str, option: str):
    """The schema dataclass of conf/<group>/<option>.yaml: the first entry of its defaults list
    (a method registered without a file: its spec's settings dataclass)."""
    listed = _listed_kind(group, option)
    if listed is None:
        spec = METHODS.get(option) if group == "method" else None
        return spec.config if spec is not None else None
    return GROUP_SCHEMAS[group].get(listed)


@functools.cache
def _listed_kind(group: str, option: str) -> str | None:
    """The first entry of conf/<group>/<option>.yaml's defaults list ("" without one); None: no such file."""
    path = os.path.join(CONF_DIR, group, f"{option}.yaml")
    if not os.path.exists(path):
        return None
    loaded = OmegaConf.load(path)
    defaults = (loaded.get("defaults") if isinstance(loaded, DictConfig) else None) or []
    return str(defaults[0]) if defaults else ""


def check_config(cfg: dict, allow_extra_top_level: bool = False) -> None:
    """A whole config (plain dict, resolved) against the schema: unknown keys, wrong types.
    `allow_extra_top_level`: a task of one's own (task=module:function) may read a section of its own."""
    groups = {}
    for group, kinds in GROUP_KINDS.items():
        keys = set((cfg.get(group) or {}).keys()) if isinstance(cfg.get(group), dict) else set()
        # the option's kind: the one declaring all its keys (the smallest such: acco's before ddp's)
        fitting = [k for k in kinds if keys <= set(_fields(k))]
        # none: the one declaring most of them (a later one on a tie), so the error names the odd key
        groups[group] = (
            min(fitting, key=lambda k: len(_fields(k)))
            if fitting
            else max(reversed(kinds), key=lambda k: len(keys & set(_fields(k))))
        )
    _check_node(cfg, RunConfig, "", groups, allow_extra_top_level)


def _check_node(node: dict, cls, prefix: str, groups: dict, allow_extra: bool) -> None:
    fields = _fields(cls)
    for key, value in node.items():
        if key.startswith("_"):
            continue  # run-time notes of the entry point (_resume)
        dotted = f"{prefix}{key}"
        if key not in fields:
            if allow_extra and not prefix:
                continue
            raise _unknown(dotted, "", list(fields), prefix)
        f, decl = fields[key]
        if value == "???":  # OmegaConf's MISSING: no config file set it
            raise ConfigError(f"{dotted} has no value; set it, e.g. {dotted}=... ({SEE})")
        if not prefix and key in GROUP_KINDS:
            decl = groups[key]  # the chosen option's kind
        _check_value(dotted, value, f, decl)
        tp, _ = _unwrap(decl)
        if dataclasses.is_dataclass(tp) and isinstance(value, dict):
            _check_node(value, tp, f"{dotted}.", groups, allow_extra)


def check_settings(cfg: dict) -> None:
    """Every schema field's check (its `check`, a Check) on a plain config,
    section by section in the schema's order; only the keys present (a group's section: the checks
    of each kind of the group). The method's settings are its spec's, checked by
    check_method; the checks across fields stay with the code that knows them (the run's validate)."""
    _check_section(cfg, (RunConfig,), "")


def _check_section(node: dict, classes: tuple, prefix: str) -> None:
    seen: set[str] = set()
    for cls in classes:
        for name, (f, decl) in _fields(cls).items():
            if name in seen or name not in node:
                continue
            seen.add(name)
            value, dotted = node[name], f"{prefix}{name}"
            if "check" in f.metadata:
                check_value(dotted, value, f.metadata["check"])
            if not prefix and name == "method":
                continue
            tp, _ = _unwrap(decl)
            kinds = GROUP_KINDS.get(name) if not prefix else None
            if isinstance(value, dict) and (kinds or dataclasses.is_dataclass(tp)):
                _check_section(value, kinds or (tp,), f"{dotted}.")


# The run config past the front door: typed(cfg), a read-only DictConfig typed by RunConfig. Every
# function after a command's checks takes this one object (attribute reads: `cfg.train.accum`);
# plain data (config.yaml, a pickle for a spawned worker or submitit) is plain(view).
RunView: TypeAlias = DictConfig


def typed(cfg: dict | DictConfig) -> RunView:
    """The run config as code reads it: a read-only, schema-typed view of a checked config,
    `cfg.train.accum` (and `cfg["train"]["accum"]`). A view given again is returned as it is, so
    each entry point converts once and what it calls may too. Keys added at run time (link.runtime,
    _resume, a custom task's section) are kept, untyped. Plain data for a file, a hash or a pickle:
    `OmegaConf.to_container(view, resolve=True)`."""
    if isinstance(cfg, DictConfig):
        return cfg
    schema = OmegaConf.structured(RunConfig)
    sections = {}  # each section's schema node: a group's by the option's kind (the smallest that fits)
    for name, (_, decl) in _fields(RunConfig).items():
        value, (tp, _) = cfg.get(name), _unwrap(decl)
        if isinstance(value, dict) and dataclasses.is_dataclass(tp):
            kinds: tuple[Any, ...] = GROUP_KINDS.get(name, (tp,))
            fitting = [k for k in kinds if set(value) <= set(_fields(k))] or [kinds[-1]]
            sections[name] = OmegaConf.structured(min(fitting, key=lambda k: len(_fields(k))))
    for node in (schema, *sections.values()):
        _open(node)
    view = OmegaConf.merge(schema, sections, cfg)
    assert isinstance(view, DictConfig)  # a mapping merged over the schema's mapping
    OmegaConf.set_readonly(view, True)
    return view


def noted(view: RunView, notes: dict[str, Any]) -> RunView:
    """The view with what a run learns after its checks set in it (dotted keys: world_size,
    dist.step_timeout_s, model.pretrained_path, _resume, link.runtime), in place: the one view
    stays the one object every later function reads."""
    with read_write(view):
        for dotted, value in notes.items():
            OmegaConf.update(view, dotted, value, merge=False, force_add=True)
    return view


def changed(view: RunView, changes: dict[str, Any]) -> RunView:
    """A copy of the view with `changes` (dotted keys) set: the same run asked "what if" (another
    launcher profile, another length), the view itself untouched (plain data is typed first)."""
    return noted(copy.deepcopy(typed(view)), changes)


def _open(node: DictConfig) -> None:
    """Let a typed node (and every typed node under it) take keys its dataclass does not declare:
    a typed DictConfig refuses them unless its own struct flag is False."""
    OmegaConf.set_struct(node, False)
    for key in node:
        child = node._get_node(key)
        if isinstance(child, DictConfig) and not child._is_missing() and not child._is_none():
            _open(child)


def top_level_keys() -> set[str]:
    return set(_fields(RunConfig))
