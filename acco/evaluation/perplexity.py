"""Perplexity over packed constant-length blocks (e.g. the OpenWebText validation blocks)."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ._model import evaluating

__all__ = ["block_perplexity"]


def block_perplexity(model, blocks: torch.Tensor, device, batch_size: int = 8) -> dict:
    """``{"loss", "perplexity", "tokens"}``: the mean next-token NLL over every predicted position
    of every block (``seq_len - 1`` per block, as the model's own ``loss`` with ``labels=input_ids``
    counts them), accumulated in float64, and its exponential."""
    if blocks.dim() != 2 or blocks.shape[0] == 0 or blocks.shape[1] < 2:
        raise ValueError(f"blocks must be a non-empty [n, seq_len >= 2] tensor, got shape {tuple(blocks.shape)}")
    total, tokens = 0.0, 0
    with evaluating(model):
        for start in range(0, blocks.shape[0], batch_size):
            ids = blocks[start:start + batch_size].to(device=device, dtype=torch.long)
            logits = model(input_ids=ids).logits
            nll = F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]).float(),
                                  ids[:, 1:].reshape(-1), reduction="sum")
            total += float(nll.double())
            tokens += ids[:, 1:].numel()
    loss = total / tokens
    return {"loss": loss, "perplexity": math.exp(loss), "tokens": tokens}
