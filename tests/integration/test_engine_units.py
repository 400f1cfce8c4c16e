"""Unit tests of the shared machinery: sharded AdamW, schedules, flat buffers, collectives,
the distributed-start environment.

Here the tests that start processes (marked integration); the in-process ones are in
tests/unit/test_engine_units.py."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from acco.engine import collectives
from acco.engine.collectives import all_gather_into, all_reduce_sum, reduce_scatter_sum


def _collectives_worker(rank, world, port, results):
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    shard = 5
    full = torch.arange(world * shard, dtype=torch.float32) * (rank + 1) + rank
    expected = sum(torch.arange(world * shard, dtype=torch.float32) * (r + 1) + r for r in range(world))
    out = torch.empty(shard)
    reduce_scatter_sum(full.clone(), out, dist.group.WORLD)
    ok_rs = torch.equal(out, expected[rank * shard : (rank + 1) * shard])
    buf = torch.zeros(world * shard)
    buf[rank * shard : (rank + 1) * shard] = rank + 0.5
    all_gather_into(buf, buf[rank * shard : (rank + 1) * shard], dist.group.WORLD)
    ok_ag = torch.equal(buf, torch.arange(world).float().repeat_interleave(shard) + 0.5)
    # every collective, on every branch, reaches the collective hooks (the emulated link charges
    # them there): the ring, the all-gather, an all-reduce and NCCL's reduce-scatter (its branch
    # taken on gloo, whose reduce_scatter_tensor gives the same sums)
    calls = []
    collectives.register_collective_hook(lambda op, nbytes, w, started: calls.append((op, nbytes, w)))
    reduce_scatter_sum(full.clone(), out, dist.group.WORLD)
    all_gather_into(buf, buf[rank * shard : (rank + 1) * shard], dist.group.WORLD)
    all_reduce_sum(torch.ones(3), dist.group.WORLD)
    collectives.backend_of = lambda group: "nccl"
    out.zero_()
    reduce_scatter_sum(full.clone(), out, dist.group.WORLD)
    ok_rs = ok_rs and torch.equal(out, expected[rank * shard : (rank + 1) * shard])
    nbytes = world * shard * 4
    ok_hooks = calls == [
        ("reduce_scatter", nbytes, world),
        ("all_gather", nbytes, world),
        ("all_reduce", 12, world),
        ("reduce_scatter", nbytes, world),
    ]
    results[rank] = (ok_rs, ok_ag, ok_hooks)
    dist.destroy_process_group()


@pytest.mark.integration
@pytest.mark.parametrize("world", [2, 3, 4])
def test_ring_reduce_scatter_and_all_gather_on_gloo(world):
    from acco.harness.launch import free_port

    manager = mp.get_context("spawn").Manager()
    results = manager.dict()
    mp.start_processes(_collectives_worker, args=(world, free_port(), results), nprocs=world, start_method="spawn")
    assert dict(results) == {r: (True, True, True) for r in range(world)}
