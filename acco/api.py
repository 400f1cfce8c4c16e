"""ACCO (and DDP, DPU, WP, DiLoCo, Streaming DiLoCo) in one's own training loop.

    import acco
    trainer = acco.Overlapped(model, loss_fn, data, method="acco", steps=100, accum=2,
                              optimizer=dict(lr=5e-4, weight_decay=0.1))
    for _ in range(trainer.steps):
        out = trainer.step()            # one committed optimizer step; out.loss_mean, out.lr, ...
    trainer.close()                     # the model now holds the committed parameters θ_T

`model` is any torch.nn.Module, `loss_fn(model, batch)` returns the mean loss of one micro-batch
(a 0-dim tensor), `data` is this rank's micro-batches: an iterable, or an object whose `.batch(k)`
returns its k-th micro-batch (acco.data.RankBatchStream). The method's schedule decides how many
micro-batches a step takes and when (ACCO: 2 x accum per rank per step; adaptive rounds: more on a
fast rank), so the loop hands over the data, not the batches. Every rank of the process group
builds one Overlapped and calls step() alike.

It is the suite's own machinery, not a copy: the trainer's backends (the flat engine for ddp, dpu,
wp and acco, the local engine for diloco and streaming_diloco, PyTorch DDP + ZeRO-1 for ddp with
impl="torch"), built by the same build_backend as the Trainer's and run one committed step at a
time through the same schedules of rounds; the same precision, gradient dtype and learning-rate
schedule; the defaults of the optimizer and of each method from conf/config.yaml and
conf/method/*.yaml (a method defined outside acco: its settings dataclass's), each method setting
checked by its field's check, as the suite's up-front checks do. A deterministic run's losses and
parameters are bit-identical to experiments/train.py's with the same model, data order and settings
(tests/integration/test_api.py)."""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from functools import cache
from typing import Any

import torch
import torch.distributed as dist
from omegaconf import OmegaConf
from torch import nn

from . import methods
from .config.location import conf_dir
from .config.validate import ConfigError
from .engine.local_rounds import check_schedule
from .engine.rounds import StopRule
from .engine.schedule import SCHEDULES, make_lr_schedule, per_step
from .engine.sharded_adamw import AdamWSettings
from .engine.sync import SyncResult
from .engine.trace import TraceRecorder
from .methods.settings import MISSING, Check, field_checks
from .runtime.process_group import training_group_options
from .tasks import Task, to_device
from .train import precision as dtypes
from .train.backend_local import local_schedule
from .train.build import build_backend
from .train.checkpoint import rng_state, set_rng_state
from .train.precision import GRAD_DTYPES, PRECISIONS
from .train.settings import check_setting

METHODS = tuple(methods.METHODS)  # the registry's names, as acco.METHODS lists them
CONF_DIR = conf_dir()  # acco/conf, shipped with the package
# conf/config.yaml's optim keys that are not the optimizer's: the schedule's length is `steps`
OPTIMIZER_KEYS = ("lr", "betas", "eps", "weight_decay", "decay_bias_and_norm", "clip_norm")
SCHEDULE_KEYS = ("schedule", "warmup_steps", "min_lr_ratio")
STATE_VERSION = 1

__all__ = ["METHODS", "Overlapped", "SyncResult"]


@cache
def _suite_defaults(path: str, section: str | None = None) -> dict:
    """A conf/ file's plain values (its `defaults:` list dropped): the suite's defaults are the API's."""
    cfg = OmegaConf.to_container(OmegaConf.load(path))
    assert isinstance(cfg, dict)
    cfg.pop("defaults", None)
    return dict(cfg[section]) if section else cfg


def optimizer_defaults() -> dict:
    """conf/config.yaml's optim section: AdamW's settings and the learning-rate schedule."""
    return dict(_suite_defaults(os.path.join(CONF_DIR, "config.yaml"), "optim"))


