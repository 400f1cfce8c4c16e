"""Instruction fine-tuning (the paper's Alpaca experiment): a pretrained causal LM, Alpaca's prompt
template, micro-batches padded to their longest example, loss on the response tokens only."""

from __future__ import annotations

import torch
from omegaconf import DictConfig

from ..config.plain import plain
from ..data.alpaca import InstructBatchStream, prepare_instruction_data
from ..data.generated_corpora import generated_source
from ..data.tokenizer import load_tokenizer
from ..models import build_causal_lm
from . import Task, to_device


def instruct_loss(device: torch.device):
    def loss_fn(model, batch: dict) -> torch.Tensor:
        batch = {k: to_device(v, device) for k, v in batch.items()}
        return model(**batch).loss

    return loss_fn


def tokenizer_spec(data_cfg: DictConfig, model_cfg: DictConfig):
    spec = plain(data_cfg.tokenizer)
    if spec.get("kind") == "from_model":  # the tokenizer saved beside the pretrained model
        path = model_cfg.pretrained_path
        if not path:
            raise ValueError("data.tokenizer.kind=from_model needs model.pretrained_path")
        return load_tokenizer(path)
    return spec


def prepare_finetune_data(cfg: DictConfig):
    """The tokenized instruction data a run of `cfg` reads (built once into the data cache)."""
    data_cfg = cfg.data
    source = generated_source(plain(data_cfg.source), data_cfg.seed, data_cfg.cache_dir)
    return prepare_instruction_data(
        source,
        tokenizer_spec(data_cfg, cfg.model),
        data_cfg.max_len,
        data_cfg.val_fraction,
        data_cfg.seed,
        data_cfg.cache_dir,
        data_cfg.response_only_loss,
    )


def build_finetune_task(cfg: DictConfig, rank: int, world_size: int, device: torch.device) -> Task:
    data = prepare_finetune_data(cfg)
    model = build_causal_lm(
        cfg.model, vocab_size=data.vocab_size, eos_id=data.eos_id, seed=cfg.seed
    )  # on the host: the trainer moves it (acco.engine.flat)
    mbs = cfg.data.micro_batch_size
    stream = InstructBatchStream(data.train, rank, world_size, mbs, seed=cfg.seed)
    val_batches = []
    if cfg.train.eval_batches and len(data.val) >= world_size * mbs:
        val_stream = InstructBatchStream(data.val, rank, world_size, mbs, seed=cfg.seed)
        # the whole validation split, sharded over the ranks (Fig. 8's validation loss)
        val_batches = [val_stream.batch(k) for k in range(val_stream.batches_per_epoch)]
    tokenizer = load_tokenizer(data.tokenizer_path)
    return Task(
        model=model,
        loss_fn=instruct_loss(device),
        train_stream=stream,
        val_batches=val_batches,
        samples_per_micro_batch=mbs,
        tokens_per_sample=0,
        tokenizer=tokenizer,
    )
