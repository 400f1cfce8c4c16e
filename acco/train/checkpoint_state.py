"""A rank's part of a checkpoint as flat items for checkpoint_io: its own state and
its share of the state every rank holds alike, each tensor in pieces of at most PIECE_BYTES.

    rank<r>/skeleton          the rank's state with every large tensor replaced by a reference
                              (small values, the RNG states, counters: pickled whole)
    rank<r>/own/<path>#<i>    piece i of one of its own tensors (its optimizer shard, pending
                              gradients, ...)
    rank<r>/shared/<path>#<i> piece i of its 1/N of a shared tensor (the parameters, the same on
                              every rank: each rank writes and reads back only its own share, and
                              the ranks exchange the shares after loading)

Why pieces: DCP writes a tensor that is a view into a larger buffer by cloning it first, and on a GPU
copies it to host memory whole; pieces bound both to PIECE_BYTES, so a save holds no second copy of
the state in host memory (checkpoint_io's hashing adds none either). Every rank's keys are its own,
so DCP deduplicates nothing and a rank's file holds exactly its part."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

PIECE_BYTES = 64 * 2**20
SMALL_BYTES = 64 * 2**10  # tensors below this stay in the skeleton (RNG states, counters)


@dataclass(frozen=True)
class TensorRef:
    """Where a large tensor of the state went: `pieces` items under `key`."""

    key: str
    shape: tuple[int, ...]
    dtype: torch.dtype
    pieces: int
    piece_numel: int  # entries per piece (the last may hold fewer)
    shared: bool  # a share of a tensor every rank holds: rank r's range of the flattened tensor


def skeleton_key(rank: int) -> str:
    return f"rank{rank}/skeleton"


def share_bounds(numel: int, rank: int, world: int) -> tuple[int, int]:
    """Rank `rank`'s range of a flattened shared tensor of `numel` entries."""
    size = -(-numel // world)
    return min(numel, rank * size), min(numel, (rank + 1) * size)


def piece_numel(t: torch.Tensor) -> int:
    return max(1, PIECE_BYTES // max(1, t.element_size()))


def _pieces(flat: torch.Tensor, step: int) -> list[torch.Tensor]:
    return [flat[i : i + step] for i in range(0, flat.numel(), step)]


def _flat_view(t: torch.Tensor) -> torch.Tensor:
    t = t.detach()
    if not t.is_contiguous():
        raise ValueError(f"a checkpointed tensor must be contiguous (shape {tuple(t.shape)})")
    return t.reshape(-1)


class _Splitter:
    def __init__(self, rank: int, world: int):
        self.rank, self.world = rank, world
        self.items: dict[str, Any] = {}
        self.tensors: dict[str, torch.Tensor] = {}  # ref key -> the tensor split

    def split(self, obj: Any, path: str, shared: bool) -> Any:
        if isinstance(obj, torch.Tensor) and (shared or obj.numel() * obj.element_size() >= SMALL_BYTES):
            flat = _flat_view(obj)
            kind = "shared" if shared else "own"
            key = f"rank{self.rank}/{kind}/{path}"
            if shared:
                lo, hi = share_bounds(flat.numel(), self.rank, self.world)
                flat = flat[lo:hi]
            step = piece_numel(flat)
            pieces = _pieces(flat, step)
            self.tensors[key] = obj
            for i, piece in enumerate(pieces):
                self.items[f"{key}#{i}"] = piece
            return TensorRef(key, tuple(obj.shape), obj.dtype, len(pieces), step, shared)
        if isinstance(obj, dict):
            return {k: self.split(v, f"{path}/{k}" if path else str(k), shared) for k, v in obj.items()}
        if isinstance(obj, list) and any(isinstance(v, (torch.Tensor, dict, list)) for v in obj):
            return [self.split(v, f"{path}/{i}", shared) for i, v in enumerate(obj)]
        return obj


def split_state(
    shared: dict | None, own: dict, rank: int, world: int
) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    """(this rank's items: its skeleton, its own tensors' pieces, its share of each shared tensor;
    {ref key: the tensor split}). `shared`: the state every rank holds alike (every rank passes
    it: each writes its share)."""
    splitter = _Splitter(rank, world)
    skeleton = {
        "shared": splitter.split(shared or {}, "", shared=True),
        "own": splitter.split(own, "", shared=False),
    }
    return {skeleton_key(rank): skeleton, **splitter.items}, splitter.tensors


def _refs(obj: Any) -> list[TensorRef]:
    if isinstance(obj, TensorRef):
        return [obj]
    if isinstance(obj, dict):
        return [r for v in obj.values() for r in _refs(v)]
    if isinstance(obj, list):
        return [r for v in obj for r in _refs(v)]
    return []


def load_targets(
    skeleton: dict, live: dict[str, torch.Tensor], rank: int, world: int
) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """(the items to load, {ref key: the whole tensor they fill}) for a skeleton read back. A
    tensor is loaded in place into `live`'s tensor of the same key (split_state's of the state as
    it is now) when its shape and dtype agree, else into a new host tensor of the skeleton's shape."""
    items: dict[str, torch.Tensor] = {}
    tensors: dict[str, torch.Tensor] = {}
    for ref in _refs(skeleton):
        full = live.get(ref.key)
        if full is None or tuple(full.shape) != ref.shape or full.dtype != ref.dtype or not full.is_contiguous():
            full = torch.empty(ref.shape, dtype=ref.dtype)
        flat = _flat_view(full)
        if ref.shared:
            lo, hi = share_bounds(flat.numel(), rank, world)
            flat = flat[lo:hi]
        pieces = _pieces(flat, ref.piece_numel)
        if len(pieces) != ref.pieces:
            raise ValueError(f"{ref.key}: {ref.pieces} pieces written, {len(pieces)} here")
        for i, piece in enumerate(pieces):
            items[f"{ref.key}#{i}"] = piece
        tensors[ref.key] = full
    return items, tensors


def rebuild(skeleton: Any, tensors: dict[str, torch.Tensor]) -> Any:
    if isinstance(skeleton, TensorRef):
        return tensors[skeleton.key]
    if isinstance(skeleton, dict):
        return {k: rebuild(v, tensors) for k, v in skeleton.items()}
    if isinstance(skeleton, list):
        return [rebuild(v, tensors) for v in skeleton]
    return skeleton


def shared_refs(skeleton: dict) -> list[TensorRef]:
    return _refs(skeleton["shared"])


def exchange_shares(tensor: torch.Tensor, world: int, broadcast: Callable[[torch.Tensor, int], None]) -> None:
    """After each rank loaded its share of a shared tensor in place: every rank's share to every
    rank (one broadcast per share, in place: no extra copy)."""
    flat = tensor.reshape(-1)
    for src in range(world):
        lo, hi = share_bounds(flat.numel(), src, world)
        if hi > lo:
            broadcast(flat[lo:hi], src)
