"""Disk space before a run starts: what it will write, against what its filesystem holds (and the data
cache's), and, should a write find the disk full after all, the shortfall and the setting that shrinks
the run (advice_for: handed to the run's writers). The write-time half, which the ranks use as they
write (a full disk's one error, the reserve for the failure report, the sweep of dead writers'
leftovers), is acco.runtime.disk.

The estimate (`estimate`) counts, in bytes:
  * checkpoints: the parameters (once, in the model's storage dtype), every rank's optimizer shard
    (Table 1's K bytes per parameter: fp32 master + AdamW moments), and for
    dpu/wp/acco every rank's pending gradients (a full model-sized buffer each), plus 64 KiB per rank
    (RNG states, data position); at most train.keep_checkpoints + 1 of them are on disk at once (the
    newest ones plus the one being written, pruned only once it is complete);
  * the saved model (parameters in their dtype + the tokenizer), the final fp32 parameters;
  * the trace: a rough 200 bytes per event, per rank per step and round 2·accum + 10 events (the
    micro-batches, the sync's stages, idle marks; adaptive mode may compute more), for the steps of
    train.trace_steps, twice (the ranks' parts and the merged trace.json exist together);
  * metrics.csv (200 bytes a row) and the small files (summary.json, config.yaml, eval.json,
    failure notes: 256 KiB, which is also what `reserve` holds back for the failure report).
Not counted: the data cache (its own filesystem check, `data_cache_problem`) and a task's own files.
"""

from __future__ import annotations

import glob
import json
import os
from dataclasses import dataclass, field

from ...config.plain import plain
from ...config.schema import RunView, changed
from ...methods import get as get_method
from ...runtime.disk import RESERVE_BYTES, Advice, filesystem, fmt_gb, folder_bytes, free_bytes

SMALL_FILES_BYTES = RESERVE_BYTES  # summary.json, config.yaml, eval.json, failure notes
TRACE_EVENT_BYTES = 200
METRICS_ROW_BYTES = 200
TOKENIZER_BYTES = 4 * 1024 * 1024  # a saved tokenizer: up to a few MB (GPT-Neo's ~2 MB)
OFF_SWITCH = "ACCO_DISK_CHECK"  # =0: skip the up-front check (an estimate wrong for a filesystem)


@dataclass
class DiskEstimate:
    items: dict[str, int] = field(default_factory=dict)  # bytes the run will add, by what they are
    notes: list[str] = field(default_factory=list)  # what could not be estimated

    @property
    def total(self) -> int:
        return sum(self.items.values())

    def describe(self) -> str:
        parts = ", ".join(f"{k} {fmt_gb(v)}" for k, v in self.items.items() if v)
        return f"{fmt_gb(self.total)} ({parts})" if parts else fmt_gb(self.total)


# -- the estimate --------------------------------------------------------------------------------
def planned_steps(cfg: RunView) -> int | None:
    steps = (cfg.get("train") or {}).get("steps")
    return int(steps) if steps else None


def checkpoints_on_disk(cfg: RunView, existing: int) -> int:
    """At most how many checkpoints the run has on disk at once, the `existing` complete ones of a
    resumed run included."""
    train = cfg["train"]
    every = int(train.get("checkpoint_every") or 0)
    keep = max(1, int(train.get("keep_checkpoints") or 2))
    if every <= 0:
        return existing  # only on a checkpoint signal: nothing planned
    steps, start = planned_steps(cfg), int((cfg.get("_resume") or {}).get("step") or 0)
    # the last step writes none (the run is complete); a budget run's length is not known here
    new = keep + 1 if steps is None else len(range(start + every - start % every, steps, every))
    return min(existing + new, keep + 1)


def trace_events(cfg: RunView, world: int) -> int:
    train = cfg["train"]
    if not train.get("trace"):
        return 0
    steps = planned_steps(cfg) or 1000
    window = train.get("trace_steps")
    if window:
        steps = max(0, min(steps, int(window[1])) - int(window[0]) + 1)
    rounds = get_method(cfg["method"]["name"]).rounds_per_step
    return world * steps * rounds * (2 * int(train.get("accum") or 1) + 10)


def complete_checkpoints(out_dir: str) -> list[str]:
    from ...train.checkpoint import CHECKPOINTS, MANIFEST, list_checkpoints

    found = list_checkpoints(os.path.join(out_dir, CHECKPOINTS))
    return [p for _, p in found if os.path.exists(os.path.join(p, MANIFEST))]


def estimate(cfg: RunView, world: int) -> DiskEstimate:
    """The bytes the run will add to out_dir's filesystem (see the module docstring)."""
    from ...train.memory import checkpoint_bytes, model_shape, state_layout

    out = DiskEstimate()
    train = cfg["train"]
    one = checkpoint_bytes(cfg, world)
    existing = complete_checkpoints(cfg["out_dir"]) if cfg.get("_resume") else []
    if one is None:
        out.notes.append("the model's size is not known: checkpoints and saved model not counted")
    else:
        count = checkpoints_on_disk(cfg, len(existing))
        held = sum(folder_bytes(p) for p in existing)
        out.items["checkpoints"] = max(0, count * one - held)
        shape, layout = model_shape(cfg), state_layout(cfg)
        if train.get("save_model"):
            out.items["model"] = shape.params * (layout.param_bytes if layout.flat else 4) + TOKENIZER_BYTES
        if train.get("save_final_params"):
            out.items["final params"] = shape.params * 4
    out.items["trace"] = 2 * trace_events(cfg, world) * TRACE_EVENT_BYTES
    out.items["metrics"] = (planned_steps(cfg) or 1000) * METRICS_ROW_BYTES
    out.items["run files"] = SMALL_FILES_BYTES + RESERVE_BYTES
    return out


