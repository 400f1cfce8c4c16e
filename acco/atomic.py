"""Atomic file writes: a reader sees the old file or the new one, never a half-written one.

The new content goes into a temporary file in the same folder (so the final ``os.replace`` is a
rename within one file system, atomic on POSIX), which replaces the target only once it has been
written completely; if anything fails on the way, the temporary file is removed and the target is
left as it was. Every writer of run files, caches, checkpoints and traces goes through here.

- ``atomic_write(path, data)``: ``data`` is the whole text (str) or bytes, or a callback that writes
  the file itself given the temporary path (``torch.save``, ``tokenizer.save``, ``pq.write_table``).
- ``atomic_open(path, mode)``: a context manager yielding the open temporary file, for content
  written as it is produced (a CSV, a streamed trace).
- ``atomic_write_json(path, obj)``: `obj` as indented JSON (non-finite floats as null, tensors and
  arrays as lists), the form of every small file a run leaves (summary.json, eval.json, notes).

``fsync=True`` makes the content durable before the rename (checkpoints: after a crash of the
machine, not only of the process, the file is either the old one or the complete new one).
"""

from __future__ import annotations

import json
import math
import os
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import IO, Any


def _tmp_path(path: str) -> str:
    """A fresh name beside `path`: hidden, and unique per process and call, so concurrent writers
    of the same target never share a temporary file."""
    folder, name = os.path.split(path)
    return os.path.join(folder, f".{name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}")


def _fsync_file(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextmanager
def atomic_open(
    path: str | os.PathLike[str], mode: str = "w", *, fsync: bool = False, **open_kwargs: Any
) -> Iterator[IO[Any]]:
    """``with atomic_open(path, "w") as f: ...`` writes `f` to a temporary file that replaces
    `path` when the block ends without an exception. `mode` is "w" or "wb" (plus open()'s other
    arguments: encoding, newline). The file is created as ``open`` would (mode 0666 minus umask)."""
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_open: mode must be 'w' or 'wb', got {mode!r}")
    target = os.fspath(path)
    tmp = _tmp_path(target)
    try:
        # "x": created here, never an existing file followed through a link
        with open(tmp, mode.replace("w", "x"), **open_kwargs) as f:
            yield f
            f.flush()
            if fsync:
                os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        _remove_quietly(tmp)
        raise


def atomic_write(
    path: str | os.PathLike[str],
    data: str | bytes | Callable[[str], object],
    *,
    fsync: bool = False,
    encoding: str = "utf-8",
) -> None:
    """Replace `path` atomically by `data`: text (written with `encoding`), bytes, or a callback
    ``data(tmp_path)`` that writes the whole file at ``tmp_path`` (its return value is ignored)."""
    if isinstance(data, (str, bytes)):
        binary = isinstance(data, bytes)
        with atomic_open(path, "wb" if binary else "w", fsync=fsync, **({} if binary else {"encoding": encoding})) as f:
            f.write(data)
        return
    target = os.fspath(path)
    tmp = _tmp_path(target)
    try:
        with open(tmp, "x"):  # reserve the name with open()'s permissions; the callback overwrites it
            pass
        data(tmp)
        if fsync:
            _fsync_file(tmp)
        os.replace(tmp, target)
    except BaseException:
        _remove_quietly(tmp)
        raise


def _remove_quietly(path: str) -> None:
    try:
        os.remove(path)
    except FileNotFoundError:
        pass


def atomic_write_json(path: str | os.PathLike[str], obj: Any) -> None:
    with atomic_open(path, "w") as f:
        json.dump(obj, f, indent=2, default=_json_default)
        f.write("\n")


def _json_default(o: Any) -> Any:
    if isinstance(o, float) and not math.isfinite(o):
        return None
    if hasattr(o, "tolist"):
        return o.tolist()
    return str(o)
