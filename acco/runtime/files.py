"""What every run leaves in its folder (docs/outputs.md): config.yaml, metrics.csv (one row per committed
optimizer step, flushed as it is written so a crash keeps every completed step), summary.json,
trace.json."""

from __future__ import annotations

import csv
import json
import math
import os
import resource
import time
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:  # torch is imported where a GPU's figures are read: the analysis reads these files without it
    import torch

from ..atomic import atomic_open, atomic_write_json

PREEMPTED_EXIT = 3  # stopped by a checkpoint signal, checkpoint written: rerun with resume=auto

METRIC_FIELDS = [
    "step",
    "samples",
    "tokens",
    "wall_time_s",
    "train_loss",
    "lr",
    "micro_batches",
    "eval_loss",
    "grad_norm",
]

# a run folder's files that a new run (not a resume) replaces
# A run folder's files that a new run in it replaces. timing.json is the trace's medians that
# the analysis keeps when it slims a trace: a run made again must not keep the old one's.
RUN_FILES = ("metrics.csv", "summary.json", "trace.json", "timing.json", "final_params.pt", "config.yaml", "eval.json")


def write_report(out_dir: str, path: str, obj) -> None:
    """A small file that must be written even on a full disk (summary.json, a failure note): on
    lack of space the run's disk reserve is released and the write tried again."""
    from .disk import is_no_space, release

    try:
        atomic_write_json(path, obj)
    except OSError as exc:
        if not (is_no_space(exc) and release(out_dir)):
            raise
        atomic_write_json(path, obj)


class MetricsWriter:
    def __init__(self, out_dir: str):
        """metrics.csv, rewritten by open() (not before: a resume that fails leaves it as it was)."""
        self.path = os.path.join(out_dir, "metrics.csv")
        self.rows: list[dict] = []
        self._file: IO[str] | None = None

    def open(self, keep_until_step: int | None = None) -> MetricsWriter:
        """Start the file. `keep_until_step`: a resumed run keeps the rows up to its checkpoint's
        step (those after it are recomputed) and appends."""
        if keep_until_step is not None:
            self.rows = [r for r in read_metrics(self.path) if r["step"] <= keep_until_step]
        with atomic_open(self.path, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=METRIC_FIELDS)
            writer.writeheader()
            for row in self.rows:
                writer.writerow(_csv_row(row))
        file = self._file = open(self.path, "a", newline="")
        self._csv = csv.DictWriter(file, fieldnames=METRIC_FIELDS)
        return self

    def write(self, row: dict) -> None:
        from .disk import writing

        assert self._file is not None, "MetricsWriter.write before open()"
        with writing(self.path, "metrics.csv", row.get("step")):
            self._csv.writerow(_csv_row(row))
            self._file.flush()
        self.rows.append(row)

    def close(self) -> None:
        if self._file is None:
            return
        try:
            self._file.close()
        except OSError:  # a row that could not be flushed: already reported by write()
            pass


def _csv_row(row: dict) -> dict:
    return {k: ("" if v is None or (isinstance(v, float) and math.isnan(v)) else v) for k, v in row.items()}


def read_metrics(path: str) -> list[dict]:
    """The rows of a metrics.csv, numbers parsed (empty cells -> None)."""
    if not os.path.exists(path):
        return []
    rows = []
    with open(path, newline="") as f:
        for raw in csv.DictReader(f):
            row: dict[str, float | int | None] = {}
            for key, value in raw.items():
                if value in ("", None):
                    row[key] = None
                else:
                    number = float(value)
                    row[key] = int(number) if key in ("step", "samples", "tokens", "micro_batches") else number
            rows.append(row)
    return rows


