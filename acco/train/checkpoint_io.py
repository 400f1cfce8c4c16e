"""A checkpoint's bytes on disk through `torch.distributed.checkpoint` (DCP): every rank writes its
own file (`__<rank>_0.distcp`) straight from its tensors, rank 0 DCP's `.metadata`; a rank reads
back only its own file and the metadata.

What DCP's FileSystemWriter/Reader do not do, done here by subclassing them:
  * the SHA-256 and size of each file a rank writes, computed from the bytes as they pass on their
    way to the file (no second read, no buffered copy);
  * reading a rank's own file in one pass, front to back, the same SHA-256 computed from the bytes
    read and compared with what was written: a corrupt file fails the load (on every rank: DCP
    gathers each rank's read errors) instead of a separate check that reads everything again.

A tensor is written from, and read into, host memory one item at a time (an item is at most one
piece of the split state): a save or a load adds at most a piece or
two to the process's memory, whatever the state's size."""

from __future__ import annotations

import hashlib
import io
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import IO, Any, cast

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint import FileSystemReader, FileSystemWriter
from torch.distributed.checkpoint.default_planner import DefaultLoadPlanner, DefaultSavePlanner
from torch.distributed.checkpoint.filesystem import FileSystem, _StorageInfo
from torch.distributed.checkpoint.planner import (
    LoadItemType,
    LoadPlan,
    LoadPlanner,
    SavePlan,
    SavePlanner,
    WriteItemType,
)
from torch.distributed.checkpoint.storage import WriteResult
from torch.futures import Future

METADATA = ".metadata"  # DCP's own index of every item (rank 0 writes it last; checkpoint.DCP_METADATA)
SUFFIX = ".distcp"


def rank_files_prefix(rank: int) -> str:
    """DCP's name for rank `rank`'s files: __<rank>_<i>.distcp (one per rank: single_file_per_rank)."""
    return f"__{rank}_"


class CorruptFileError(ValueError):
    """A file's bytes differ from those written (SHA-256 or size): str() names the file."""


# -- writing ---------------------------------------------------------------------------------------
class _HashingStream(io.RawIOBase):
    """A file opened for writing that hashes what passes through it. An OSError of the file (a full
    disk) is kept in `errors`: torch.save's writer reports a failed write as a bare RuntimeError."""

    def __init__(self, raw, record: dict, errors: list[OSError]):
        super().__init__()
        self.raw = raw
        self.record = record
        self.errors = errors
        self.digest = hashlib.sha256()
        self.size = 0

    def writable(self) -> bool:
        return True

    def write(self, b) -> int:
        view = memoryview(b).cast("B")
        try:
            n = self.raw.write(view)
        except OSError as exc:
            self.errors.append(exc)
            raise
        self.digest.update(view[:n])
        self.size += n
        return n

    def tell(self) -> int:
        return self.raw.tell()

    def flush(self) -> None:
        if not self.raw.closed:
            try:
                self.raw.flush()
            except OSError as exc:
                self.errors.append(exc)
                raise

    def fileno(self) -> int:
        return self.raw.fileno()

    def close(self) -> None:
        if not self.closed:
            self.record.update(bytes=self.size, sha256=self.digest.hexdigest())
            try:
                self.raw.close()
            except OSError as exc:
                self.errors.append(exc)
                raise
        super().close()


class _HashingFileSystem(FileSystem):
    def __init__(self, written: dict[str, dict], errors: list[OSError]):
        self.written = written  # file name -> {"bytes", "sha256"}
        self.errors = errors

    @contextmanager
    def create_stream(self, path, mode: str) -> Iterator[io.IOBase]:
        if "w" not in mode:
            with super().create_stream(path, mode) as stream:
                yield stream
            return
        record: dict = {}
        stream = _HashingStream(open(path, mode), record, self.errors)
        try:
            yield cast(io.IOBase, stream)
        finally:
            try:
                stream.close()
            except OSError:
                if not self.errors:
                    raise
        self.written[os.path.basename(os.fspath(path))] = record


