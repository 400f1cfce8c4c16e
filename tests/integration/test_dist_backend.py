"""dist.backend: auto (NCCL on CUDA, gloo on CPU), nccl, or gloo — on CUDA the training collectives
then run on host copies (acco/engine/collectives.py) and ranks may share a GPU, which is how make
gpu-check runs the world-2 reduce-scatter and all-gather on a machine with one GPU.

Here the tests that start processes (marked integration); the in-process ones are in
tests/unit/test_dist_backend.py."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from acco.engine import collectives


def _staged_worker(rank: int, world: int, port: int, results) -> None:
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    staged = []
    # CUDA tensors take this path; on CPU the same arithmetic on host "copies" (the tensors themselves)
    collectives._host_staged = lambda group, *tensors: staged.append(1) or True
    shard = 3
    full = torch.arange(world * shard, dtype=torch.float32) * (rank + 1)
    out = torch.empty(shard)
    collectives.reduce_scatter_sum(full.clone(), out, dist.group.WORLD)
    total = torch.arange(world * shard, dtype=torch.float32) * sum(range(1, world + 1))
    ok_rs = torch.equal(out, total[rank * shard : (rank + 1) * shard])
    buf = torch.zeros(world * shard)
    buf[rank * shard : (rank + 1) * shard] = rank + 0.5
    collectives.all_gather_into(buf, buf[rank * shard : (rank + 1) * shard], dist.group.WORLD)
    ok_ag = torch.equal(buf, torch.arange(world).float().repeat_interleave(shard) + 0.5)
    ones = torch.ones(3)
    collectives.all_reduce_sum(ones, dist.group.WORLD)
    results[rank] = (ok_rs, ok_ag, torch.equal(ones, torch.full((3,), float(world))), len(staged))
    dist.destroy_process_group()


@pytest.mark.integration
def test_the_host_staged_collectives_give_the_same_sums():
    from acco.harness.launch import free_port

    results = mp.get_context("spawn").Manager().dict()
    mp.start_processes(_staged_worker, args=(2, free_port(), results), nprocs=2, start_method="spawn")
    assert dict(results) == {r: (True, True, True, 3) for r in range(2)}
