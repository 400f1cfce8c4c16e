"""A rank's checkpoint as DCP items (acco/train/checkpoint_state.py) and their files
(acco/train/checkpoint_io.py), in one process: the split and its rebuild give back the state, the
shares of a shared tensor cover it once, no item exceeds a piece, the SHA-256 recorded while
writing is the file's, a load reads each byte of its file once, and a changed byte fails it."""

from __future__ import annotations

import hashlib
import os

import pytest
import torch

from acco.train import checkpoint_io, checkpoint_state
from acco.train.checkpoint_state import TensorRef, load_targets, rebuild, share_bounds, skeleton_key, split_state


def state(seed: int = 0) -> tuple[dict, dict]:
    g = torch.Generator().manual_seed(seed)
    shared = {"params": torch.randn(50_000, generator=g)}
    own = {
        "step": 7,
        "rng": {"torch": torch.randint(0, 255, (100,), dtype=torch.uint8, generator=g), "python": (3, (1, 2), None)},
        "engine": {
            "opt": {"master": torch.randn(25_000, generator=g), "exp_avg": torch.randn(25_000, generator=g)},
            "grads": torch.randn(100, 500, generator=g),
            "momentum": [torch.randn(30_000, generator=g), torch.randn(30_000, generator=g)],
            "runner": {"next_index": 12, "loss_sum": 1.5},
        },
    }
    return shared, own


def same(a, b) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


def test_shares_cover_a_tensor_once():
    for numel in (0, 1, 5, 7, 50_000):
        for world in (1, 2, 3, 8):
            bounds = [share_bounds(numel, r, world) for r in range(world)]
            covered = [i for lo, hi in bounds for i in range(lo, hi)]
            assert covered == list(range(numel))


def test_items_are_pieces_of_at_most_piece_bytes(monkeypatch):
    monkeypatch.setattr(checkpoint_state, "PIECE_BYTES", 40_000)
    shared, own = state()
    items, _ = split_state(shared, own, rank=1, world=3)
    tensors = {k: v for k, v in items.items() if isinstance(v, torch.Tensor)}
    assert tensors and all(t.numel() * t.element_size() <= 40_000 for t in tensors.values())
    # rank 1's share of the parameters, and all of its own tensors, each once
    shared_entries = sum(t.numel() for k, t in tensors.items() if "/shared/" in k)
    lo, hi = share_bounds(50_000, 1, 3)
    assert shared_entries == hi - lo
    own_entries = sum(t.numel() for k, t in tensors.items() if "/own/" in k)
    assert own_entries == 25_000 * 2 + 50_000 + 30_000 * 2
    # small tensors stay in the skeleton
    skeleton = items[skeleton_key(1)]
    assert isinstance(skeleton["own"]["rng"]["torch"], torch.Tensor)
    assert isinstance(skeleton["own"]["engine"]["grads"], TensorRef)


def test_split_and_rebuild_give_back_the_state(monkeypatch):
    """Every rank's items, loaded into a fresh state of the same shapes (in place) or into none
    (new tensors), rebuild its own state and its share of the shared one."""
    monkeypatch.setattr(checkpoint_state, "PIECE_BYTES", 30_000)
    world = 3
    shared, own = state(1)
    for rank in range(world):
        items, _ = split_state(shared, own, rank, world)
        skeleton = items[skeleton_key(rank)]
        fresh_shared, fresh_own = state(2)  # other values, the same shapes: loaded in place
        _, live = split_state(fresh_shared, fresh_own, rank, world)
        targets, tensors = load_targets(skeleton, live, rank, world)
        assert set(targets) == {k for k in items if k != skeleton_key(rank)}
        for key, target in targets.items():
            target.copy_(items[key])
        assert same(rebuild(skeleton["own"], tensors), own)
        assert tensors[f"rank{rank}/own/engine/grads"] is fresh_own["engine"]["grads"]  # in place
        lo, hi = share_bounds(50_000, rank, world)
        assert torch.equal(rebuild(skeleton["shared"], tensors)["params"][lo:hi], shared["params"][lo:hi])
        # with no live state the tensors are new ones of the skeleton's shapes
        targets, tensors = load_targets(skeleton, {}, rank, world)
        for key, target in targets.items():
            target.copy_(items[key])
        assert same(rebuild(skeleton["own"], tensors), own)


def test_a_saved_file_reads_back_once_and_is_checked(tmp_path, monkeypatch):
    monkeypatch.setattr(checkpoint_state, "PIECE_BYTES", 30_000)
    shared, own = state(3)
    items, _ = split_state(shared, own, 0, 1)
    written = checkpoint_io.save(items, str(tmp_path), group=None)
    assert set(written) == {"__0_0.distcp"}
    path = tmp_path / "__0_0.distcp"
    data = path.read_bytes()
    assert written["__0_0.distcp"] == {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}

    def load(expected):
        stats = checkpoint_io.ReadStats()
        reader = checkpoint_io.VerifyingReader(str(tmp_path), expected, stats)
        key = skeleton_key(0)
        skeleton = checkpoint_io.load({key: None}, reader, None)[key]
        targets, tensors = load_targets(skeleton, {}, 0, 1)
        reader.check = True
        checkpoint_io.load(targets, reader, None)
        return rebuild(skeleton, tensors), stats

    loaded, stats = load(written)
    assert same(loaded["own"], own) and torch.equal(loaded["shared"]["params"], shared["params"])
    assert stats.bytes_read == len(data)  # every byte once, the skeleton included
    # a changed byte in a tensor's data, at the same size
    with open(path, "r+b") as f:
        f.seek(len(data) - 5000)
        f.write(b"\x01\x02\x03")
    with pytest.raises(BaseException, match="corrupt"):  # DCP's CheckpointException
        load(written)
    assert os.path.getsize(path) == len(data)
