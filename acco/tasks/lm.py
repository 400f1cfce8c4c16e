"""Causal language modelling on packed constant-length blocks (the paper's pretraining setup),
on the embedded story corpus at the CPU scale."""
from __future__ import annotations

import torch

from ..data import RankBatchStream, prepare_story_data
from ..models import build_causal_lm
from . import Task


def causal_lm_loss(device: torch.device):
    def loss_fn(model, batch: torch.Tensor) -> torch.Tensor:
        ids = batch.to(device, non_blocking=True)
        return model(input_ids=ids, labels=ids).loss
    return loss_fn


def build_lm_task(cfg: dict, rank: int, world_size: int, device: torch.device) -> Task:
    data_cfg, model_cfg = cfg["data"], cfg["model"]
    source = data_cfg["source"]
    data = prepare_story_data(
        cache_dir=data_cfg["cache_dir"], num_stories=source["num_stories"], seed=data_cfg["seed"],
        vocab_size=data_cfg["tokenizer"]["vocab_size"], seq_len=data_cfg["seq_len"],
        val_fraction=data_cfg["val_fraction"])
    model = build_causal_lm(model_cfg, vocab_size=data.vocab_size, eos_id=data.eos_id,
                            seed=cfg["seed"]).to(device)
    mbs = data_cfg["micro_batch_size"]
    stream = RankBatchStream(data.train_blocks, rank, world_size, mbs, seed=cfg["seed"])
    val_stream = RankBatchStream(data.val_blocks, rank, world_size, mbs, seed=cfg["seed"])
    val_batches = [val_stream.batch(k) for k in range(cfg["train"]["eval_batches"])]
    return Task(model=model, loss_fn=causal_lm_loss(device), train_stream=stream,
                val_batches=val_batches, samples_per_micro_batch=mbs,
                tokens_per_sample=data_cfg["seq_len"])
