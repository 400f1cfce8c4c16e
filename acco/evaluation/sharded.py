"""Evaluations that ranks can share. Each rank scores its part of the examples (part ``shard`` of
``num_shards``: items shard, shard + num_shards, ...) into sums (log-likelihoods, counts), adding
every part's sums gives what one process scoring everything would (to round-off: the sums are
float64), and ``finish`` turns the sums into the reported figures.

No torch.distributed here: the caller adds the parts' sums (post-training: one all-reduce;
a single process calls the evaluation itself)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

Sums = dict[str, float]


@dataclass(frozen=True)
class ShardedEvaluation:
    partial: Callable[[torch.nn.Module, int, int], Sums]  # (model, shard, num_shards) -> sums
    finish: Callable[[Sums], dict]  # every shard's sums added -> results

    def __call__(self, model: torch.nn.Module) -> dict:
        """The whole evaluation in this process."""
        return self.finish(self.partial(model, 0, 1))


def evaluation_suite(parts: dict[str, ShardedEvaluation]) -> ShardedEvaluation:
    """Several evaluations as one: their sums side by side as ``"<name>.<key>"``, their results
    as ``{name: results}``."""

    def partial(model, shard: int, num_shards: int) -> Sums:
        out: Sums = {}
        for name, part in parts.items():
            out.update({f"{name}.{key}": value for key, value in part.partial(model, shard, num_shards).items()})
        return out

    def finish(sums: Sums) -> dict:
        return {
            name: part.finish(
                {key[len(name) + 1 :]: value for key, value in sums.items() if key.startswith(name + ".")}
            )
            for name, part in parts.items()
        }

    return ShardedEvaluation(partial, finish)
