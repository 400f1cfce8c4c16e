"""Causal language modelling on packed constant-length blocks (the paper's pretraining setup):
TinyStories / OpenWebText through `datasets`, or the embedded story corpus at the CPU scale."""

from __future__ import annotations

import os

import torch
from omegaconf import DictConfig

from ..config.plain import plain
from ..data import RankBatchStream, prepare_story_data
from ..data.cache import quiet_datasets
from ..data.generated_corpora import generated_source
from ..data.prepare_pretraining import SOURCE_KEYS, prepare_pretraining_data
from ..data.sources import load_raw_dataset
from ..data.tokenizer import load_tokenizer
from ..models import build_causal_lm
from . import Task, to_device


def causal_lm_loss(device: torch.device):
    def loss_fn(model, batch: torch.Tensor) -> torch.Tensor:
        ids = to_device(batch, device)
        return model(input_ids=ids, labels=ids).loss

    return loss_fn


def prepare_lm_data(data_cfg: DictConfig):
    """The packed blocks of a pretraining data section (acco.data keeps to plain data: its cache
    keys hash the source and tokenizer specs)."""
    source, tokenizer = plain(data_cfg.source), plain(data_cfg.tokenizer)
    if source.get("generator") == "stories":
        return prepare_story_data(
            cache_dir=data_cfg.cache_dir,
            num_stories=source["num_stories"],
            seed=data_cfg.seed,
            vocab_size=tokenizer["vocab_size"],
            seq_len=data_cfg.seq_len,
            val_fraction=data_cfg.val_fraction,
            num_proc=data_cfg.num_proc,
        )
    return prepare_pretraining_data(
        {k: source[k] for k in SOURCE_KEYS if source.get(k) is not None},
        tokenizer,
        data_cfg.seq_len,
        data_cfg.val_fraction,
        data_cfg.seed,
        data_cfg.cache_dir,
        num_proc=data_cfg.num_proc,
    )


def lambada_test_examples(cfg: DictConfig) -> list[tuple[str, str]]:
    """The `(context, " word")` pairs of the run's LAMBADA source (final_eval.lambada_source: the
    hub's or a local copy, or generated passages in its schema at the CPU scale)."""
    from ..evaluation import lambada_examples

    src = generated_source(plain(cfg.final_eval.lambada_source), cfg.data.seed, cfg.data.cache_dir)
    with quiet_datasets():
        ds = load_raw_dataset(
            src.get("hub_id"),
            src.get("path"),
            src.get("split"),
            config_name=src.get("config_name"),
            cache_dir=os.path.join(cfg.data.cache_dir, "hf"),
            config_key="final_eval.lambada_source.path",
        )
    return lambada_examples(ds)


def lambada_final_eval(cfg: DictConfig, tokenizer, val_blocks, device):
    """Table 2's evaluations: LAMBADA (whole test set) and the held-out validation blocks, as one
    ShardedEvaluation (the ranks share it; called with a model, one process does all of it).
    Everything they read is loaded here, when the task is built: a LAMBADA that cannot be read
    stops the run before its first step, not after its last."""
    from ..evaluation import evaluation_suite, heldout_evaluation, lambada_evaluation

    spec = cfg.final_eval
    if not (spec.lambada or spec.heldout):
        return None
    parts = {}
    if spec.heldout and len(val_blocks):
        parts["heldout"] = heldout_evaluation(val_blocks, device)
    if spec.lambada:
        parts["lambada"] = lambada_evaluation(tokenizer, lambada_test_examples(cfg), device)
    return evaluation_suite(parts)


def build_lm_task(cfg: DictConfig, rank: int, world_size: int, device: torch.device) -> Task:
    data_cfg = cfg.data
    data = prepare_lm_data(data_cfg)
    tokenizer = load_tokenizer(data.tokenizer_path)
    model = build_causal_lm(
        cfg.model, vocab_size=data.vocab_size, eos_id=data.eos_id, seed=cfg.seed
    )  # on the host: the trainer moves it (acco.engine.flat)
    mbs = data_cfg.micro_batch_size
    stream = RankBatchStream(data.train_blocks, rank, world_size, mbs, seed=cfg.seed)
    val_batches = []
    if cfg.train.eval_batches and len(data.val_blocks) >= world_size * mbs:
        val_stream = RankBatchStream(data.val_blocks, rank, world_size, mbs, seed=cfg.seed)
        val_batches = [val_stream.batch(k) for k in range(cfg.train.eval_batches)]
    return Task(
        model=model,
        loss_fn=causal_lm_loss(device),
        train_stream=stream,
        val_batches=val_batches,
        samples_per_micro_batch=mbs,
        tokens_per_sample=data_cfg.seq_len,
        tokenizer=tokenizer,
        final_eval=lambada_final_eval(cfg, tokenizer, data.val_blocks, device),
    )
