"""Training-state checkpoints: written at a step boundary that every rank agreed on, atomically, and
found again by `resume=auto`.

    <out_dir>/checkpoints/step_00000012/model.pt       the parameters (the same on every rank: rank 0)
                                        rank0.pt ...   each rank's own state (optimizer shard, data
                                                       position, pending gradients, RNG)
                                        manifest.json  size and SHA-256 of every file

Every file is written under a temporary name and renamed; the folder is built as
`.partial_step_...` and renamed to `step_...` only after the manifest is in it, so a folder named
`step_*` with a manifest is complete. The newest `keep` complete checkpoints stay; an older one is
removed only once a newer one is complete. On resume each candidate is verified against its
manifest (sizes, checksums, world size, the run's settings), newest first; a truncated or corrupt
one is reported and the previous one used."""

from __future__ import annotations

import hashlib
import io
import json
import os
import random
import shutil
import time
from collections.abc import Sequence
from datetime import timedelta

import torch
import torch.distributed as dist
from omegaconf import DictConfig

from ..atomic import atomic_write
from ..config.plain import plain
from ..runtime.disk import Advice

CHECKPOINTS = "checkpoints"
MANIFEST = "manifest.json"
SHARED_FILE = "model.pt"
FORMAT = 1
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
# without them did: such a checkpoint still resumes a run that leaves them at that value
ADDED_SINCE: dict[str, dict[str, object]] = {
    "train": {"grad_dtype": "auto"},
    "clock": {"mode": "real", "micro_batch_s": None, "sync_s": None, "optimizer_step_s": 0.0, "backward_share": None},
}
# per method: settings its config gained since (ddp's backward overlap, issue 40)
ADDED_SINCE_METHOD: dict[str, dict[str, object]] = {"ddp": {"overlap_backward": False, "bucket_mb": None}}


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


def rank_file(rank: int) -> str:
    return f"rank{rank}.pt"


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
    """A checkpoint's identity with the settings added since it was written (ADDED_SINCE) at
    their defaults, where it has none."""
    out = dict(saved)
    for section, defaults in ADDED_SINCE.items():
        out[section] = {**defaults, **(out.get(section) or {})}
    method = out.get("method") or {}
    if isinstance(method, dict) and method.get("name") in ADDED_SINCE_METHOD:
        out["method"] = {**ADDED_SINCE_METHOD[method["name"]], **method}
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
def _write_file(folder: str, name: str, obj) -> dict:
    buf = io.BytesIO()
    torch.save(obj, buf)
    data = buf.getvalue()
    atomic_write(os.path.join(folder, name), data, fsync=True)
    return {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}


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
    shared: dict | None,
    own: dict,
    cfg: DictConfig,
    keep: int = 2,
    group=None,
    disk_advice: Advice | None = None,
) -> str:
    """Write this rank's part of the checkpoint of `step`; rank 0 adds `shared` and, once every
    rank's file is in place, the manifest, then publishes the folder. Returns its path. `group`:
    where the ranks wait for each other (checkpoint_group; None: the default group).

    A disk found full by any rank stops every rank alike (NoSpaceError, the same message): whether
    each one's writes went through rides on the collectives the save makes anyway, and rank 0
    removes the unfinished folder once no rank writes into it; the previous checkpoint stays."""
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
    files: dict = {}

    def write_mine():
        files[rank_file(rank)] = _write_file(partial, rank_file(rank), own)
        if rank == 0:
            files[SHARED_FILE] = _write_file(partial, SHARED_FILE, shared)

    problem = _no_space(write_mine, partial, what, step, disk_advice)
    gathered: list = [None] * world_size
    dist.all_gather_object(gathered, (files, problem), group=group)  # waits for the slowest writer
    _agree(next((p for _, p in gathered if p), None), rank, partial, collective=False)
    problem = None
    if rank == 0:
        manifest = {
            "format": FORMAT,
            "step": step,
            "world_size": world_size,
            "method": cfg.method.name,
            "written_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
            "identity": identity(cfg),
            "files": {k: v for part, _ in gathered for k, v in part.items()},
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
    return final


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


def verify(path: str, world_size: int | None = None) -> dict:
    """The manifest of a complete, intact checkpoint folder; CheckpointError says what is wrong."""
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
        raise CheckpointError(f"checkpoint format {manifest.get('format')!r}, this code reads {FORMAT}")
    if world_size is not None and manifest.get("world_size") != world_size:
        raise CheckpointError(f"written by {manifest.get('world_size')} ranks, this run has {world_size}")
    expected = {SHARED_FILE, *(rank_file(r) for r in range(int(manifest.get("world_size", 0))))}
    if not expected <= set(files):
        raise CheckpointError(f"manifest.json lists {sorted(files)}, expected {sorted(expected)}")
    for name, meta in files.items():
        file_path = os.path.join(path, name)
        if not os.path.exists(file_path):
            raise CheckpointError(f"{name} is missing")
        size = os.path.getsize(file_path)
        if size != meta["bytes"]:
            raise CheckpointError(f"{name} is truncated or altered ({size} bytes, expected {meta['bytes']})")
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
    {"dir": folder, "step": step}, or None to start from scratch. Unusable checkpoints are
    reported through `warn` and skipped in favour of the previous one; CheckpointError when an
    explicitly named checkpoint, or every one there is, cannot be used."""
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
    for _, path in candidates:
        try:
            manifest = verify(path, world_size)
        except CheckpointError as exc:
            problems.append(f"{path}: {exc}")
            if warn is not None:
                warn(f"checkpoint {path} is unusable ({exc}); trying the previous one")
            continue
        diff = _first_difference(with_added_settings(manifest["identity"]), identity(cfg))
        if diff:
            raise CheckpointError(
                f"checkpoint {path} belongs to a different run ({diff}); resume with "
                f"the same settings, or start over with resume=null overwrite=true"
            )
        return {"dir": os.path.abspath(path), "step": manifest["step"]}
    raise CheckpointError(
        f"no usable checkpoint in {folder} ({'; '.join(problems)}); start over with resume=null overwrite=true"
    )


def load(path: str, rank: int) -> tuple[dict, dict]:
    """(shared state, this rank's state) of a verified checkpoint folder."""
    shared = torch.load(os.path.join(path, SHARED_FILE), map_location="cpu", weights_only=False)
    own = torch.load(os.path.join(path, rank_file(rank)), map_location="cpu", weights_only=False)
    return shared, own