class HashingWriter(FileSystemWriter):
    """DCP's FileSystemWriter, writing each rank's one file itself: every item in turn, a tensor
    moved to host memory (and cut from a larger buffer) one item at a time and dropped once
    written, in DCP's own format (an item is one torch.save record; FileSystemReader reads the
    files). DCP's own loop keeps every item's host copy until the file is done (for its safetensors
    format): with pieces cut from large buffers that is a second copy of the whole state.
    Records each file's size and SHA-256 as it is written (`written`); a write that fails on an
    OSError raises that error (not torch.save's RuntimeError), so DCP hands every rank the errno."""

    def __init__(self, path: str):
        super().__init__(path, single_file_per_rank=True, sync_files=True, thread_count=1, overwrite=False)
        self.written: dict[str, dict] = {}
        self.errors: list[OSError] = []
        self.fs = _HashingFileSystem(self.written, self.errors)

    def write_data(self, plan: SavePlan, planner: SavePlanner) -> Future[list[WriteResult]]:
        try:
            results = self._write_file(plan, planner)
        except Exception as exc:
            if self.errors and self.errors[0] is not exc:
                raise self.errors[0] from exc
            raise
        done: Future[list[WriteResult]] = Future()
        done.set_result(results)
        return done

    def _write_file(self, plan: SavePlan, planner: SavePlanner) -> list[WriteResult]:
        name = f"{plan.storage_data.prefix}0{SUFFIX}"
        results = []
        # byte items (the skeleton) first: a load reads them before the tensors they describe
        items = sorted(plan.items, key=lambda it: it.type != WriteItemType.BYTE_IO)
        with self.fs.create_stream(os.path.join(os.fspath(self.path), name), "wb") as stream:
            for item in items:
                offset = stream.tell()
                data = planner.resolve_data(item)
                if item.type == WriteItemType.BYTE_IO:
                    stream.write(cast(io.BytesIO, data).getbuffer())
                else:
                    tensor = cast(torch.Tensor, data).detach()
                    if tensor.device.type != "cpu":
                        tensor = tensor.cpu()
                    elif tensor.untyped_storage().nbytes() != tensor.nbytes:
                        tensor = tensor.clone()  # torch.save writes a view's whole storage
                    torch.save(tensor, cast(IO[bytes], stream))
                    del tensor
                del data
                length = stream.tell() - offset
                results.append(
                    WriteResult(index=item.index, size_in_bytes=length, storage_data=_StorageInfo(name, offset, length))
                )
            stream.flush()
            os.fsync(stream.fileno())
        return results

    def finish(self, metadata, results) -> None:
        try:
            super().finish(metadata, results)
        except Exception as exc:
            if self.errors and self.errors[0] is not exc:
                raise self.errors[0] from exc
            raise


def save(state: dict[str, Any], folder: str, group) -> dict[str, dict]:
    """Write this rank's flat `state` (str -> tensor or picklable object; keys unique to the rank,
    so nothing is deduplicated across ranks) into `folder` with DCP, collectively on `group`.
    Returns {file name: {"bytes", "sha256"}} of the files this rank wrote."""
    writer = HashingWriter(folder)
    dcp.save(
        state,
        storage_writer=writer,
        planner=DefaultSavePlanner(flatten_state_dict=False, flatten_sharded_tensors=False),
        process_group=group,
        no_dist=not dist.is_initialized(),
    )
    return {name: meta for name, meta in writer.written.items() if name.endswith(SUFFIX)}


# -- reading ---------------------------------------------------------------------------------------
@dataclass
class ReadStats:
    """What a load read: bytes through read() from the checkpoint's data files (all of them, not
    only this rank's: a rank reading another's file shows here)."""

    bytes_read: int = 0
    files: dict[str, int] = field(default_factory=dict)


@dataclass
class _FileRead:
    """How far a file has been read (front to back), and the SHA-256 of what was read."""

    pos: int = 0
    digest: Any = field(default_factory=hashlib.sha256)
    whole: bool = True  # read from byte 0 without skipping: the digest covers [0, pos)


