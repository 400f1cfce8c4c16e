"""What the ranks do together after the last committed step, on a process group of its own whose
timeout (dist.final_timeout_s, hours by default) bounds waits for work that grows with the model
and the evaluation sets, not with one training step: the sharded final evaluation (each rank
scores its share, one all-reduce of float64 sums) and, in the harness's worker, rank 0's saves and the
gather of every rank's figures."""

from __future__ import annotations

import sys
import time
import traceback
from datetime import timedelta

import torch
import torch.distributed as dist
from omegaconf import DictConfig

DEFAULT_FINAL_TIMEOUT_S = 6 * 3600.0


class FinalEvaluationError(RuntimeError):
    """A share of the final evaluation failed on some rank; str(): every failed rank's one line."""


def post_training_group(cfg: DictConfig, world_size: int):
    """A gloo group over every rank (host scalars and pickled objects, so on GPU too) with the
    long timeout. Call on every rank, at start-up (new_group is itself a collective)."""
    timeout_s = float(cfg.dist.final_timeout_s or DEFAULT_FINAL_TIMEOUT_S)
    return dist.new_group(list(range(world_size)), timeout=timedelta(seconds=timeout_s), backend="gloo")


def all_reduce_sums(sums: dict[str, float], group) -> dict[str, float]:
    """Every rank's sums added, key by key, in float64 (every rank passes the same keys)."""
    keys = sorted(sums)
    vec = torch.tensor([float(sums[k]) for k in keys], dtype=torch.float64)
    dist.all_reduce(vec, op=dist.ReduceOp.SUM, group=group)
    return dict(zip(keys, vec.tolist()))


def final_evaluation(cfg: DictConfig, final_eval, model, rank: int, world_size: int, group) -> dict | None:
    """The task's final evaluation at the committed parameters (in `model` on every rank).
    A ShardedEvaluation (has `partial`): rank r scores its share, the sums are all-reduced, every
    rank returns the results, or every rank raises FinalEvaluationError when any rank's share
    failed. A plain callable: rank 0 runs it alone (its peers wait for it at the
    next post-training collective, under the same long timeout) and only rank 0 gets results."""
    sleep_s = cfg.fault.final_eval_sleep_s or 0.0
    if sleep_s and rank == cfg.fault.final_eval_sleep_rank:
        # fault injection (tests): an evaluation longer than dist.timeout_s
        print(
            f"acco: rank {rank}: final evaluation slowed by {sleep_s:g} s (fault.final_eval_sleep_s)",
            file=sys.stderr,
            flush=True,
        )
        time.sleep(sleep_s)
    if not hasattr(final_eval, "partial"):
        return final_eval(model) if rank == 0 else None
    try:
        sums, problem = final_eval.partial(model, rank, world_size), None
    except Exception as exc:  # noqa: BLE001 - reported to every rank below, then raised on each
        traceback.print_exc()
        sums, problem = None, f"{type(exc).__name__}: {' '.join(str(exc).split())}"
    # every rank learns whether every share was scored before any waits for the sums: a rank whose
    # share failed would otherwise leave its peers waiting in the all-reduce for hours
    problems: list = [None] * world_size
    dist.all_gather_object(problems, problem, group=group)
    failed = [f"rank {r}: {p}" for r, p in enumerate(problems) if p is not None]
    if failed:
        raise FinalEvaluationError("; ".join(failed))
    return final_eval.finish(all_reduce_sums(sums, group))
