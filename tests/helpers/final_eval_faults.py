"""A test task: the LM task whose final evaluation fails on one rank (top-level config key
`fail_final_eval_rank`), as a LAMBADA unreachable at the end of a run once made it fail."""

from __future__ import annotations

import dataclasses

from acco.evaluation import ShardedEvaluation
from acco.tasks import Task
from acco.tasks.lm import build_lm_task


def lm_task_failing_final_eval(cfg, rank: int, world_size: int, device) -> Task:
    task = build_lm_task(cfg, rank, world_size, device)
    inner = task.final_eval
    failing = int(cfg.get("fail_final_eval_rank", 0))

    def partial(model, shard: int, num_shards: int):
        if shard == failing:
            raise OSError("the evaluation data went away (test fault)")
        return inner.partial(model, shard, num_shards)

    return dataclasses.replace(task, final_eval=ShardedEvaluation(partial, inner.finish))