def method_defaults(method: str) -> dict:
    """conf/method/<method>.yaml's options or, for a method without one (defined outside acco),
    its settings dataclass's defaults; but for ddp's `impl`: flat here (the flat engine, like the
    other methods), torch (PyTorch's DDP + ZeroRedundancyOptimizer) in the suite."""
    spec = methods.get(method)
    path = os.path.join(CONF_DIR, "method", f"{method}.yaml")
    options = dict(_suite_defaults(path)) if os.path.exists(path) else _dataclass_defaults(spec.config)
    options.pop("name", None)
    if spec.impls:  # ddp: a choice of implementation
        options["impl"] = "flat"
    return options


def _dataclass_defaults(config: type) -> dict:
    """A settings dataclass's fields that have a default (MISSING: none, it must be given)."""
    out = {}
    for f in dataclasses.fields(config):
        if f.default_factory is not dataclasses.MISSING:
            out[f.name] = f.default_factory()
        elif f.default is not dataclasses.MISSING and f.default is not MISSING:
            out[f.name] = f.default
    return out


def _check_method_options(method: str, options: dict) -> None:
    """Each of the method's settings against its field's check (its settings dataclass, the rule
    the config's up-front checks apply: check_setting), phrased for Python
    (True/False, None); a field typed int without a check must be a whole number >= 0."""
    config = methods.get(method).config
    checks = field_checks(config)
    for f in dataclasses.fields(config):
        if f.name not in options:
            continue
        value, check = options[f.name], checks.get(f.name)
        if check is None:
            if f.type in (int, "int") and (not _is_int(value) or value < 0):
                raise ValueError(f"{method} option {f.name} must be a whole number >= 0, got {value!r}")
            continue
        try:
            check_setting({"method": options}, f.name, check)
        except ConfigError as exc:
            raise _refusal(f"{method} option {f.name}", value, check, f.metadata.get("unit"), str(exc)) from None


def _refusal(what: str, value: Any, check: Check, unit: str | None, config_message: str) -> Exception:
    """The one line refusing `value` for the setting `what` by `check` (`unit`: what a number counts)."""
    if check.kind == "bool":
        return TypeError(f"{what} must be True or False, got {value!r}")
    if check.kind == "choice":
        return ValueError(f"{what} must be one of {', '.join(check.choices)}, got {value!r}")
    if check.kind not in ("int", "number"):
        return ValueError(f"{what}: {config_message}")
    rule = "a whole number" if check.kind == "int" else "a number"
    if check.minimum is not None:
        rule += f" {'>' if check.above else '>='} {check.minimum:g}"
    if check.maximum is not None:
        rule += f" and <= {check.maximum:g}"
    rule += f" ({unit})" if unit else ""
    rule += " or None" if check.optional else ""
    return ValueError(f"{what} must be {rule}, got {value!r}")


class _IterableStream:
    """An iterable as the runner's stream (`.batch(k)`, k = 0, 1, ... in order). After a resume
    the first micro-batches, already used before the checkpoint, are skipped."""

    def __init__(self, data: Iterable):
        self._iter: Iterator = iter(data)
        self.position = 0  # index of the next micro-batch the iterator yields

    def batch(self, k: int):
        if k < self.position:
            raise RuntimeError(f"micro-batch {k} was asked for after micro-batch {self.position - 1}")
        try:
            while self.position < k:  # resumed: skip what the checkpointed run used
                next(self._iter)
                self.position += 1
            item = next(self._iter)
        except StopIteration:
            raise RuntimeError(
                f"the data ran out at micro-batch {k}: give an endless iterable (e.g. itertools.cycle) or fewer steps"
            ) from None
        self.position += 1
        return item


def _to_device(batch: Any, device: torch.device) -> Any:
    """Host tensors of a micro-batch (a tensor, or dicts, lists and tuples of them) onto `device`,
    through pinned memory on a GPU as the suite's tasks do (acco.tasks.to_device)."""
    if isinstance(batch, torch.Tensor):
        return batch if batch.device == device else to_device(batch, device)
    if isinstance(batch, dict):
        return {k: _to_device(v, device) for k, v in batch.items()}
    if isinstance(batch, (list, tuple)):
        return type(batch)(_to_device(v, device) for v in batch)
    return batch


