"""Tasks: what a worker trains (a model, a loss, its micro-batch stream, validation batches).

A task factory is named in the config as `module:function` and called as
`factory(cfg, rank, world_size, device) -> Task`, `cfg` the run's typed view
(acco.config.schema.typed; a task of one's own reads its own section from it, untyped); tests plug
in gradient oracles this way."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from omegaconf import DictConfig


@dataclass
class Task:
    model: torch.nn.Module  # may stay on the host (fp32): the trainer moves it to the device
    loss_fn: Callable[[torch.nn.Module, Any], torch.Tensor]  # mean loss of one micro-batch
    train_stream: Any  # .batch(k): this rank's k-th micro-batch
    val_batches: list = field(default_factory=list)  # this rank's validation micro-batches
    samples_per_micro_batch: int = 1
    tokens_per_sample: int = 0
    on_finish: Callable[[str], None] | None = None  # called by every rank with out_dir at the end
    tokenizer: Any = None  # saved beside the model (save_model)
    # at the committed parameters: an acco.evaluation.ShardedEvaluation (every rank scores its share)
    # or a plain callable (rank 0 alone)
    final_eval: Callable[[torch.nn.Module], dict] | None = None


def to_device(batch: torch.Tensor, device: torch.device) -> torch.Tensor:
    """A host micro-batch onto the device: through pinned memory on a GPU, so the copy is
    asynchronous (from pageable memory `non_blocking` would still wait)."""
    if device.type == "cuda":
        batch = batch.pin_memory()
    return batch.to(device, non_blocking=True)


def load_task_factory(path: str) -> Callable[..., Task]:
    module, _, name = path.partition(":")
    if not module or not name:
        raise ValueError(f"task must look like 'package.module:function', got {path!r}")
    return getattr(importlib.import_module(module), name)


def prepare_task_data(cfg: DictConfig) -> dict:
    """Build (or find) the data cache a run of `cfg` reads, with no model and no process group:
    what experiments/prepare_data.py runs on a CPU node before a paper-scale job is submitted, so
    the GPUs do not wait for a corpus to be tokenized. Returns what was found or built."""
    if cfg.data.kind == "instruct":
        from .finetune import prepare_finetune_data

        data = prepare_finetune_data(cfg)
        return {
            "kind": "instruct",
            "train_examples": len(data.train),
            "val_examples": len(data.val),
            "tokenizer": data.tokenizer_path,
        }
    from .lm import prepare_lm_data

    data = prepare_lm_data(cfg.data)
    seq_len = cfg.data.seq_len
    return {
        "kind": "pretrain",
        "train_blocks": len(data.train_blocks),
        "val_blocks": len(data.val_blocks),
        "train_tokens": len(data.train_blocks) * seq_len,
        "tokenizer": data.tokenizer_path,
    }


def build_task(cfg: DictConfig, rank: int, world_size: int, device: torch.device) -> Task:
    """The task the data config asks for: packed pretraining or instruction fine-tuning."""
    if cfg.data.kind == "instruct":
        from .finetune import build_finetune_task

        return build_finetune_task(cfg, rank, world_size, device)
    from .lm import build_lm_task

    return build_lm_task(cfg, rank, world_size, device)