class VerifyingReader(FileSystemReader):
    """DCP's FileSystemReader reading each file it needs front to back, once, across the loads it
    serves (a rank's skeleton, then its tensors): every requested item in offset order. A file
    named in `expected` (file name -> {"bytes", "sha256"}) is read whole (the gaps between the
    items and what follows them too, hashed, not used) and checked once `check` is set (before
    the load that reads its last items); another file only as far as its items."""

    def __init__(self, path: str, expected: dict[str, dict], stats: ReadStats):
        super().__init__(path)
        self.expected = expected
        self.stats = stats
        self.check = False
        self.files: dict[str, _FileRead] = {}

    def read_data(self, plan: LoadPlan, planner: LoadPlanner) -> Future[None]:
        per_file: dict[str, list] = {}
        for item in plan.items:
            info = self.storage_data[item.storage_index]
            if getattr(info, "transform_descriptors", None):
                raise ValueError(f"{info.relative_path}: stream transforms are not written by acco")
            per_file.setdefault(info.relative_path, []).append(item)
        for name, items in per_file.items():
            self._read_file(name, sorted(items, key=lambda it: self.storage_data[it.storage_index].offset), planner)
        done: Future[None] = Future()
        done.set_result(None)
        return done

    def _read_file(self, name: str, items: list, planner: LoadPlanner) -> None:
        path = os.path.join(os.fspath(self.path), name)
        state = self.files.setdefault(name, _FileRead())
        checked = self.check and name in self.expected
        with open(path, "rb") as f:

            def read(n: int) -> bytes:
                data = f.read(n)
                if len(data) != n:
                    got = state.pos + len(data)
                    raise CorruptFileError(f"{name} is truncated ({got} bytes where more were written)")
                state.digest.update(data)
                state.pos += n
                self.stats.bytes_read += n
                self.stats.files[name] = self.stats.files.get(name, 0) + n
                return data

            if checked and not state.whole:  # an earlier load skipped part of it: hash it from the start
                self.files[name] = state = _FileRead()
            f.seek(state.pos)
            for item in items:
                info = self.storage_data[item.storage_index]
                if info.offset < state.pos:
                    raise ValueError(f"{name}: {item.storage_index.fqn} at byte {info.offset} was already read")
                if info.offset > state.pos:  # a gap: hashed (a file to check), or skipped
                    if name in self.expected:
                        read(info.offset - state.pos)
                    else:
                        f.seek(info.offset)
                        state.pos, state.whole = info.offset, False
                data = read(info.length)
                try:
                    self._deliver(item, data, planner)
                except Exception as exc:  # bytes that do not parse: changed since they were written
                    raise CorruptFileError(
                        f"{name} is corrupt ({item.storage_index.fqn} at byte {info.offset} does not "
                        f"read back: {type(exc).__name__})"
                    ) from exc
            if not checked:
                return
            size = os.fstat(f.fileno()).st_size
            while state.pos < size:  # what follows the last requested item: hashed, not used
                read(min(size - state.pos, 1 << 24))
        meta = self.expected[name]
        if state.pos != meta["bytes"]:
            raise CorruptFileError(f"{name} is truncated or altered ({state.pos} bytes, expected {meta['bytes']})")
        if state.digest.hexdigest() != meta["sha256"]:
            raise CorruptFileError(f"{name} is corrupt (SHA-256 differs from manifest.json)")

    @staticmethod
    def _deliver(item, data: bytes, planner: LoadPlanner) -> None:
        if item.type == LoadItemType.BYTE_IO:
            planner.load_bytes(item, io.BytesIO(data))
            return
        tensor = cast(torch.Tensor, torch.load(io.BytesIO(data), map_location="cpu", weights_only=True))
        for dim, (offset, length) in enumerate(zip(item.storage_offsets, item.lengths)):
            tensor = tensor.narrow(dim, offset, length)
        target = planner.resolve_tensor(item).detach()
        if target.size() != tensor.size():
            fqn = item.storage_index.fqn
            raise ValueError(f"{fqn}: {tuple(tensor.size())} in the file, {tuple(target.size())} here")
        target.copy_(tensor)
        planner.commit_tensor(item, target)


def load(state: dict[str, Any], reader: VerifyingReader, group) -> dict[str, Any]:
    """Fill `state` (this rank's keys: tensors are loaded into in place, other values replaced)
    through `reader` (its folder, the files it checks), collectively on `group`."""
    dcp.load(
        state,
        storage_reader=reader,
        planner=DefaultLoadPlanner(flatten_state_dict=False, flatten_sharded_tensors=False),
        process_group=group,
        no_dist=not dist.is_initialized(),
    )
    return state


def read_metadata(folder: str):
    """DCP's index of the checkpoint in `folder` (keys, sizes, which file holds each item)."""
    return FileSystemReader(folder).read_metadata()