def _checked_loss(loss_fn: Callable, device: torch.device) -> Callable[[nn.Module, Any], torch.Tensor]:
    def loss_of(model: nn.Module, batch: Any) -> torch.Tensor:
        loss = loss_fn(model, _to_device(batch, device))
        if not isinstance(loss, torch.Tensor) or loss.ndim != 0:
            what = (
                type(loss).__name__ if not isinstance(loss, torch.Tensor) else f"a tensor of shape {tuple(loss.shape)}"
            )
            raise TypeError(f"loss_fn returned {what}: it must return the micro-batch's mean loss as a 0-dim tensor")
        return loss

    return loss_of


def _host_copy(obj: Any) -> Any:
    """A snapshot of a state: every tensor copied into host memory (the live ones keep training)."""
    if isinstance(obj, torch.Tensor):
        return obj.detach().to("cpu", copy=True)
    if isinstance(obj, dict):
        return {k: _host_copy(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_host_copy(v) for v in obj)
    return obj


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _check_arguments(
    model, loss_fn, data, method, steps, accum, deterministic, optimizer, precision, grad_dtype_name, process_group
) -> None:
    """TypeError/ValueError, one line naming the problem and the fix, before any collective."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if not any(p.requires_grad for p in model.parameters()):
        raise ValueError("the model has no trainable parameters: leave requires_grad=True on those to train")
    if not callable(loss_fn):
        raise TypeError(f"loss_fn must be callable as loss_fn(model, batch) -> loss, got {type(loss_fn).__name__}")
    if not (callable(getattr(data, "batch", None)) or isinstance(data, Iterable)):
        raise TypeError(
            f"data must be an iterable of micro-batches or have .batch(k) (k-th micro-batch), got {type(data).__name__}"
        )
    if not isinstance(method, str) or method not in methods.METHODS:  # the registry, with methods added
        raise ValueError(f"unknown method {method!r}: choose one of {', '.join(methods.METHODS)}")
    if not _is_int(steps) or steps < 1:
        raise ValueError(f"steps must be a whole number >= 1 (committed optimizer steps of the run), got {steps!r}")
    if not _is_int(accum) or accum < 1:
        raise ValueError(f"accum must be a whole number >= 1 (micro-batches per round per rank), got {accum!r}")
    if not isinstance(deterministic, bool):
        raise TypeError(f"deterministic must be True or False, got {deterministic!r}")
    if optimizer is not None and not isinstance(optimizer, dict):
        raise TypeError(
            f"optimizer must be a dict of AdamW settings, e.g. dict(lr=5e-4), got {type(optimizer).__name__}"
        )
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    if grad_dtype_name not in GRAD_DTYPES:
        raise ValueError(f"grad_dtype must be one of {', '.join(GRAD_DTYPES)}, got {grad_dtype_name!r}")
    if process_group is not None and not isinstance(process_group, dist.ProcessGroup):
        raise TypeError(
            f"process_group must be a torch.distributed.ProcessGroup or None, got {type(process_group).__name__}"
        )


def _merged(what: str, defaults: dict, given: dict | None, allowed: tuple[str, ...] | None = None) -> dict:
    """`defaults` updated with `given`; a key it does not know is refused, naming the known ones."""
    given = dict(given or {})
    known = allowed if allowed is not None else tuple(defaults)
    unknown = sorted(set(given) - set(known))
    if unknown:
        raise ValueError(f"unknown {what} option {unknown[0]!r}: the options are {', '.join(known) or 'none'}")
    return {**defaults, **given}


def _check_optimizer(opt: dict) -> None:
    lr, betas = opt["lr"], opt["betas"]
    if not isinstance(lr, (int, float)) or isinstance(lr, bool) or not lr > 0 or not math.isfinite(lr):
        raise ValueError(f"optimizer lr must be a number > 0, got {lr!r}")
    if not isinstance(betas, (list, tuple)) or len(betas) != 2 or not all(0.0 <= float(b) < 1.0 for b in betas):
        raise ValueError(f"optimizer betas must be two numbers in [0, 1), e.g. (0.9, 0.95), got {betas!r}")
    for key in ("eps", "weight_decay", "clip_norm", "warmup_steps", "min_lr_ratio"):
        if not isinstance(opt[key], (int, float)) or opt[key] < 0:
            raise ValueError(f"optimizer {key} must be a number >= 0, got {opt[key]!r}")
    if opt["schedule"] not in SCHEDULES:
        raise ValueError(f"optimizer schedule must be one of {', '.join(SCHEDULES)}, got {opt['schedule']!r}")


class Overlapped:
    """One rank's share of data-parallel training with one of the suite's methods.

    Arguments (all but the first three by keyword):
      model, loss_fn, data  see the module's docstring. The model may be on the host in fp32: its
                    parameters become views into the engine's flat buffer on `device` (stored in
                    the compute dtype), as in the suite.
      method        "acco" (default), "ddp" (DDP + ZeRO-1 on the flat engine), "dpu", "wp",
                    "diloco", "streaming_diloco" (README, the methods; docs/rounds.md), or a
                    method registered from outside acco (acco.methods.register; docs/methods.md).
      steps         committed optimizer steps of the run (the schedule's length, and the last step
                    computes nothing nobody would use).
      accum         micro-batches per round per rank (ACCO: per stage, so 2 x accum per step).
      deterministic True: exactly `accum` micro-batches per round (reproducible, equal to the
                    suite's deterministic runs). False (default): an overlapped round keeps computing
                    until its sync is done, so faster ranks contribute more (docs/rounds.md, adaptive).
      optimizer     AdamW and its schedule, over conf/config.yaml's optim defaults: lr, betas, eps,
                    weight_decay, decay_bias_and_norm, clip_norm, schedule (constant|cosine|linear),
                    warmup_steps, min_lr_ratio. For diloco/streaming_diloco it is the inner optimizer.
      precision     auto (bf16 on a GPU, fp32 on CPU) | bf16 | fp32; grad_dtype: auto | bf16 | fp32
                    (docs/rounds.md, Precision).
      process_group the ranks that train together (default: the default group, every process of
                    which then builds its Overlapped at the same point); the engine makes groups of
                    its own over those ranks for its communication thread (and, for the local
                    methods, a gloo group for the inner steps' counts), so the caller's collectives
                    and the engine's never interleave.
      device        where the model trains (default: the current CUDA device on an NCCL group, else
                    where the model's parameters are).
      broadcast_initial  False (default): the ranks' models must hold the same initial parameters,
                    a difference is refused with one ValueError line;
                    True: every rank starts from rank 0's, as DistributedDataParallel does.
      **method_options  the method's own settings, over conf/method/<method>.yaml (a method
                    defined outside acco: over its settings dataclass's defaults): impl (ddp: flat,
                    the default here, or torch: PyTorch's DistributedDataParallel +
                    ZeroRedundancyOptimizer, the paper's baseline), comm_hook (ddp impl torch),
                    overlap_backward and bucket_mb (ddp: the reduce-scatter bucket by bucket in the
                    last backward, buckets of bucket_mb MiB, None: DDP's defaults);
                    warmup_steps (dpu, wp); sync_every, fragments, overlap_steps, mixing, outer_lr,
                    outer_momentum (diloco, streaming_diloco); max_accum_factor (adaptive rounds' cap).

    deterministic=True on a GPU also turns on torch's deterministic algorithms for the process
    (torch.use_deterministic_algorithms, warn_only), as the suite's deterministic runs do.
    """

    def __init__(
        self,
        model: nn.Module,
        loss_fn: Callable[[nn.Module, Any], torch.Tensor],
        data: Any,
        *,
        method: str = "acco",
        steps: int,
        accum: int = 1,
        deterministic: bool = False,
        optimizer: dict | None = None,
        precision: str = "auto",
        grad_dtype: str = "auto",
        process_group: dist.ProcessGroup | None = None,
        device: torch.device | str | None = None,
        broadcast_initial: bool = False,
        **method_options: Any,
    ):
        if not isinstance(broadcast_initial, bool):
            raise TypeError(f"broadcast_initial must be True or False, got {broadcast_initial!r}")
        _check_arguments(
            model, loss_fn, data, method, steps, accum, deterministic, optimizer, precision, grad_dtype, process_group
        )
        opt = _merged("optimizer", optimizer_defaults(), optimizer, OPTIMIZER_KEYS + SCHEDULE_KEYS)
        _check_optimizer(opt)
        spec = methods.get(method)
        adaptive_keys = ("max_accum_factor",) if spec.backend == methods.FLAT else ()
        options = _merged(f"{method}", method_defaults(method), method_options, (*spec.settings, *adaptive_keys))
        max_accum_factor = options.pop("max_accum_factor", 64)
        unset = [key for key in spec.settings if key not in options]
        if unset:
            raise ValueError(f"{method} option {unset[0]} has no default: give it ({unset[0]}=...)")
        if spec.impls and options["impl"] not in spec.impl_names:
            raise ValueError(
                f"{method} option impl must be flat (the flat engine) or torch (PyTorch's DDP), got {options['impl']!r}"
            )
        _check_method_options(method, options)
        if not _is_int(max_accum_factor) or max_accum_factor < 1:
            raise ValueError(f"max_accum_factor must be a whole number >= 1, got {max_accum_factor!r}")
        if spec.local:
            problem = check_schedule(local_schedule(options))
            if problem:
                raise ValueError(f"{method}: {problem}")
        if not dist.is_available() or not dist.is_initialized():
            raise RuntimeError(
                "torch.distributed is not initialized: call torch.distributed.init_process_group() first "
                "(torchrun sets its environment; a single process: world_size=1)"
            )
        group = process_group if process_group is not None else dist.group.WORLD
        backend = dist.get_backend(group)
        if device is None:
            cuda = backend == "nccl" and torch.cuda.is_available()
            device = torch.device("cuda", torch.cuda.current_device()) if cuda else next(model.parameters()).device
        self.device = torch.device(device)
        self.method, self.steps, self.accum = method, steps, accum
        self.rank, self.world_size = dist.get_rank(group), dist.get_world_size(group)
        precision_cfg = {"precision": precision, "grad_dtype": grad_dtype}
        self.compute_dtype = dtypes.compute_dtype(precision_cfg, self.device)
        ranks = dist.get_process_group_ranks(group)
        # the communication thread's collectives on a group of their own (the trainer's way): on
        # NCCL with high-priority streams. Over a caller's group only its ranks take part in making
        # it (local synchronization): the other processes need not build an Overlapped
        local = process_group is not None
        comm_group = dist.new_group(ranks, pg_options=training_group_options(backend), use_local_synchronization=local)
        self._stream = data if callable(getattr(data, "batch", None)) else _IterableStream(data)
        task = Task(model=model, loss_fn=_checked_loss(loss_fn, self.device), train_stream=self._stream)
        lr_at = per_step(make_lr_schedule(opt["lr"], opt["schedule"], opt["warmup_steps"], steps, opt["min_lr_ratio"]))
        # the local methods agree on the inner steps' counts on the caller's thread, on a host group
        step_group = dist.new_group(ranks, backend="gloo", use_local_synchronization=local) if spec.local else None
        self.backend = build_backend(
            task,
            method,
            options,
            AdamWSettings.of(opt),
            rank=self.rank,
            world_size=self.world_size,
            device=self.device,
            accum=accum,
            lr_at=lr_at,
            compute_dtype=self.compute_dtype,
            grad_dtype=dtypes.grad_dtype(precision_cfg, self.device),
            deterministic=deterministic,
            max_accum_factor=max_accum_factor,
            tracer=TraceRecorder(self.rank, enabled=False),
            comm_group=comm_group,
            step_group=step_group,
            broadcast_initial=broadcast_initial,
            start_group=group,  # the caller's group, on the caller's thread
        )
        self.model = model
        self.step_count = 0  # committed steps taken
        self._closed = False

    # -- training -------------------------------------------------------------------------------------
    def step(self) -> SyncResult:
        """One committed optimizer step: the method's rounds, their micro-batches (taken from the
        data) and syncs. Returns the step's SyncResult: loss_mean (over every rank's micro-batches),
        micro_batches (global), lr, grad_norm (nan unless clipping), committed_step. After the
        run's last step the model holds the committed parameters θ_T."""
        if self._closed:
            raise RuntimeError("step() after close(): build a new Overlapped (load_state_dict to continue)")
        t = self.step_count
        if t >= self.steps:
            raise RuntimeError(f"all {self.steps} steps are done: build a new Overlapped with more steps to go on")
        if t == 0:
            self.model.train()  # as the suite's trainer: a from_pretrained model comes in eval mode
        results: list[SyncResult] = []
        self.backend.run(StopRule(lambda s: s > t, self.steps), lambda _t, res: results.append(res), t)
        (result,) = results
        self.step_count = t + 1
        bad_grad, _votes = self.backend.take_agreed()
        if bad_grad or not math.isfinite(result.loss_mean):
            what = "gradient" if bad_grad else "training loss"
            raise FloatingPointError(f"non-finite {what} at step {t + 1} (loss {result.loss_mean})")
        if self.step_count == self.steps:  # every method's model holds θ_T (the local ones: φ)
            self.backend.load_committed_into_model()
        return result

    @contextmanager
    def committed_parameters(self):
        """For the block, the model holds the committed parameters θ_t (the local methods: φ), in
        the compute dtype, for an evaluation (run it under torch.autocast in that dtype, as the
        suite does). Collective on the flat methods: every rank enters it at the same step."""
        with self.backend.committed_parameters():
            yield self.model

    def committed_vector(self) -> torch.Tensor:
        """θ_t as an fp32 host vector of the trainable parameters, in named_parameters() order
        (the suite's final_params.pt). Collective on the flat methods."""
        return self.backend.committed_vector()

    # -- checkpoints ------------------------------------------------------------------------------------
    def state_dict(self) -> dict:
        """This rank's training state between two steps, copied into host memory: the parameters,
        its optimizer shard, the gradients carried into the next step (dpu/wp/acco), its data
        position and the RNG states. Save each rank's (torch.save(state, f"ckpt.rank{rank}.pt"))."""
        shared, own = self.backend.state_dicts()
        return _host_copy(
            {
                "version": STATE_VERSION,
                "method": self.method,
                "world_size": self.world_size,
                "rank": self.rank,
                "step": self.step_count,
                "shared": shared,
                "own": own,
                "rng": rng_state(),
            }
        )

    def load_state_dict(self, state: dict) -> None:
        """Continue from this rank's state_dict() (a fresh Overlapped over the same model
        architecture, settings and data order; an iterable's first micro-batches are skipped)."""
        for key, want in (("method", self.method), ("world_size", self.world_size), ("rank", self.rank)):
            if state.get(key) != want:
                raise ValueError(
                    f"the checkpoint's {key} is {state.get(key)!r}, this run's {want!r}: load the state_dict "
                    f"saved by the same rank of a {self.method} run of {self.world_size} ranks"
                )
        if state.get("version") != STATE_VERSION or not 0 <= int(state["step"]) < self.steps:
            raise ValueError(
                f"the checkpoint (version {state.get('version')}, step {state.get('step')}) cannot continue "
                f"this run of {self.steps} steps: give steps beyond the checkpoint's"
            )
        self.backend.load_state_dicts(state["shared"], state["own"])
        set_rng_state(state["rng"])
        self.step_count = int(state["step"])

    # -- the end ----------------------------------------------------------------------------------------
    def close(self) -> None:
        """Stop the communication thread and drop the engine's references to its process groups.
        The model keeps its parameters (views into the engine's buffer)."""
        if self._closed:
            return
        self._closed = True
        self.backend.close()
        self.backend.release()

    def __enter__(self) -> Overlapped:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