# -- free space ----------------------------------------------------------------------------------


def reclaimable(cfg: RunView) -> int:
    """Bytes of an earlier run in out_dir that this one removes before it starts (not a resume)."""
    if cfg.get("_resume"):
        return 0
    from ...runtime.files import RUN_FILES

    out_dir = cfg["out_dir"]
    names = [*RUN_FILES, "model", "checkpoints", "failures"]
    return sum(folder_bytes(os.path.join(out_dir, n)) for n in names if os.path.exists(os.path.join(out_dir, n)))


def fixes(items: dict[str, int], cfg: RunView) -> str:
    """What settings shrink the biggest part of the estimate."""
    train = cfg.get("train") or {}
    biggest = max(items, key=lambda k: items[k]) if items else None
    if biggest == "checkpoints":
        if int(train.get("keep_checkpoints") or 2) > 1:
            return "train.keep_checkpoints=1"
        return "a larger train.checkpoint_every"
    return {
        "model": "train.save_model=false",
        "final params": "train.save_final_params=false",
        "trace": "train.trace=false or a train.trace_steps window",
    }.get(biggest or "", "")


def disk_space_problem(cfg: RunView, world: int) -> tuple[str | None, DiskEstimate]:
    """(the one-line problem when out_dir's filesystem cannot hold the run, or None; the estimate)."""
    est = estimate(cfg, world)
    out_dir = cfg["out_dir"]
    free = free_bytes(out_dir) + reclaimable(cfg)
    if est.total <= free:
        return None, est
    knob = fixes(est.items, cfg)
    return (
        f"the run will write about {est.describe()} to {out_dir}, but {filesystem(out_dir)} has "
        f"{fmt_gb(free)} free; free {fmt_gb(est.total - free)}, set out_dir to a larger filesystem"
        + (f" or set {knob}" if knob else "")
        + f" ({OFF_SWITCH}=0 skips this check)"
    ), est


def data_build_bytes(cfg: RunView) -> int | None:
    """A rough size of the data preparation (pretraining data from a local copy, not yet in the
    cache): twice the source's size (datasets' Arrow copy during the build, then the packed token
    ids, ~4 bytes per token of ~4 characters). None: nothing to build, or not estimable (a hub
    dataset, a generated corpus: small)."""
    data = cfg.get("data") or {}
    source = data.get("source") or {}
    path, cache_dir = source.get("path"), data.get("cache_dir")
    if not path or not cache_dir or source.get("generator") or not os.path.exists(os.path.expanduser(path)):
        return None
    try:
        from ...data.prepare_pretraining import normalize_source, source_identity

        identity = source_identity(normalize_source(plain(source)))  # the data layer reads plain data
    except Exception:  # a source the data code rejects: its own check reports it
        return None
    # a published cache folder built from this very source (any tokenizer/length: rough, never a false refusal)
    for meta in glob.glob(os.path.join(cache_dir, "*", "meta.json")):
        try:
            with open(meta) as f:
                if json.load(f).get("key", {}).get("source") == json.loads(json.dumps(identity)):
                    return None
        except (OSError, ValueError, AttributeError):
            continue
    return 2 * folder_bytes(os.path.expanduser(path))


def data_cache_problem(cfg: RunView) -> str | None:
    need = data_build_bytes(cfg)
    if need is None:
        return None
    cache_dir = cfg["data"]["cache_dir"]
    free = free_bytes(cache_dir)
    if need <= free:
        return None
    return (
        f"preparing the data from {cfg['data']['source']['path']} needs about {fmt_gb(need)} in the data "
        f"cache {cache_dir}, but {filesystem(cache_dir)} has {fmt_gb(free)} free; free "
        f"{fmt_gb(need - free)} or set data.cache_dir (or ACCO_CACHE) to a larger filesystem"
    )


def check_disk(cfg: RunView, world: int) -> str | None:
    """Before any worker starts: the one-line problem, or None (also when ACCO_DISK_CHECK=0)."""
    if os.environ.get(OFF_SWITCH, "1") == "0":
        return None
    problem, _ = disk_space_problem(cfg, world)
    return problem or data_cache_problem(cfg)


# -- a write that finds the disk full -------------------------------------------------------------
def advice_for(cfg: RunView) -> Advice:
    """What a full disk's one line adds for this run (no_space_message), handed
    to its writers: the write-time half below train/ cannot size the run (it needs the model's size)."""
    return lambda need: shortfall_advice(cfg, need)


def shortfall_advice(cfg: RunView, need: int | None) -> tuple[int | None, str]:
    """(bytes the run still lacks on out_dir's filesystem, the setting that shrinks it most)."""
    est = estimate(changed(cfg, {"_resume": None}), int(cfg.world_size or 1))
    out_dir = cfg.out_dir
    written = folder_bytes(out_dir) if os.path.isdir(out_dir) else 0
    missing = est.total - free_bytes(out_dir) - written
    return max(missing, need or 0) or None, fixes(est.items, cfg)
