"""The backward-overlapped DDP's pieces, in process: the flat engine's gradient buckets
(acco/engine/flat.py BucketLayout) and their hooks (acco/engine/backward_overlap.py), PyTorch DDP's
bucketing as the model reads it, and the one rule of the step's time (acco/analytic/overlap.py)
that the virtual clock and the simulator share, with its arithmetic.

Here the tests in-process; those that start processes (marked integration) are in
tests/integration/test_backward_overlap.py."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
import torch.distributed as dist

from acco.analytic.overlap import (
    BACKWARD_SHARE,
    Buckets,
    ddp_bucket_sizes,
    ddp_limits,
    hidden_s,
    step_end,
    torch_ddp_buckets,
)
from acco.engine.backward_overlap import GradBucketHooks
from acco.engine.flat import BucketLayout, FlatModel, ShardLayout


def _mlp() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3)
    )


# -- the flat buckets --------------------------------------------------------------------------------
def test_buckets_tile_the_vector_in_multiples_of_n_and_each_rank_owns_one_chunk_of_each():
    model = _mlp()
    slices, at = [], 0
    for p in model.parameters():
        slices.append((at, at + p.numel()))
        at += p.numel()
    layout = ShardLayout(at, 3)
    buckets = BucketLayout.by_size(slices, layout, [40 * 4], item_bytes=4)
    assert buckets.bounds[0] == 0 and buckets.bounds[-1] == layout.padded and len(buckets) > 2
    assert all(b % 3 == 0 for b in buckets.bounds)
    # every entry owned by exactly one rank, and each rank's chunks fill its shard
    seen = torch.zeros(layout.padded, dtype=torch.int64)
    for r in range(3):
        owned = buckets.owned(r)
        assert sum(hi - lo for lo, hi, _ in owned) == layout.shard_size
        assert [at for _, _, at in owned] == buckets.offsets
        for lo, hi, _ in owned:
            seen[lo:hi] += 1
    assert torch.equal(seen, torch.ones_like(seen))
    # one bucket: the contiguous shards of every other sync
    single = BucketLayout.single(layout)
    assert [(lo, hi) for lo, hi, _ in (single.owned(r)[0] for r in range(3))] == [layout.bounds(r) for r in range(3)]
    assert buckets.launch_order() == list(reversed(range(len(buckets))))


def test_flat_model_shards_by_bucket_chunks_and_keeps_decay_on_the_right_entries():
    models = [_mlp() for _ in range(2)]
    limits = [40 * 4]
    flats = [
        FlatModel(m, world_size=2, rank=r, bucket_limits=limits, decay_bias_and_norm=False)
        for r, m in enumerate(models)
    ]
    whole = torch.cat([p.detach().reshape(-1) for p in _mlp().parameters()])
    # each rank's master shard holds its chunks of the initial values, bucket after bucket
    for r, flat in enumerate(flats):
        master = flat.take_master_shard()
        for lo, hi, at in flat.buckets.owned(r):
            n = max(0, min(hi, flat.numel) - lo)
            assert torch.equal(master[at : at + n], whole[lo : lo + n])
        # decayed entries: exactly the weight matrices' (the biases' positions decay nothing)
        decayed = torch.zeros(flat.layout.shard_size, dtype=torch.bool)
        for a, b in flat.decay_ranges:
            decayed[a:b] = True
        expected = torch.zeros(flat.layout.padded, dtype=torch.bool)
        for (a, b), p in zip(flat.slices, flat.parameters):
            expected[a:b] = p.ndim >= 2
        for lo, hi, at in flat.buckets.owned(r):
            assert torch.equal(decayed[at : at + hi - lo], expected[lo:hi])


def test_hooks_hand_each_bucket_over_once_final_in_launch_order():
    model = _mlp()
    flat = FlatModel(model, world_size=2, bucket_limits=[40 * 4])
    hooks = GradBucketHooks(flat)
    launched: list[tuple[int, torch.Tensor]] = []
    hooks.arm(lambda k: launched.append((k, flat.grads[slice(*flat.buckets.bucket(k))].clone())))
    model(torch.randn(4, 8)).sum().backward()
    hooks.flush()
    assert [k for k, _ in launched] == flat.buckets.launch_order()
    # each bucket's gradients were final when handed over
    for k, grads in launched:
        assert torch.equal(grads, flat.grads[slice(*flat.buckets.bucket(k))])
    # the first bucket was handed over before the backward reached the first layer: its gradients
    # were final while the first layer's were still zero
    first = launched[0][0]
    assert first == len(flat.buckets) - 1 and flat.buckets.bucket(first)[0] > 0
    # disarmed: nothing is handed over
    launched.clear()
    model(torch.randn(4, 8)).sum().backward()
    assert launched == []


def test_a_parameter_without_a_gradient_is_flushed_after_the_backward():
    model = _mlp()
    flat = FlatModel(model, world_size=2, bucket_limits=[40 * 4])
    hooks = GradBucketHooks(flat)
    launched: list[int] = []
    hooks.arm(launched.append)
    model[0:3](torch.randn(4, 8)).sum().backward()  # the last layer takes no part
    assert launched == []  # its bucket comes first in launch order and waits
    hooks.flush()
    assert launched == flat.buckets.launch_order()


# -- PyTorch DDP's bucketing, as the model reads it --------------------------------------------------
@pytest.mark.parametrize("limits", [[1 << 20, 25 << 20], [3000], [1 << 30]])
def test_ddp_bucket_assignment_is_pytorchs(limits):
    sizes = [4096, 512, 40000, 12, 1 << 18, 300, 300, 7000, 2 << 20, 64]
    tensors = [torch.empty(n // 4) for n in sizes]
    theirs, _ = dist._compute_bucket_assignment_by_size(tensors, limits, [False] * len(tensors))
    assert ddp_bucket_sizes(sizes, limits) == [list(b) for b in theirs]


def test_torch_ddp_buckets_of_the_tiny_model_and_their_readiness():
    """A small GPT's sizes (fp32, 2.7 MB): DDP's rebuilt buckets, a 1 MiB first bucket, then 25 MiB."""
    numels = [262144, 32768, 256, 256, 98304, 32768, 256, 131072, 1024, 131072, 256, 256, 256]  # model order
    b = torch_ddp_buckets(numels, 4, None)
    total = sum(numels)
    assert ddp_limits(None) == [1 << 20, 25 << 20] and ddp_limits(0.5) == [1 << 19]
    assert sum(b.entries) == total and len(b) == 2
    assert b.ready[-1] == 1.0 and b.ready[0] == pytest.approx(b.entries[0] / total)
    assert b.entries[0] * 4 >= 1 << 20  # closes once it reaches its limit
    assert len(torch_ddp_buckets(numels, 4, 100.0)) == 1  # one bucket_cap_mb of 100 MiB holds it all


# -- the rule -----------------------------------------------------------------------------------------
def test_one_bucket_is_the_blocking_step():
    """φ = 1: max_q(s_q + a·c_q) + r + tail, whatever the backward's share."""
    one = Buckets.single(1000)
    for share in (0.5, BACKWARD_SHARE, 0.9):
        end = step_end([0.0, 0.3], [0.1, 0.25], 3, one, [0.2], 0.05, share)
        assert float(end) == pytest.approx(max(0.0 + 0.3, 0.3 + 0.75) + 0.2 + 0.05)


