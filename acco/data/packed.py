"""Packing of tokenized documents into constant-length blocks (``PackedData`` is what the
pretraining pipelines return), and the per-rank micro-batch stream.

``pack_documents`` is the in-memory definition of the packing (for small inputs and as the
reference of tests); the pipelines write the same stream to a token file chunk by chunk
(``token_file``) and read its blocks through a memory map (``TokenBlocks``).

``RankBatchStream.batch(k)`` is a pure function of ``(blocks, rank, world_size, micro_batch_size,
seed, k)``: a real distributed worker and the single-process reference simulator that replays
several ranks get bit-identical micro-batches. The per-epoch shuffle uses ``random.Random`` seeded
with an integer derived (SHA-256) from ``(seed, epoch, rank)``; Python guarantees that
``random.Random(int).shuffle`` is stable across versions and platforms, unlike e.g. the algorithm
behind ``torch.randperm``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import random
from array import array
from collections.abc import Iterable, Iterator

import torch

from .token_file import TokenBlocks

Blocks = torch.Tensor | TokenBlocks  # [n_blocks, seq_len]: a LongTensor or a token file's blocks

__all__ = ["PackedData", "RankBatchStream", "epoch_order", "pack_documents"]


@dataclasses.dataclass
class PackedData:
    train_blocks: Blocks  # [n_train_blocks, seq_len]; indexing gives LongTensors
    val_blocks: Blocks  # [n_val_blocks, seq_len]
    vocab_size: int  # the tokenizer's real vocabulary size
    eos_id: int
    tokenizer_path: str  # a tokenizer.json (our BPE) or a saved tokenizer folder: load_tokenizer() reads both


def pack_documents(docs: Iterable[list[int]], eos_id: int, seq_len: int) -> torch.Tensor:
    """Join the documents with ``eos_id`` after each one and cut the stream into blocks.

    Returns a LongTensor ``[n_blocks, seq_len]`` with ``n_blocks = total_tokens // seq_len``
    (``total_tokens`` counts the EOS tokens); the remainder is dropped. Blocks cross document
    boundaries, as in GPT-style pretraining.
    """
    if seq_len <= 0:
        raise ValueError(f"seq_len must be positive, got {seq_len}")
    stream = array("q")
    for doc in docs:
        stream.extend(doc)
        stream.append(eos_id)
    n_blocks = len(stream) // seq_len
    if n_blocks == 0:
        return torch.empty((0, seq_len), dtype=torch.long)
    flat = torch.frombuffer(stream, dtype=torch.long)[: n_blocks * seq_len]
    return flat.clone().view(n_blocks, seq_len)


def _epoch_seed(seed: int, epoch: int, rank: int) -> int:
    digest = hashlib.sha256(f"acco-rank-stream:{seed}:{epoch}:{rank}".encode()).digest()
    return int.from_bytes(digest[:8], "little")


def epoch_order(n: int, seed: int, epoch: int, rank: int) -> list[int]:
    """The permutation of ``range(n)`` that rank ``rank`` uses in ``epoch`` (stable everywhere)."""
    order = list(range(n))
    random.Random(_epoch_seed(seed, epoch, rank)).shuffle(order)
    return order


class MicroBatchStream:
    """A rank's endless stream of micro-batches: `batch(k)` is defined by the subclass, iteration
    yields batch(0), batch(1), ..."""

    def batch(self, k: int):
        raise NotImplementedError

    @staticmethod
    def check_rank(rank: int, world_size: int, micro_batch_size: int) -> None:
        """ValueError unless `rank` is one of `world_size` ranks and micro-batches hold >= 1 item."""
        if world_size < 1:
            raise ValueError(f"world_size must be >= 1, got {world_size}")
        if not 0 <= rank < world_size:
            raise ValueError(f"rank must be in [0, {world_size}), got {rank}")
        if micro_batch_size < 1:
            raise ValueError(f"micro_batch_size must be >= 1, got {micro_batch_size}")

    def __iter__(self) -> Iterator:
        k = 0
        while True:
            yield self.batch(k)
            k += 1


class RankBatchStream(MicroBatchStream):
    """The stream of micro-batches of one data-parallel rank.

    Rank ``r`` owns the blocks whose index is ``r`` modulo ``world_size``, truncated so that every
    rank owns the same number ``blocks_per_rank = n_blocks // world_size`` (the shards are
    disjoint). An epoch is ``batches_per_epoch = blocks_per_rank // micro_batch_size`` micro-batches;
    at every epoch the rank's blocks are visited in a new order drawn from a generator seeded by
    ``(seed, epoch, rank)`` (the last ``blocks_per_rank % micro_batch_size`` blocks of each
    permutation are skipped in that epoch).

    ``batch(k)`` returns the k-th micro-batch (a fresh ``[micro_batch_size, seq_len]`` LongTensor)
    as a pure function of ``(rank, k, seed)`` and the constructor arguments; iterating yields
    ``batch(0), batch(1), ...`` forever.
    """

    def __init__(self, blocks: Blocks, rank: int, world_size: int, micro_batch_size: int, seed: int):
        if blocks.dim() != 2:
            raise ValueError(f"blocks must be a 2-D [n_blocks, seq_len] tensor, got shape {tuple(blocks.shape)}")
        self.check_rank(rank, world_size, micro_batch_size)
        n_blocks = blocks.shape[0]
        per_rank = n_blocks // world_size
        if per_rank < micro_batch_size:
            raise ValueError(
                f"rank {rank} would own {per_rank} blocks ({n_blocks} blocks over {world_size} ranks), "
                f"fewer than micro_batch_size={micro_batch_size}: use more data (more stories or a "
                f"shorter seq_len), fewer ranks or a smaller micro-batch"
            )
        self.rank = rank
        self.world_size = world_size
        self.micro_batch_size = micro_batch_size
        self.seed = seed
        self.seq_len = blocks.shape[1]
        self.blocks_per_rank = per_rank
        self.batches_per_epoch = per_rank // micro_batch_size
        self._blocks = blocks
        # global block indices owned by this rank
        self.indices = torch.arange(rank, per_rank * world_size, world_size, dtype=torch.long)
        self._perm_epoch = -1
        self._perm: torch.Tensor | None = None

    def _order(self, epoch: int) -> torch.Tensor:
        if epoch != self._perm_epoch:
            order = epoch_order(self.blocks_per_rank, self.seed, epoch, self.rank)
            self._perm = self.indices[torch.tensor(order, dtype=torch.long)]
            self._perm_epoch = epoch
        assert self._perm is not None
        return self._perm

    def batch(self, k: int) -> torch.Tensor:
        if k < 0:
            raise ValueError(f"batch index must be >= 0, got {k}")
        epoch, j = divmod(k, self.batches_per_epoch)
        idx = self._order(epoch)[j * self.micro_batch_size : (j + 1) * self.micro_batch_size]
        return self._blocks.index_select(0, idx).to(torch.long)

    def __repr__(self) -> str:
        return (
            f"RankBatchStream(rank={self.rank}, world_size={self.world_size}, "
            f"micro_batch_size={self.micro_batch_size}, seed={self.seed}, "
            f"blocks_per_rank={self.blocks_per_rank}, batches_per_epoch={self.batches_per_epoch})"
        )
