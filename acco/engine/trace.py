"""Chrome trace-event recording (chrome://tracing, Perfetto): per rank one lane for compute (each
micro-batch) and one for communication (each sync stage), the CPU-side counterpart of the Nsight
view in the paper's Fig. 13."""
from __future__ import annotations

import json
import os
import threading
import time
from contextlib import contextmanager

COMPUTE, COMM = 0, 1
LANE_NAMES = {COMPUTE: "compute", COMM: "communication"}


class TraceRecorder:
    def __init__(self, rank: int, enabled: bool = True):
        self.rank = rank
        self.enabled = enabled
        self.events: list[dict] = []
        self._lock = threading.Lock()  # both threads record

    @staticmethod
    def now_us() -> float:
        # wall clock, so lanes of ranks on one machine line up; on several nodes up to clock skew
        return time.time() * 1e6

    def add(self, name: str, lane: int, start_us: float, end_us: float, cat: str | None = None,
            **args) -> None:
        """A complete event; `cat` defaults to the lane's name ("idle" marks waiting, not work)."""
        if not self.enabled:
            return
        ev = {"name": name, "ph": "X", "pid": self.rank, "tid": lane, "ts": start_us,
              "dur": max(0.0, end_us - start_us), "cat": cat or LANE_NAMES[lane]}
        if args:
            ev["args"] = args
        with self._lock:
            self.events.append(ev)

    @contextmanager
    def span(self, name: str, lane: int, cat: str | None = None, **args):
        start = self.now_us()
        try:
            yield
        finally:
            self.add(name, lane, start, self.now_us(), cat=cat, **args)

    def metadata(self) -> list[dict]:
        meta = [{"name": "process_name", "ph": "M", "pid": self.rank, "args": {"name": f"rank {self.rank}"}},
                {"name": "process_sort_index", "ph": "M", "pid": self.rank, "args": {"sort_index": self.rank}}]
        for lane, lane_name in LANE_NAMES.items():
            meta.append({"name": "thread_name", "ph": "M", "pid": self.rank, "tid": lane,
                         "args": {"name": lane_name}})
        return meta

    def dump_part(self, out_dir: str) -> str:
        path = os.path.join(out_dir, f".trace.rank{self.rank}.json")
        with open(path, "w") as f:
            json.dump(self.metadata() + self.events, f)
        return path


def merge_trace_parts(out_dir: str, world_size: int) -> str:
    """Rank 0 joins every rank's part into one trace.json and removes the parts."""
    events: list[dict] = []
    for rank in range(world_size):
        part = os.path.join(out_dir, f".trace.rank{rank}.json")
        if os.path.exists(part):
            with open(part) as f:
                events.extend(json.load(f))
            os.remove(part)
    path = os.path.join(out_dir, "trace.json")
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"traceEvents": events, "displayTimeUnit": "ms"}, f)
    os.replace(tmp, path)
    return path


def load_spans(path: str, rank: int | None = None, cat: str | None = None) -> list[dict]:
    """The complete ('X') events of a trace.json, optionally of one rank and one category
    ("compute", "communication" or "idle")."""
    with open(path) as f:
        data = json.load(f)
    events = data["traceEvents"] if isinstance(data, dict) else data
    return [e for e in events if e.get("ph") == "X"
            and (rank is None or e["pid"] == rank) and (cat is None or e.get("cat") == cat)]


def overlap_us(spans_a: list[dict], spans_b: list[dict]) -> float:
    """Total time during which some span of `spans_a` and some span of `spans_b` both run."""
    def merged(spans):
        iv = sorted((e["ts"], e["ts"] + e["dur"]) for e in spans)
        out: list[list[float]] = []
        for s, e in iv:
            if out and s <= out[-1][1]:
                out[-1][1] = max(out[-1][1], e)
            else:
                out.append([s, e])
        return out
    a, b = merged(spans_a), merged(spans_b)
    i = j = 0
    total = 0.0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if hi > lo:
            total += hi - lo
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total
