"""Training-state checkpoints: written at a step boundary that every rank agreed on, through
`torch.distributed.checkpoint` (DCP) as large-scale training writes them, and found again by
`resume=auto`.

    <out_dir>/checkpoints/step_00000012/__0_0.distcp   rank 0's part: its own state (optimizer
                                        __1_0.distcp   shard, data position, pending gradients,
                                        ...            RNG) and its 1/N of the parameters
                                        .metadata      DCP's index of every item (rank 0)
                                        manifest.json  step, world size, the run's settings, and
                                                       size and SHA-256 of every rank's file

Each rank streams its own tensors to its own file in pieces (checkpoint_state), so a
save holds no second copy of the state in host memory, and computes its file's SHA-256 from the
bytes as they are written (checkpoint_io). On resume each rank reads DCP's metadata,
the manifest and its own file only, once, checking that file's SHA-256 as it reads; the parameters,
the same on every rank, come back as each rank's share, exchanged after loading.

The folder is built as `.partial_step_...` and renamed to `step_...` only after the manifest is in
it, so a folder named `step_*` with a manifest is complete. The newest `keep` complete checkpoints
stay; an older one is removed only once a newer one is complete. Before any worker starts, a resume
looks at the manifests and the files' sizes only (nothing is read): a truncated or unfinished
checkpoint is reported and the previous one used; a file whose bytes changed at the same size is
found by the rank reading it, and every rank then goes on to the previous checkpoint."""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING

import torch
import torch.distributed as dist
from omegaconf import DictConfig

from ..atomic import atomic_write
from ..config.plain import plain
from ..methods import METHODS
from ..runtime.disk import Advice, is_no_space
from ..runtime.host_io import bytes_read, peak_rss_bytes, reset_peak_rss, rss_bytes
from .checkpoint_state import (
    exchange_shares,
    load_targets,
    piece_numel,
    rebuild,
    shared_refs,
    skeleton_key,
    split_state,
)

if TYPE_CHECKING:
    from torch.distributed.checkpoint.api import CheckpointException

# torch.distributed.checkpoint (and checkpoint_io, built on it) is imported when a
# checkpoint is saved or loaded, not with this module: its import (FSDP, DTensor, ~700 modules) made
# every training step of a run ~4 % slower here (ACCO, 2 ranks, measured against the tree before it)
DCP_METADATA = ".metadata"  # DCP's own index of a checkpoint's items (checkpoint_io.METADATA)
CHECKPOINTS = "checkpoints"
MANIFEST = "manifest.json"
FORMAT = 2  # 1: one torch.save file per rank (model.pt, rank<r>.pt), before 2026-12-05
# keys that say how a run is executed or reported, not what it computes: a resumed run may change them
NOT_IDENTITY = {
    "out_dir",
    "results_root",
    "overwrite",
    "resume",
    "launcher",
    "device",
    "fault",
    "dist",
    "link",
    "logger",
    "experiment",
    "scale",
    "layout",
    "final_eval",
}
NOT_IDENTITY_TRAIN = {
    "log_every",
    "trace",
    "trace_steps",
    "threads",
    "checkpoint_every",
    "keep_checkpoints",
    "save_model",
    "save_final_params",
    "audit_collectives",
}
# settings added after checkpoints were first written, with the value that means what a checkpoint
# without them did: such a checkpoint still resumes a run that leaves them at that value (a
# method's own settings: its spec's `added_settings`, acco/methods/)
ADDED_SINCE: dict[str, dict[str, object]] = {
    "train": {"grad_dtype": "auto"},
    "clock": {"mode": "real", "micro_batch_s": None, "sync_s": None, "optimizer_step_s": 0.0, "backward_share": None},
}


# dist.checkpoint_timeout_s when a config has none: a paper-scale save writes tens of GB (fig8's ~80 GB)
DEFAULT_CHECKPOINT_TIMEOUT_S = 1800.0


class CheckpointError(ValueError):
    pass


def checkpoint_group(cfg: DictConfig, world_size: int):
    """A gloo group over every rank for the saves' cross-rank waits (rank 0's folder made, every
    rank's files written, the folder published): its timeout is dist.checkpoint_timeout_s, sized
    for writing the checkpoint, not the start-up's dist.timeout_s nor a training step's. Host
    objects only, so gloo on GPU as well. Call on every rank, at start-up (new_group is a collective)."""
    try:
        timeout_s = cfg.dist.checkpoint_timeout_s
    except Exception:  # noqa: BLE001 - a config written before the key existed (MISSING or absent)
        timeout_s = None
    timeout = timedelta(seconds=float(timeout_s or DEFAULT_CHECKPOINT_TIMEOUT_S))
    return dist.new_group(list(range(world_size)), timeout=timeout, backend="gloo")