def write_failure(out_dir: str, rank: int, error: str) -> None:
    """A failing rank's own account (failures/rank<r>.json): the launcher that saw the ranks end
    names the rank and the reason in summary.json from these."""
    if not os.path.isdir(out_dir):
        return
    folder = os.path.join(out_dir, "failures")
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError:  # a full disk: the reserve makes room
        from .disk import release

        release(out_dir)
        os.makedirs(folder, exist_ok=True)
    note = {"rank": rank, "error": error, "time": time.time()}
    write_report(out_dir, os.path.join(folder, f"rank{rank}.json"), note)


def read_failures(out_dir: str) -> list[dict]:
    folder = os.path.join(out_dir, "failures")
    found = []
    for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
        if not (name.startswith("rank") and name.endswith(".json")):  # progress notes are not reports
            continue
        try:
            with open(os.path.join(folder, name)) as f:
                found.append(json.load(f))
        except (OSError, ValueError):
            continue
    return sorted(found, key=lambda f: f.get("time", 0))


def note_progress(out_dir: str, rank: int, progress) -> None:
    """Rank r's last training progress and when it was seen (failures/progress.rank<r>: the
    launcher reads it to tell a live but slow rank from a hung one). Best effort: never fails."""
    path = os.path.join(out_dir, "failures", f"progress.rank{rank}")
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.tmp"
        with open(tmp, "w") as f:
            json.dump({"rank": rank, "progress": list(progress), "time": time.time()}, f)
        os.replace(tmp, path)
    except OSError:
        pass


def clear_progress(out_dir: str, rank: int) -> None:
    """Rank r's progress note gone (a run that ended well leaves none), and the failures folder with
    it when nothing else is in it."""
    folder = os.path.join(out_dir, "failures")
    for path in (os.path.join(folder, f"progress.rank{rank}"), folder):
        try:
            os.remove(path) if path != folder else os.rmdir(folder)
        except OSError:
            pass


def read_progress(out_dir: str, rank: int) -> dict | None:
    try:
        with open(os.path.join(out_dir, "failures", f"progress.rank{rank}")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


_RSS_PEAK_RESET = False  # this process's resident-set high-water mark was reset when training began


def _vm_hwm_bytes() -> int | None:
    """The process's resident-set high-water mark (Linux /proc/self/status VmHWM), or None."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def reset_peak_memory(device: torch.device) -> bool:
    """Start the peak-memory figures afresh, so that they report training and not start-up (a
    model built in fp32 on the host, data preparation): the allocator's peak on GPU, and the
    resident-set high-water mark on Linux (writing 5 to /proc/self/clear_refs resets VmHWM to the
    current RSS). Returns whether the RSS mark was reset; where it cannot be, peak_rss_bytes stays
    the process's lifetime peak (getrusage) and summary.json says so."""
    global _RSS_PEAK_RESET
    if device.type == "cuda":
        import torch

        torch.cuda.reset_peak_memory_stats(device)
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        _RSS_PEAK_RESET = _vm_hwm_bytes() is not None
    except OSError:
        _RSS_PEAK_RESET = False
    return _RSS_PEAK_RESET


def peak_memory_bytes(device: torch.device) -> dict:
    """Peak resident set size of this process since training began (where the mark could be reset;
    `peak_rss_scope` says which), and on GPU the allocator's peaks since then: what tensors held
    (allocated), what the caching allocator took from the device (reserved: the figure to hold
    against the GPU's memory and the estimate, its per-stream pools included), and how often it
    had to free its cache and retry an allocation (a run near the limit)."""
    hwm = _vm_hwm_bytes() if _RSS_PEAK_RESET else None
    if hwm is not None:
        out = {"peak_rss_bytes": hwm, "peak_rss_scope": "training"}
    else:
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB
        out = {"peak_rss_bytes": rss, "peak_rss_scope": "process"}
    if device.type == "cuda":
        import torch

        out["cuda_max_allocated_bytes"] = torch.cuda.max_memory_allocated(device)
        out["cuda_max_reserved_bytes"] = torch.cuda.max_memory_reserved(device)
        out["cuda_alloc_retries"] = int(torch.cuda.memory_stats(device).get("num_alloc_retries", 0))
    return out
