"""Instruction-following accuracy: greedy answers to Alpaca-prompted records, checked by
``acco.data.generated_instructions.check_answer`` (records of the embedded instruction corpus)."""

from __future__ import annotations

import torch

from ..data.alpaca import format_alpaca
from ..data.generated_instructions import check_answer
from ._model import evaluating, max_positions

__all__ = ["greedy_generate", "instruction_accuracy"]


def _cache_of(out) -> dict:
    # transformers 5 returns (and takes) ``cache``; older versions ``past_key_values``
    if getattr(out, "cache", None) is not None:
        return {"cache": out.cache}
    return {"past_key_values": out.past_key_values}


def greedy_generate(model, prompt_ids: list[int], max_new_tokens: int, eos_id: int | None, device) -> list[int]:
    """The greedy continuation of ``prompt_ids`` (stops at EOS, not included), with the KV cache.

    Call under ``torch.no_grad()`` / eval mode (``instruction_accuracy`` does)."""
    limit = max_positions(model)
    new: list[int] = []
    out = model(input_ids=torch.tensor([prompt_ids], dtype=torch.long, device=device), use_cache=True)
    for _ in range(max_new_tokens):
        nxt = int(out.logits[0, -1].argmax())
        if eos_id is not None and nxt == eos_id:
            break
        new.append(nxt)
        if len(new) == max_new_tokens or (limit is not None and len(prompt_ids) + len(new) >= limit):
            break
        out = model(input_ids=torch.tensor([[nxt]], dtype=torch.long, device=device), use_cache=True, **_cache_of(out))
    return new


def instruction_accuracy(model, tokenizer, examples: list[dict], device, max_new_tokens: int = 16) -> float:
    """Fraction of ``examples`` whose greedy response (at most ``max_new_tokens``) ``check_answer``
    accepts. The prompt is ``format_alpaca(example)[0]`` tokenized as for fine-tuning (the
    tokenizer's own special tokens); a prompt too long for the model keeps its last tokens."""
    if not examples:
        raise ValueError("no examples to score")
    limit = max_positions(model)
    correct = 0
    with evaluating(model):
        for example in examples:
            prompt, _ = format_alpaca(example)
            ids = list(tokenizer(prompt, verbose=False)["input_ids"])
            if limit is not None:
                ids = ids[-max(1, limit - max_new_tokens) :]
            new = greedy_generate(model, ids, max_new_tokens, tokenizer.eos_token_id, device)
            correct += bool(check_answer(example, tokenizer.decode(new, skip_special_tokens=True)))
    return correct / len(examples)
