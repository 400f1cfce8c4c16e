"""LAMBADA, as lm-eval-harness's ``lambada_openai`` task scores it.

An example's target is the last word of the passage with the space before it (``" word"``), the
context is everything before that space. Context and target are tokenized as the harness does
(``whole = enc(context + target)``, ``context_ids = enc(context)``, ``target_ids =
whole[len(context_ids):]``, no special tokens; trailing spaces of the context move to the target;
an empty context becomes the EOS/BOS prefix token), the input is the last ``max_positions + 1``
tokens of ``context_ids + target_ids`` minus the final one.

* ``perplexity`` = exp(−mean over examples of Σ log p(target tokens | context));
* ``accuracy`` = fraction of examples where the greedy (argmax) prediction of every target token
  is the target token.
"""

from __future__ import annotations

import math

import torch

from ._model import evaluating, max_positions
from .sharded import ShardedEvaluation, Sums

__all__ = [
    "encode_pair",
    "lambada_evaluation",
    "lambada_examples",
    "lambada_from_sums",
    "lambada_scores",
    "lambada_sums",
]


def lambada_examples(dataset, text_field: str = "text") -> list[tuple[str, str]]:
    """``[(context, " last_word"), ...]`` of LAMBADA-schema records (a ``datasets.Dataset``, a list
    of dicts or a list of strings)."""
    if hasattr(dataset, "column_names"):
        if text_field not in dataset.column_names:
            raise ValueError(f"no field {text_field!r} in the data (columns: {', '.join(dataset.column_names)})")
        texts = dataset[text_field]
    else:
        texts = [row if isinstance(row, str) else row[text_field] for row in dataset]
    out = []
    for i, text in enumerate(texts):
        if " " not in text:
            raise ValueError(f"LAMBADA example {i} has no space to split off a last word: {text[:60]!r}")
        context, word = text.rsplit(" ", 1)
        out.append((context, " " + word))
    return out


def _prefix_id(tokenizer) -> int:
    for tid in (tokenizer.bos_token_id, tokenizer.eos_token_id):
        if tid is not None:
            return int(tid)
    raise ValueError("the tokenizer has neither BOS nor EOS to stand for an empty context")


def encode_pair(tokenizer, context: str, target: str) -> tuple[list[int], list[int]]:
    """``(context_ids, target_ids)`` as lm-eval-harness encodes a loglikelihood request."""
    if context == "":
        return [_prefix_id(tokenizer)], tokenizer(target, add_special_tokens=False)["input_ids"]
    n_spaces = len(context) - len(context.rstrip())
    if n_spaces:
        target, context = context[-n_spaces:] + target, context[:-n_spaces]
    whole = tokenizer(context + target, add_special_tokens=False, verbose=False)["input_ids"]
    ctx = tokenizer(context, add_special_tokens=False, verbose=False)["input_ids"]
    return list(ctx), list(whole[len(ctx) :])


def lambada_sums(model, tokenizer, examples: list[tuple[str, str]], device, batch_size: int = 8) -> Sums:
    """``{"loglik_sum", "correct", "examples"}`` of ``model`` on ``(context, target)`` pairs: the
    summed target log-likelihoods (float64, ``math.fsum``), the examples whose every target token
    is the greedy prediction, the examples. No examples: zeros (a rank whose share is empty)."""
    limit = max_positions(model)
    requests = []
    for context, target in examples:
        ctx, cont = encode_pair(tokenizer, context, target)
        if not cont:
            raise ValueError(f"empty target for the context ending {context[-40:]!r}")
        full = ctx + cont
        if limit is not None:
            full = full[-(limit + 1) :]
        requests.append((full[:-1], cont))
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else _prefix_id(tokenizer)
    order = sorted(range(len(requests)), key=lambda i: -len(requests[i][0]))  # similar lengths together
    loglik = [0.0] * len(requests)
    greedy = [False] * len(requests)
    with evaluating(model):
        for start in range(0, len(order), batch_size):
            chunk = order[start : start + batch_size]
            width = max(len(requests[i][0]) for i in chunk)
            ids = torch.full((len(chunk), width), pad, dtype=torch.long)
            mask = torch.zeros((len(chunk), width), dtype=torch.long)
            for row, i in enumerate(chunk):
                inp = requests[i][0]
                ids[row, : len(inp)] = torch.tensor(inp, dtype=torch.long)
                mask[row, : len(inp)] = 1
            logits = model(input_ids=ids.to(device), attention_mask=mask.to(device)).logits
            for row, i in enumerate(chunk):
                inp, cont = requests[i]
                n, m = len(inp), len(cont)
                logp = torch.log_softmax(logits[row, n - m : n].float(), dim=-1)
                cont_ids = torch.tensor(cont, dtype=torch.long, device=logp.device)
                loglik[i] = float(logp.gather(1, cont_ids[:, None]).double().sum())
                greedy[i] = bool((logp.argmax(-1) == cont_ids).all())
    return {"loglik_sum": math.fsum(loglik), "correct": float(sum(greedy)), "examples": float(len(requests))}


def lambada_from_sums(sums: Sums) -> dict:
    """``{"perplexity", "accuracy", "examples"}`` from (every shard's) ``lambada_sums`` added."""
    n = int(round(sums["examples"]))
    if n == 0:
        raise ValueError("no LAMBADA examples to score")
    return {"perplexity": math.exp(-sums["loglik_sum"] / n), "accuracy": sums["correct"] / n, "examples": n}


def lambada_scores(model, tokenizer, examples: list[tuple[str, str]], device, batch_size: int = 8) -> dict:
    """``{"perplexity", "accuracy", "examples"}`` of ``model`` on ``(context, target)`` pairs."""
    if not examples:
        raise ValueError("no LAMBADA examples to score")
    return lambada_from_sums(lambada_sums(model, tokenizer, examples, device, batch_size))


def lambada_evaluation(tokenizer, examples: list[tuple[str, str]], device, batch_size: int = 8) -> ShardedEvaluation:
    """``lambada_scores``, shareable: shard r of N scores examples r, r + N, ... of ``examples``.
    The examples are loaded by the caller when the evaluation is built (before training: a run
    must not reach its end to find its evaluation data missing)."""
    if not examples:
        raise ValueError("no LAMBADA examples to score")

    def partial(model, shard: int, num_shards: int) -> Sums:
        return lambada_sums(model, tokenizer, examples[shard::num_shards], device, batch_size)

    return ShardedEvaluation(partial, lambada_from_sums)
