"""acco/engine/sync.py: the sync sends the parameters back in their own dtype (issue 42 point 5):
beside an fp32 accumulator and buffer, the all-gather moves bf16 parameters, through a view of
the buffer's storage, and the model receives exactly the masters rounded to bf16."""

from __future__ import annotations

from contextlib import contextmanager

import pytest
import torch
import torch.distributed as dist
from torch import nn

from acco.engine import sync as sync_module
from acco.engine.flat import FlatModel
from acco.engine.sharded_adamw import ShardedAdamW
from acco.engine.sync import Syncer, SyncKind
from acco.engine.trace import TraceRecorder


@contextmanager
def world_of_one():
    mine = not dist.is_initialized()
    if mine:
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        yield dist.new_group([0], backend="gloo")
    finally:
        if mine:
            dist.destroy_process_group()


def test_an_fp32_buffer_all_gathers_bf16_parameters(monkeypatch):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(12, 16), nn.Linear(16, 3))
    flat = FlatModel(model, 1, dtype=torch.bfloat16, grad_dtype=torch.float32)
    opt = ShardedAdamW(flat.take_master_shard(), flat.decay_ranges, lambda step, mb: 1e-2)
    buffer = torch.zeros_like(flat.grads)  # fp32, as the accumulator
    view = buffer.view(torch.bfloat16)[: buffer.numel()]
    gathered = []
    real = sync_module.all_gather_into

    def recording(full, shard, group):
        gathered.append((full.dtype, full.nbytes))
        real(full, shard, group)

    monkeypatch.setattr(sync_module, "all_gather_into", recording)
    with world_of_one() as group:
        syncer = Syncer(buffer, opt, 0, 1, group, TraceRecorder(0, enabled=False), gathered=view)
        buffer.copy_(torch.randn(buffer.numel()))
        syncer.sync(SyncKind.COMMIT, 2, 1.0)
    assert gathered == [(torch.bfloat16, 2 * buffer.numel())]  # half the fp32 buffer's bytes
    assert torch.equal(view, opt.master.to(torch.bfloat16))  # rounded once, from the fp32 master


def test_the_gathered_parameters_must_be_a_view_of_the_buffer():
    opt = ShardedAdamW(torch.zeros(8), [], lambda step, mb: 1e-3)
    with pytest.raises(ValueError, match="view of the communication buffer"):
        Syncer(torch.zeros(8), opt, 0, 1, None, TraceRecorder(0, enabled=False), gathered=torch.zeros(8))