def step_name(step: int) -> str:
    return f"step_{step:08d}"


def identity(cfg: DictConfig | dict) -> dict:
    """The settings a checkpoint's training state depends on (the resumed run must match them):
    plain data, written to the manifest."""
    run: dict = plain(cfg)
    out = {k: v for k, v in run.items() if k not in NOT_IDENTITY and not k.startswith("_")}
    out["train"] = {k: v for k, v in (run.get("train") or {}).items() if k not in NOT_IDENTITY_TRAIN}
    data = dict(run.get("data") or {})
    data.pop("cache_dir", None)  # where the data is cached, not what it is
    data.pop("num_proc", None)  # how many processes build it, not what it is
    out["data"] = data
    return json.loads(json.dumps(out, sort_keys=True, default=str))


def with_added_settings(saved: dict) -> dict:
    """A checkpoint's identity with the settings added since it was written (ADDED_SINCE, and its
    method's spec's `added_settings`) at their defaults, where it has none."""
    out = dict(saved)
    for section, defaults in ADDED_SINCE.items():
        out[section] = {**defaults, **(out.get(section) or {})}
    method = out.get("method") or {}
    if isinstance(method, dict) and method.get("name") in METHODS:
        out["method"] = {**dict(METHODS[method["name"]].added_settings), **method}
    return out


def _first_difference(a, b, prefix: str = "") -> str | None:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            diff = _first_difference(a.get(key), b.get(key), f"{prefix}{key}.")
            if diff:
                return diff
        return None
    return None if a == b else f"{prefix[:-1]}: {a!r} in the checkpoint, {b!r} now"