def test_buckets_start_when_final_and_the_link_is_free():
    """a = 2, c = 0.3 s, β = 2/3 (backward 0.2 s from t = 0.4): bucket 0 final at 0.4 + 0.25·0.2 =
    0.45 and reduced by 0.55; bucket 1 final at 0.5, waits for the link until 0.55, reduced by
    0.65; bucket 2 final at 0.6 (the backward's end), waits until 0.65, reduced by 0.75; then the
    tail 0.1: 0.85, where the blocking step takes 0.6 + 0.3 + 0.1 = 1.0."""
    b = Buckets((0.25, 0.5, 1.0), (1, 1, 2))
    end = step_end([0.0, 0.0], [0.3, 0.3], 2, b, [0.1, 0.1, 0.1], 0.1, 2 / 3)
    assert float(end) == pytest.approx(0.85)
    # hidden: 0.3 s of reductions, 0.15 of it after the backward's end (0.6)
    assert float(hidden_s([0.0, 0.0], [0.3, 0.3], 2, b, [0.1, 0.1, 0.1], 2 / 3)) == pytest.approx(0.15)


def test_a_slow_rank_delays_every_bucket_it_has_not_finished():
    """Rank 1 twice slower: its backward (0.4 s from 0.8) sets every bucket's start."""
    b = Buckets((0.5, 1.0), (1, 1))
    end = step_end([0.0, 0.0], [0.3, 0.6], 2, b, [0.05, 0.05], 0.0, 2 / 3)
    assert float(end) == pytest.approx(1.2 + 0.05)  # bucket 0 at 1.0–1.05, bucket 1 at 1.2–1.25


def test_the_rule_gives_the_same_numbers_on_arrays_as_on_floats():
    b = Buckets.from_sizes([3, 5, 8])
    starts = np.array([[0.0, 0.1], [0.2, 0.0]])
    costs = np.array([[0.3, 0.3], [0.2, 0.4]])
    reduce_s = [np.array([0.05, 0.1]), np.array([0.05, 0.1]), np.array([0.1, 0.2])]
    arr = step_end(starts, costs, 3, b, reduce_s, np.array([0.1, 0.2]))
    for i in range(2):
        one = step_end(list(starts[i]), list(costs[i]), 3, b, [float(r[i]) for r in reduce_s], float([0.1, 0.2][i]))
        assert float(arr[i]) == float(one)


def test_the_flat_model_buckets_are_the_models_buckets():
    """The readiness the clock reads for the flat engine is its layout's, from the model's end."""
    model = copy.deepcopy(_mlp())
    flat = FlatModel(model, world_size=2, bucket_limits=[40 * 4])
    b = Buckets.from_sizes(flat.buckets.entries_in_launch_order())
    assert sum(b.entries) == flat.layout.padded
    assert b.ready == tuple(
        (flat.layout.padded - flat.buckets.bounds[k]) / flat.layout.padded for k in flat.buckets.launch_order()
    )
