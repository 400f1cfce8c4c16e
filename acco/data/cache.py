"""The on-disk cache shared by the data pipelines: one folder per key, built once, published
atomically, safe under concurrent callers.

``build_once(cache_dir, name, build, load)``:

* returns ``load(<cache_dir>/<name>)`` when that folder exists (published folders are complete);
* otherwise takes an exclusive ``fcntl.flock`` on ``<cache_dir>/<name>.lock``, checks again (another
  process may have built it while we waited), removes leftovers ``.tmp-<name>-*`` of a crashed build,
  calls ``build(tmp)`` on a fresh temporary folder and publishes it with one ``os.rename``. A failed
  build leaves nothing behind. The build runs with ``datasets``' progress bars off and tqdm set up
  for the processes it forks (``fork_safe_tqdm``).

``cache_key(obj)`` is the 16-hex-digit SHA-256 prefix of the canonical JSON of ``obj``;
``path_fingerprint(path)`` describes local files by name, size and modification time, so that
editing or replacing a data file gives another key.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import uuid
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

__all__ = [
    "build_once",
    "cache_key",
    "exclusive_lock",
    "fork_safe_tqdm",
    "path_fingerprint",
    "quiet_datasets",
    "untracked_tqdm_lock",
]

T = TypeVar("T")


def cache_key(obj) -> str:
    """SHA-256 (16 hex digits) of the canonical JSON of ``obj`` (sorted keys)."""
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _visible(rel: Path) -> bool:
    return not any(part.startswith(".") for part in rel.parts)


def path_fingerprint(path: str | os.PathLike) -> dict:
    """``{"path": <absolute real path>, "files": [[relative name, size, mtime_ns], ...]}``.

    A file gives one entry (its name relative to itself is ``"."``); a folder gives every
    non-hidden file below it, sorted (hidden entries such as ``.cache/`` of ``hf
    download`` are skipped, as the loaders skip them).
    """
    p = Path(path).resolve()
    if p.is_file():
        st = p.stat()
        return {"path": str(p), "files": [[".", st.st_size, st.st_mtime_ns]]}
    files = []
    for f in sorted(p.rglob("*")):
        rel = f.relative_to(p)
        if f.is_file() and _visible(rel):
            st = f.stat()
            files.append([rel.as_posix(), st.st_size, st.st_mtime_ns])
    return {"path": str(p), "files": files}


@contextmanager
def exclusive_lock(path: Path):
    with open(path, "a+") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def untracked_tqdm_lock() -> None:
    """Give tqdm, before its first bar, a lock the resource tracker never sees. tqdm's own is a
    ``multiprocessing.RLock``: in a spawned process (our workers with dist.start_method=spawn, on
    GPU by default) a named semaphore registered with the tracker, which the workers' ``os._exit``
    leaves behind ("resource_tracker: There appear to be 1 leaked semaphore objects" when the run
    ends). A fork-context lock is unlinked at creation (nothing to track) and still serves the
    processes this one forks."""
    import multiprocessing

    import tqdm

    if not hasattr(tqdm.tqdm, "_lock"):
        tqdm.tqdm.set_lock(multiprocessing.get_context("fork").RLock())


@contextmanager
def fork_safe_tqdm():
    """tqdm as the forked tokenizer processes of a build need it (``datasets`` makes tqdm bars,
    disabled ones too, in the process that forks):

    * no monitor thread: it takes tqdm's lock every 10 s, and a fork at that moment would leave the
      lock held forever in the child;
    * a lock the resource tracker never sees (``untracked_tqdm_lock``).

    The monitor interval is restored afterwards."""
    import tqdm

    untracked_tqdm_lock()
    interval = tqdm.tqdm.monitor_interval
    tqdm.tqdm.monitor_interval = 0
    if tqdm.tqdm.monitor is not None:
        tqdm.tqdm.monitor.exit()
        tqdm.tqdm.monitor = None
    try:
        yield
    finally:
        tqdm.tqdm.monitor_interval = interval


@contextmanager
def quiet_datasets():
    """Silence ``datasets`` progress bars for a build, restoring the caller's setting."""
    import datasets

    was_enabled = datasets.is_progress_bar_enabled()
    datasets.disable_progress_bars()
    try:
        yield
    finally:
        if was_enabled:
            datasets.enable_progress_bars()


def build_once(cache_dir: str | os.PathLike, name: str, build: Callable[[Path], None], load: Callable[[Path], T]) -> T:
    """``load`` the published folder ``<cache_dir>/<name>``, building it first if needed."""
    cache_dir = Path(cache_dir)
    final = cache_dir / name
    if final.is_dir():  # published folders are always complete
        return load(final)
    cache_dir.mkdir(parents=True, exist_ok=True)
    with exclusive_lock(cache_dir / f"{name}.lock"):
        if final.is_dir():  # another process built it while we waited
            return load(final)
        # we hold the lock: temporary folders of this key are leftovers of a crashed build
        for stale in cache_dir.glob(f".tmp-{name}-*"):
            shutil.rmtree(stale, ignore_errors=True)
        tmp = cache_dir / f".tmp-{name}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        tmp.mkdir()
        try:
            with quiet_datasets(), fork_safe_tqdm():
                build(tmp)
            os.rename(tmp, final)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    return load(final)