# -- RNG states (per rank) ----------------------------------------------------------------------
def rng_state() -> dict:
    state = {"python": random.getstate(), "torch": torch.get_rng_state()}
    try:
        import numpy as np

        state["numpy"] = np.random.get_state()
    except ImportError:
        pass
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict) -> None:
    random.setstate(state["python"])
    torch.set_rng_state(state["torch"])
    if "numpy" in state:
        import numpy as np

        np.random.set_state(state["numpy"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


# -- writing (collective: every rank calls save at the same step) -------------------------------
@dataclass(frozen=True)
class SaveStats:
    """One rank's save, measured: what it wrote and what the save cost it in host memory."""

    state_bytes: int  # the tensors of its part (its own state and its share of the shared one)
    file_bytes: int  # its files on disk
    seconds: float
    rss_before: int | None  # resident memory just before the save
    rss_peak: int | None  # the highest resident memory during it (None: not measurable here)

    @property
    def peak_rss_over_state(self) -> float | None:
        if self.rss_before is None or self.rss_peak is None or not self.state_bytes:
            return None
        return (self.rss_peak - self.rss_before) / self.state_bytes


@dataclass(frozen=True)
class Saved:
    path: str
    stats: SaveStats


def _fsync_dir(path: str) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def save(
    out_dir: str,
    step: int,
    rank: int,
    world_size: int,
    shared: dict,
    own: dict,
    cfg: DictConfig,
    keep: int = 2,
    group=None,
    disk_advice: Advice | None = None,
) -> Saved:
    """Write this rank's part of the checkpoint of `step` (its own state `own` and its share of
    `shared`, the state every rank holds alike: every rank passes it) with DCP; rank 0 then writes
    the manifest and publishes the folder. `group`: where the ranks wait for each other
    (checkpoint_group; None: the default group).

    A disk found full by any rank stops every rank alike (NoSpaceError, the same message): DCP
    gathers every rank's write errors onto every rank, and rank 0 removes the unfinished folder
    once no rank writes into it; the previous checkpoint stays."""
    root = os.path.join(out_dir, CHECKPOINTS)
    name = step_name(step)
    partial = os.path.join(root, f".partial_{name}")
    final = os.path.join(root, name)
    what = f"checkpoint {name}"
    problem = None
    if rank == 0:
        shutil.rmtree(partial, ignore_errors=True)  # left by a run that died while writing
        problem = _no_space(lambda: os.makedirs(partial), partial, what, step, disk_advice)
    _agree(problem, rank, partial, group=group)  # instead of a barrier: rank 0's folder is there
    items, _ = split_state(shared, own, rank, world_size)
    state_bytes = sum(t.numel() * t.element_size() for t in items.values() if isinstance(t, torch.Tensor))
    rss_before = rss_bytes() if reset_peak_rss() else None
    start = time.perf_counter()
    files: dict = {}

    problem = _no_space(lambda: files.update(_dcp_save(items, partial, group)), partial, what, step, disk_advice)
    seconds = time.perf_counter() - start
    rss_peak = peak_rss_bytes() if rss_before is not None else None
    items.clear()
    _agree(problem, rank, partial, collective=False)  # DCP's error is every rank's: no vote needed
    gathered: list = [None] * world_size
    dist.all_gather_object(gathered, (rank, files), group=group)
    problem = None
    if rank == 0:
        manifest = {
            "format": FORMAT,
            "step": step,
            "world_size": world_size,
            "method": cfg.method.name,
            "written_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
            "identity": identity(cfg),
            "files": {
                **{f: {**meta, "rank": r} for r, part in gathered for f, meta in part.items()},
                DCP_METADATA: {"bytes": os.path.getsize(os.path.join(partial, DCP_METADATA))},
            },
        }
        problem = _no_space(
            lambda: atomic_write(os.path.join(partial, MANIFEST), json.dumps(manifest, indent=1), fsync=True),
            partial,
            what,
            step,
            disk_advice,
        )
        if problem is None:
            _fsync_dir(partial)
            if os.path.exists(final):  # the same step saved again (a resumed run's first checkpoint)
                shutil.rmtree(final)
            os.rename(partial, final)
            _fsync_dir(root)
            prune(root, keep)
    _agree(problem, rank, partial, group=group)  # instead of a barrier: published, or every rank stops
    file_bytes = sum(meta["bytes"] for meta in files.values())
    return Saved(final, SaveStats(state_bytes, file_bytes, seconds, rss_before, rss_peak))


def _dcp_save(items: dict, folder: str, group) -> dict[str, dict]:
    from torch.distributed.checkpoint.api import CheckpointException

    from . import checkpoint_io

    try:
        return checkpoint_io.save(items, folder, group)
    except CheckpointException as exc:  # every rank has it: a full disk on any rank is every rank's
        raise _first_failure(exc) from None


def _first_failure(exc: CheckpointException) -> BaseException:
    """The error behind DCP's CheckpointException that says the most: a full disk on any rank
    first (so every rank reports it alike), else the lowest rank's."""
    errors = [failure[0] if isinstance(failure, tuple) else failure for _, failure in sorted(exc.failures.items())]
    errors = [e for e in errors if isinstance(e, BaseException)]
    for error in errors:
        if is_no_space(error):
            return error
    return errors[0] if errors else exc


def _no_space(write, path: str, what: str, step: int, advice: Advice | None) -> str | None:
    """Run `write`; the one-line report if the disk was full (other errors propagate)."""
    from ..runtime.disk import NoSpaceError, writing

    try:
        with writing(path, what, step, advice=advice):
            write()
    except NoSpaceError as exc:
        return str(exc)
    return None


def _agree(problem: str | None, rank: int, partial: str, collective: bool = True, group=None) -> None:
    """Every rank learns rank 0's `problem` (`collective`; else `problem` is already every rank's)
    and, if there is one, stops with it; rank 0 first removes the unfinished folder."""
    if collective:
        box = [problem]
        dist.broadcast_object_list(box, src=0, group=group)
        problem = box[0]
    if problem is None:
        return
    from ..runtime.disk import NoSpaceError

    if rank == 0:
        shutil.rmtree(partial, ignore_errors=True)
    raise NoSpaceError(problem)


def prune(root: str, keep: int) -> None:
    """Remove all but the newest `keep` complete checkpoints (never the only complete one)."""
    complete = [path for _, path in list_checkpoints(root) if os.path.exists(os.path.join(path, MANIFEST))]
    for path in complete[max(1, keep) :]:
        shutil.rmtree(path, ignore_errors=True)


# -- finding and verifying ------------------------------------------------------------------------
def list_checkpoints(root: str) -> list[tuple[int, str]]:
    """(step, folder) of the published checkpoint folders under `root`, newest first."""
    if not os.path.isdir(root):
        return []
    found = []
    for entry in os.listdir(root):
        if entry.startswith("step_") and entry[5:].isdigit():
            found.append((int(entry[5:]), os.path.join(root, entry)))
    return sorted(found, reverse=True)


def verify(path: str, world_size: int | None = None, full: bool = False) -> dict:
    """The manifest of a complete checkpoint folder whose files are all there at their written
    sizes (a look at the manifest and the files' sizes: nothing read); `full`: every file's SHA-256
    checked as well (reads everything: a check of a copied checkpoint, not what a resume does, which
    checks each rank's own file as it reads it). CheckpointError says what is wrong."""
    manifest_path = os.path.join(path, MANIFEST)
    if not os.path.exists(manifest_path):
        raise CheckpointError("no manifest.json: it was not finished")
    try:
        with open(manifest_path) as f:
            manifest = json.load(f)
        files = manifest["files"]
        step = int(manifest["step"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise CheckpointError(f"unreadable manifest.json ({exc})") from None
    if manifest.get("format") != FORMAT:
        raise CheckpointError(
            f"written in checkpoint format {manifest.get('format')!r} (one torch.save file per rank, "
            f"acco before 2026-12-05); this acco reads format {FORMAT} (torch.distributed.checkpoint)"
        )
    if world_size is not None and manifest.get("world_size") != world_size:
        raise CheckpointError(f"written by {manifest.get('world_size')} ranks, this run has {world_size}")
    ranks = {meta.get("rank") for meta in files.values()}
    missing = [r for r in range(int(manifest.get("world_size", 0))) if r not in ranks]
    if DCP_METADATA not in files or missing:
        raise CheckpointError(f"manifest.json lists {sorted(files)}: no file of rank(s) {missing} or no .metadata")
    for name, meta in files.items():
        file_path = os.path.join(path, name)
        if not os.path.exists(file_path):
            raise CheckpointError(f"{name} is missing")
        size = os.path.getsize(file_path)
        if size != meta["bytes"]:
            raise CheckpointError(f"{name} is truncated or altered ({size} bytes, expected {meta['bytes']})")
        if full and "sha256" in meta:
            digest = hashlib.sha256()
            with open(file_path, "rb") as f:
                for chunk in iter(lambda: f.read(1 << 24), b""):
                    digest.update(chunk)
            if digest.hexdigest() != meta["sha256"]:
                raise CheckpointError(f"{name} is corrupt (SHA-256 differs from manifest.json)")
    manifest["step"] = step
    return manifest


def resolve_resume(cfg: DictConfig, world_size: int, warn=None) -> dict | None:
    """What `resume` (null | auto | <checkpoint folder> | <run folder>) continues from:
    {"dir": folder, "step": step, "fallbacks": [older usable folders, newest first]}, or None to
    start from scratch. Checkpoints that are not complete (manifest, files at their sizes) are
    reported through `warn` and skipped in favour of the previous one; CheckpointError when an
    explicitly named checkpoint, or every one there is, cannot be used. A file whose bytes changed
    at the same size is found by the rank that reads it (Trainer.load_checkpoint), which then goes
    on to the fallbacks."""
    resume = cfg.resume
    if resume in (None, "", "none", "null"):
        return None
    if resume == "auto":
        folder, explicit = cfg.out_dir, False
    else:
        folder, explicit = str(resume), True
        if not os.path.isdir(folder):
            raise CheckpointError(
                f"resume={resume}: no such folder; give a checkpoint folder "
                f"(<out_dir>/{CHECKPOINTS}/step_N), a run folder, or resume=auto"
            )
    if os.path.exists(os.path.join(folder, MANIFEST)) or os.path.basename(folder.rstrip("/")).startswith("step_"):
        candidates: Sequence[tuple[int | None, str]] = [(None, folder)]
    else:
        candidates = list_checkpoints(os.path.join(folder, CHECKPOINTS))
    if not candidates:
        if explicit:
            raise CheckpointError(
                f"resume={resume}: no checkpoint there (expected {CHECKPOINTS}/step_N "
                f"folders); use resume=auto to start over when there is none"
            )
        return None
    problems = []
    usable: list[tuple[str, int]] = []
    for _, path in candidates:
        try:
            manifest = verify(path, world_size)
        except CheckpointError as exc:
            problems.append(f"{path}: {exc}")
            if warn is not None and not usable:
                warn(f"checkpoint {path} is unusable ({exc}); trying the previous one")
            continue
        diff = _first_difference(with_added_settings(manifest["identity"]), identity(cfg))
        if diff:
            if usable:
                break  # older ones belong to another run too: fallbacks end here
            raise CheckpointError(
                f"checkpoint {path} belongs to a different run ({diff}); resume with "
                f"the same settings, or start over with resume=null overwrite=true"
            )
        usable.append((os.path.abspath(path), manifest["step"]))
    if usable:
        (path, step), rest = usable[0], usable[1:]
        return {"dir": path, "step": step, "fallbacks": [p for p, _ in rest]}
    raise CheckpointError(
        f"no usable checkpoint in {folder} ({'; '.join(problems)}); start over with resume=null overwrite=true"
    )


# -- reading (collective: every rank loads the same folder) -------------------------------------
@dataclass(frozen=True)
class LoadStats:
    """One rank's load, measured: what it read against what it had written."""

    own_file_bytes: int  # this rank's files in the checkpoint
    bytes_read: int | None  # every read() of the load (/proc/self/io rchar; None: not measurable)
    data_bytes_read: int  # of which from the checkpoint's data files
    seconds: float

    @property
    def read_over_own(self) -> float | None:
        if self.bytes_read is None or not self.own_file_bytes:
            return None
        return self.bytes_read / self.own_file_bytes


def load(
    path: str,
    rank: int,
    world_size: int,
    live_shared: dict,
    live_own: dict,
    group=None,
) -> tuple[dict, dict, LoadStats]:
    """(shared state, this rank's own state, what the load read) of a complete checkpoint folder
    (verify). Collective on `group` (gloo). Each rank reads DCP's metadata, the manifest and its
    own file, front to back, checked against the SHA-256 written with it; a tensor of the live
    state `live_shared`/`live_own` (as the backend gives it now) of the same shape and dtype is
    loaded in place, the rest into new host tensors. The shared state's shares are then exchanged
    (broadcast on `group`). CheckpointError: a rank's file is corrupt, on every rank alike."""
    with open(os.path.join(path, MANIFEST)) as f:
        manifest = json.load(f)
    expected = {name: meta for name, meta in manifest["files"].items() if "sha256" in meta}
    own_bytes = sum(meta["bytes"] for meta in manifest["files"].values() if meta.get("rank") == rank)
    read_before = bytes_read()
    start = time.perf_counter()
    from torch.distributed.checkpoint.api import CheckpointException

    from . import checkpoint_io

    stats = checkpoint_io.ReadStats()
    reader = checkpoint_io.VerifyingReader(path, expected, stats)
    key = skeleton_key(rank)
    try:  # its skeleton first (the file's first item: what its tensors are), then the rest, checked whole
        skeleton = checkpoint_io.load({key: None}, reader, group)[key]
        _, live = split_state(live_shared, live_own, rank, world_size)
        items, tensors = load_targets(skeleton, live, rank, world_size)
        reader.check = True
        checkpoint_io.load(items, reader, group)
    except CheckpointException as exc:
        raise CheckpointError(f"checkpoint {path} is unusable: {_failure_line(exc)}") from None
    del items
    broadcast = _share_broadcast(group)
    for ref in shared_refs(skeleton):
        exchange_shares(tensors[ref.key], world_size, broadcast)
    read_after = bytes_read()
    read = None if read_before is None or read_after is None else read_after - read_before
    load_stats = LoadStats(own_bytes, read, stats.bytes_read, time.perf_counter() - start)
    return rebuild(skeleton["shared"], tensors), rebuild(skeleton["own"], tensors), load_stats


def _failure_line(exc: CheckpointException) -> str:
    """One line for a load's failure: the lowest failing rank and its error."""
    rank, failure = sorted(exc.failures.items())[0]
    error = failure[0] if isinstance(failure, tuple) else failure
    return f"rank {rank}: {' '.join(str(error).split())}"


def _share_broadcast(group):
    """Send rank `src`'s share to every rank, in place, on the gloo `group`: host tensors
    directly, device tensors through host memory one piece at a time."""

    def broadcast(share: torch.Tensor, src: int) -> None:
        if share.device.type == "cpu":
            dist.broadcast(share, src, group=group)
            return
        step = piece_numel(share)
        for i in range(0, share.numel(), step):
            part = share[i : i + step]
            host = part.cpu()
            dist.broadcast(host, src, group=group)
            part.copy_(host)

    return broadcast
