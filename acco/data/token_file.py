"""Token files: a packed document stream on disk, read as constant-length blocks through a memory map.

A token file is the raw little-endian array of the stream's token ids — every document followed by
EOS, documents in order — cut to a whole number of ``seq_len`` blocks, as ``uint16`` when every id
fits (a vocabulary of at most 65536 ids: our BPEs, GPT-2/GPT-Neo's 50257) else ``uint32``: 2 or 4
bytes a token instead of 8 (OpenWebText's ~9 B GPT-2 tokens: 18 GB).

``TokenFileWriter`` appends documents chunk by chunk (its memory is that of one chunk);
``TokenBlocks`` is the read side: a ``[n_blocks, seq_len]`` view of the file through
``numpy.memmap``, whose indexing returns fresh ``int64`` tensors; the workers of one machine that
open the same file share its pages in the page cache.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import torch

__all__ = ["TokenBlocks", "TokenFileWriter", "token_dtype"]


def token_dtype(max_id: int) -> np.dtype:
    """The smallest file dtype holding the ids ``0..max_id``: ``uint16`` or ``uint32`` (little-endian)."""
    if max_id < 0 or max_id >= 2**32:
        raise ValueError(f"token ids must be in [0, 2**32), got a largest id of {max_id}")
    return np.dtype("<u2") if max_id < 2**16 else np.dtype("<u4")


class TokenFileWriter:
    """Writes documents, each followed by ``eos_id``, to a token file of ``dtype``.

    ``write(values, lengths)`` appends consecutive documents given as their concatenated ids and
    their lengths; ``finish(seq_len)`` drops the tail that does not fill a block, closes the file
    and returns the number of blocks. Counters: ``num_docs``, ``num_doc_tokens`` (without EOS),
    ``num_stream_tokens`` (with EOS, before the cut).
    """

    def __init__(self, path: str | os.PathLike, dtype, eos_id: int):
        self.path = Path(path)
        self.dtype = np.dtype(dtype).newbyteorder("<")
        self._max = int(np.iinfo(self.dtype).max)
        if not 0 <= eos_id <= self._max:
            raise ValueError(f"eos_id {eos_id} does not fit in {self.dtype.name}")
        self.eos_id = int(eos_id)
        self.num_docs = self.num_doc_tokens = self.num_stream_tokens = 0
        self._fh = open(self.path, "wb")

    def write(self, values: np.ndarray, lengths: np.ndarray) -> None:
        values = np.asarray(values).reshape(-1)
        lengths = np.asarray(lengths, dtype=np.int64).reshape(-1)
        if int(lengths.sum()) != values.size:
            raise ValueError(f"the document lengths add up to {int(lengths.sum())}, not to the {values.size} ids given")
        if len(lengths) == 0:
            return
        if values.size and (int(values.min()) < 0 or int(values.max()) > self._max):
            raise ValueError(f"token ids outside [0, {self._max}] cannot be stored as {self.dtype.name}")
        out = np.empty(values.size + len(lengths), dtype=self.dtype)
        eos_at = np.cumsum(lengths + 1) - 1
        is_id = np.ones(out.size, dtype=bool)
        is_id[eos_at] = False
        out[is_id] = values
        out[eos_at] = self.eos_id
        self._fh.write(out.data.cast("B"))  # the array's own buffer (memoryview(out)), as bytes
        self.num_docs += len(lengths)
        self.num_doc_tokens += values.size
        self.num_stream_tokens += out.size

    def finish(self, seq_len: int) -> int:
        if seq_len < 1:
            raise ValueError(f"seq_len must be >= 1, got {seq_len}")
        n_blocks = self.num_stream_tokens // seq_len
        self._fh.truncate(n_blocks * seq_len * self.dtype.itemsize)
        self._fh.close()
        return n_blocks

    def abort(self) -> None:
        self._fh.close()


class TokenBlocks:
    """A read-only ``[n_blocks, seq_len]`` view of a token file.

    Behaves like the LongTensor of blocks for its readers: ``len``, ``shape``, ``dim()``,
    ``size()``, ``dtype`` (``torch.long``, the dtype of what indexing returns); ``blocks[i]``,
    ``blocks[i:j]``, ``blocks[::k]``, ``blocks[index_tensor]`` and ``index_select(0, idx)`` return a
    new ``int64`` tensor (a copy: writing to it never touches the file). Pickles as its file
    name, not its contents.
    """

    dtype = torch.long

    def __init__(self, path: str | os.PathLike, dtype, n_blocks: int, seq_len: int):
        self.path = Path(path)
        self.storage_dtype = np.dtype(dtype)
        self.n_blocks, self.seq_len = int(n_blocks), int(seq_len)
        expected = self.n_blocks * self.seq_len * self.storage_dtype.itemsize
        size = self.path.stat().st_size
        if size != expected:
            raise ValueError(
                f"{self.path} has {size} bytes, expected {expected} ({self.n_blocks} blocks of "
                f"{self.seq_len} {self.storage_dtype.name}): the data cache is damaged; delete "
                f"{self.path.parent} to rebuild it"
            )
        if self.n_blocks == 0:  # numpy cannot map an empty file
            self._array = np.empty((0, self.seq_len), dtype=self.storage_dtype)
        else:
            self._array = np.memmap(self.path, dtype=self.storage_dtype, mode="r", shape=(self.n_blocks, self.seq_len))

    @property
    def shape(self) -> torch.Size:
        return torch.Size((self.n_blocks, self.seq_len))

    def size(self, dim: int | None = None):
        return self.shape if dim is None else self.shape[dim]

    def dim(self) -> int:
        return 2

    def numel(self) -> int:
        return self.n_blocks * self.seq_len

    def __len__(self) -> int:
        return self.n_blocks

    def __getitem__(self, index) -> torch.Tensor:
        if isinstance(index, torch.Tensor):
            index = index.numpy()
        return torch.from_numpy(np.array(self._array[index], dtype=np.int64))

    def index_select(self, dim: int, index: torch.Tensor) -> torch.Tensor:
        if dim != 0:
            raise ValueError(f"TokenBlocks.index_select selects blocks (dim 0), got dim={dim}")
        return self[index.reshape(-1)]

    def __reduce__(self):
        return (TokenBlocks, (str(self.path), self.storage_dtype.str, self.n_blocks, self.seq_len))

    def __repr__(self) -> str:
        return (
            f"TokenBlocks({str(self.path)!r}, {self.storage_dtype.name}, n_blocks={self.n_blocks}, "
            f"seq_len={self.seq_len})"
        )
