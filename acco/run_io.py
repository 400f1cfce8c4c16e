"""What every run leaves in its folder (SPEC §4): config.yaml, metrics.csv (one row per committed
optimizer step, flushed as it is written so a crash keeps every completed step), summary.json,
trace.json."""
from __future__ import annotations

import csv
import json
import math
import os
import resource

import torch

METRIC_FIELDS = ["step", "samples", "tokens", "wall_time_s", "train_loss", "lr", "micro_batches",
                 "eval_loss", "grad_norm"]


def write_json_atomic(path: str, obj) -> None:
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=2, default=_json_default)
        f.write("\n")
    os.replace(tmp, path)


def _json_default(o):
    if isinstance(o, float) and not math.isfinite(o):
        return None
    if hasattr(o, "tolist"):
        return o.tolist()
    return str(o)


def read_summary(out_dir: str) -> dict | None:
    path = os.path.join(out_dir, "summary.json")
    if not os.path.exists(path):
        return None
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, json.JSONDecodeError):
        return None


class MetricsWriter:
    def __init__(self, out_dir: str):
        self.path = os.path.join(out_dir, "metrics.csv")
        self._file = open(self.path, "w", newline="")
        self._csv = csv.DictWriter(self._file, fieldnames=METRIC_FIELDS)
        self._csv.writeheader()
        self._file.flush()
        self.rows: list[dict] = []

    def write(self, row: dict) -> None:
        clean = {k: ("" if v is None or (isinstance(v, float) and math.isnan(v)) else v)
                 for k, v in row.items()}
        self._csv.writerow(clean)
        self._file.flush()
        self.rows.append(row)

    def close(self) -> None:
        self._file.close()


def peak_memory_bytes(device: torch.device) -> dict:
    """Peak resident set size of this process, and on GPU the allocator's peak."""
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB
    out = {"peak_rss_bytes": rss}
    if device.type == "cuda":
        out["cuda_max_allocated_bytes"] = torch.cuda.max_memory_allocated(device)
    return out
