"""Perplexity over packed constant-length blocks (e.g. the OpenWebText validation blocks)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ._model import evaluating
from .sharded import ShardedEvaluation, Sums

__all__ = ["block_nll_sums", "block_perplexity", "heldout_evaluation", "perplexity_from_sums"]


def _check_blocks(blocks: torch.Tensor) -> None:
    if blocks.dim() != 2 or blocks.shape[1] < 2:
        raise ValueError(f"blocks must be a [n, seq_len >= 2] tensor, got shape {tuple(blocks.shape)}")


def block_nll_sums(model, blocks: torch.Tensor, device, batch_size: int = 8, rows: range | None = None) -> Sums:
    """``{"nll_sum", "tokens"}`` over every predicted position of every block (``seq_len - 1`` per
    block, as the model's own ``loss`` with ``labels=input_ids`` counts them), or of the blocks
    ``rows`` only (read batch by batch: a share of a memory-mapped validation set is never copied
    whole); the per-token NLLs are added in float64, so the sums of disjoint sets of blocks add up
    to the whole's. No blocks: zeros (a rank whose share is empty)."""
    _check_blocks(blocks)
    rows = range(blocks.shape[0]) if rows is None else rows
    total, tokens = 0.0, 0
    with evaluating(model):
        for start in range(0, len(rows), batch_size):
            chunk = rows[start : start + batch_size]
            ids = blocks[torch.arange(chunk.start, chunk.stop, chunk.step)].to(device=device, dtype=torch.long)
            logits = model(input_ids=ids).logits
            nll = F.cross_entropy(
                logits[:, :-1].reshape(-1, logits.shape[-1]).float(), ids[:, 1:].reshape(-1), reduction="none"
            )
            total += float(nll.double().sum())
            tokens += ids[:, 1:].numel()
    return {"nll_sum": total, "tokens": float(tokens)}


def perplexity_from_sums(sums: Sums) -> dict:
    """``{"loss", "perplexity", "tokens"}``: the mean NLL per predicted token and its exponential."""
    tokens = int(round(sums["tokens"]))
    if tokens == 0:
        raise ValueError("no blocks to compute a perplexity on")
    loss = sums["nll_sum"] / tokens
    return {"loss": loss, "perplexity": math.exp(loss), "tokens": tokens}


def block_perplexity(model, blocks: torch.Tensor, device, batch_size: int = 8) -> dict:
    """``{"loss", "perplexity", "tokens"}`` of ``model`` on ``blocks`` (``[n >= 1, seq_len >= 2]``)."""
    _check_blocks(blocks)
    if blocks.shape[0] == 0:
        raise ValueError(f"blocks must be a non-empty [n, seq_len >= 2] tensor, got shape {tuple(blocks.shape)}")
    return perplexity_from_sums(block_nll_sums(model, blocks, device, batch_size))


def heldout_evaluation(blocks: torch.Tensor, device, batch_size: int = 8) -> ShardedEvaluation:
    """``block_perplexity`` on ``blocks``, shareable: shard r of N scores blocks r, r + N, ..."""

    def partial(model, shard: int, num_shards: int) -> Sums:
        return block_nll_sums(model, blocks, device, batch_size, rows=range(shard, blocks.shape[0], num_shards))

    return ShardedEvaluation(partial, perplexity_from_sums)
