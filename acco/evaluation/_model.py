"""Helpers shared by the evaluators: eval mode for the duration of a call, the context window."""

from __future__ import annotations

from contextlib import contextmanager

import torch


@contextmanager
def evaluating(model: torch.nn.Module):
    """``model.eval()`` and ``torch.no_grad()`` for the block, restoring the training flag after."""
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            yield
    finally:
        model.train(was_training)


def max_positions(model) -> int | None:
    """The longest input the model accepts (``max_position_embeddings`` / ``n_positions``)."""
    cfg = getattr(model, "config", None)
    for name in ("max_position_embeddings", "n_positions"):
        value = getattr(cfg, name, None)
        if isinstance(value, int) and value > 0:
            return value
    return None
