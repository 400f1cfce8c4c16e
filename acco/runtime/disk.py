"""A write that finds the disk full turns into one clear error (NoSpaceError, not a traceback); the
reserve that keeps room for the failure report; the sweep of the leftovers of writers that died.
The estimate of what a run writes, checked before it starts, is the harness's check_disk: it also says
by how much a full disk falls short and which setting shrinks the run, an `Advice` its writers are
handed (the trainer, for its checkpoints; the worker, for its own files)."""

from __future__ import annotations

import errno
import glob
import os
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from ..engine.trace import PART

GB = 1e9
RESERVE = ".acco-reserve"  # pre-allocated by rank 0: freed so that the failure report still fits
RESERVE_BYTES = 256 * 1024
NO_SPACE_ERRNOS = {errno.ENOSPC, errno.EDQUOT}
NO_SPACE_TEXT = ("no space left on device", "os error 28", "storagefull", "disk quota exceeded", "os error 122")
# (bytes the write needed) -> (bytes the run is short or None, the setting that shrinks the run or ""):
# what a full disk's one line adds, from the run's estimate (the harness's shortfall_advice)
Advice = Callable[[int | None], tuple[int | None, str]]


def fmt_gb(n: float) -> str:
    return f"{n / GB:.3g} GB"


def folder_bytes(path: str) -> int:
    if os.path.isfile(path):
        return os.path.getsize(path)
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += os.path.getsize(os.path.join(root, name))
            except OSError:
                pass
    return total


def nearest_existing(path: str) -> str:
    path = os.path.abspath(path)
    while not os.path.exists(path):
        path = os.path.dirname(path)
    return path


def free_bytes(path: str) -> int:
    return shutil.disk_usage(nearest_existing(path)).free


def filesystem(path: str) -> str:
    """The mount point holding `path` and its type, e.g. "/scratch (lustre)"."""
    path = os.path.realpath(nearest_existing(path))
    best, kind = "/", ""
    try:
        with open("/proc/mounts") as f:
            for line in f:
                fields = line.split()
                if len(fields) < 3:
                    continue
                mount = fields[1].replace("\\040", " ")
                inside = path == mount or path.startswith(mount.rstrip("/") + "/")
                if inside and len(mount) >= len(best):
                    best, kind = mount, fields[2]
    except OSError:
        pass
    return f"{best} ({kind})" if kind else best


# -- a write that finds the disk full -------------------------------------------------------------
class NoSpaceError(OSError):
    """A run file could not be written for lack of space; str() is the one line to report."""

    def __init__(self, message: str):
        super().__init__(errno.ENOSPC, message)
        self.message = message

    def __str__(self) -> str:
        return self.message


def is_no_space(exc: BaseException | None) -> bool:
    """Whether `exc` (or an exception it came from) says the disk or the quota is full."""
    seen = 0
    while exc is not None and seen < 10:
        if isinstance(exc, NoSpaceError):
            return True
        if isinstance(exc, OSError) and exc.errno in NO_SPACE_ERRNOS:
            return True
        if any(t in str(exc).lower() for t in NO_SPACE_TEXT):
            return True
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return False


def no_space_message(
    path: str, what: str, step: int | None, need: int | None = None, advice: Advice | None = None
) -> str:
    """The one line: no space left on <filesystem> while writing <what> at step N; free X GB or set ..."""
    shortfall, knob = need, ""
    if advice is not None:
        try:
            shortfall, knob = advice(need)
        except Exception:  # the message must come out whatever the estimate can do
            pass
    where = f" at step {step}" if step is not None else ""
    amount = f"free {fmt_gb(shortfall)}" if shortfall and shortfall > 0 else "free space"
    also = f", set {knob}" if knob else ""
    return (
        f"no space left on {filesystem(path)} while writing {what}{where}; {amount} there{also} "
        f"or set out_dir to a larger filesystem, then continue with resume=auto"
    )


@contextmanager
def writing(
    path: str, what: str, step: int | None = None, need: int | None = None, advice: Advice | None = None
) -> Iterator[None]:
    """Turn a write's lack of space into NoSpaceError with the one line to report. `need`: the
    bytes the write needed (a write that fails without an errno, torch.save's RuntimeError, counts
    as lack of space when fewer are free); `advice`: the run's shortfall and the setting to change."""
    try:
        yield
    except NoSpaceError:
        raise
    except Exception as exc:
        full = is_no_space(exc) or (need is not None and free_bytes(path) < need)
        if not full:
            raise
        raise NoSpaceError(no_space_message(path, what, step, need, advice)) from exc


# -- the reserve and the sweep ---------------------------------------------------------------------
def reserve(out_dir: str) -> None:
    """Hold back room for the failure report (summary.json, failure notes): released first when
    the disk is full, and at the end of the run."""
    path = os.path.join(out_dir, RESERVE)
    try:
        with open(path, "wb") as f:
            os.posix_fallocate(f.fileno(), 0, RESERVE_BYTES)
    except OSError:  # already full, or no fallocate here: no reserve
        release(out_dir)


def release(out_dir: str) -> bool:
    try:
        os.remove(os.path.join(out_dir, RESERVE))
        return True
    except OSError:
        return False


# what our writers leave while they write: an atomic write's temporary files, a checkpoint's
# unfinished folders, a trace's parts, the model being saved
LEFTOVERS = (".*.tmp-*", "checkpoints/.partial_step_*", "checkpoints/*/.*.tmp-*", "failures/.*.tmp-*", ".model.partial")


def sweep(out_dir: str, traces: bool = True) -> list[str]:
    """Remove the leftovers of writers that are gone (no writer of this run folder may be alive:
    the launcher holds its lock, or every worker has ended). `traces`: the ranks' trace parts too."""
    patterns = [*LEFTOVERS, PART.format(rank="*")] if traces else list(LEFTOVERS)
    patterns.append(RESERVE)
    removed = []
    for pattern in patterns:
        for path in glob.glob(os.path.join(glob.escape(out_dir), pattern)):
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                try:
                    os.remove(path)
                except OSError:
                    continue
            removed.append(path)
    return removed
