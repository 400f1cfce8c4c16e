"""Chrome trace-event recording (chrome://tracing, Perfetto): per rank one lane for compute (each
micro-batch) and one for communication (each sync stage), the CPU-side counterpart of the Nsight
view in the paper's Fig. 13.

Every event carries the committed step its work leads to (``args.step``: recorded after step s-1
was committed and before step s was). A window of steps ``[a, b]`` (train.trace_steps) records
only the events of steps a..b: the recorder stores nothing else, so it does not grow with the run.
Each rank writes its part (the events as the body of a JSON array, one per line); rank 0 joins
the parts into trace.json by copying them chunk by chunk, never holding all events at once.

On CUDA (`time_on_device`) a span is a pair of event marks on the stream its work runs on (the
communication thread's own stream for a sync's spans), not host times around the enqueueing:
its times are read when the work is done, without waiting for it, at each step boundary
(`at_step`: the spans whose work has finished), and the rest when the trace is written."""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
from collections.abc import Iterable
from contextlib import contextmanager

from acco.atomic import atomic_open

from . import device_clock
from .device_clock import Anchor, Mark

COMPUTE, COMM = 0, 1
LANE_NAMES = {COMPUTE: "compute", COMM: "communication"}
PART = ".trace.rank{rank}.part"
COPY_CHUNK = 1 << 20  # bytes per copy when merging the parts


def side_cpu_seconds() -> float:
    """CPU seconds this process has spent outside its main (compute) thread: the communication
    thread and gloo's own I/O threads. Called on the main thread (a sequential sync), it counts every
    thread, the main one included. With several intra-op threads (train.threads) their compute counts
    too; the benchmark runs one per worker."""
    if threading.current_thread() is threading.main_thread():
        return time.process_time()
    main = time.pthread_getcpuclockid(threading.main_thread().ident)  # type: ignore[arg-type]
    return time.process_time() - time.clock_gettime(main)


_TICK_S = 1.0 / os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 0.01


def machine_cpu_seconds() -> float | None:
    """Busy CPU seconds of the whole machine so far (/proc/stat: every process and the kernel,
    softirqs included), or None where there is no /proc. A shaped link's TCP, veth and tc work runs
    in the kernel, largely in softirq context that no one process's clock is charged with: a
    sequential sync's machine-wide delta is what the link costs the cores."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()[1:]
    except OSError:
        return None
    ticks = [int(x) for x in fields]
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)  # idle + iowait
    guest = sum(ticks[8:10])  # already counted in user and nice
    return (sum(ticks) - idle - guest) * _TICK_S


class TraceRecorder:
    def __init__(self, rank: int, enabled: bool = True, steps: tuple[int, int] | None = None):
        self.rank = rank
        self.enabled = enabled
        self.window = tuple(steps) if steps is not None else None
        self.events: list[dict] = []
        self._lock = threading.Lock()  # both threads record
        self.anchor: Anchor | None = None  # set by time_on_device: spans are then event pairs
        self._unresolved: list[tuple[dict, Mark, Mark]] = []  # (event, its marks) not yet read
        self.at_step(1)

    def time_on_device(self) -> None:
        """Time spans by CUDA events on the current stream of the thread that opens them (the
        compute side calls this on a GPU; the one host sync is here, before training)."""
        if self.enabled and self.anchor is None:
            self.anchor = Anchor()

    def at_step(self, step: int) -> None:
        """From now on events belong to committed step `step` (the trainer calls this at the start
        of a run and after each commit; no span is open across a commit). The spans whose device
        work has finished get their times (no waiting)."""
        self.resolve(block=False)
        self.step = step
        self.recording = self.enabled and (self.window is None or self.window[0] <= step <= self.window[1])

    @staticmethod
    def now_us() -> float:
        # wall clock, so lanes of ranks on one machine line up; on several nodes up to clock skew
        return time.time() * 1e6

    def add(self, name: str, lane: int, start_us: float, end_us: float, cat: str | None = None, **args) -> None:
        """A complete event; `cat` defaults to the lane's name ("idle" marks waiting, not work)."""
        if not self.recording:
            return
        ev = self._event(name, lane, start_us, end_us, cat, args)
        with self._lock:
            self.events.append(ev)

    def _event(self, name: str, lane: int, start_us: float, end_us: float, cat: str | None, args: dict) -> dict:
        return {
            "name": name,
            "ph": "X",
            "pid": self.rank,
            "tid": lane,
            "ts": start_us,
            "dur": max(0.0, end_us - start_us),
            "cat": cat or LANE_NAMES[lane],
            "args": {"step": self.step, **args},
        }

    def mark(self) -> Mark:
        """A point in the current stream's work (device_clock.mark): an event on a GPU when
        recording, else the host time."""
        return device_clock.mark(self.anchor is not None and self.recording)

    def add_marked(self, name: str, lane: int, begin: Mark, end: Mark, cat: str | None = None, **args) -> None:
        """A complete event between two marks: with events, its times are read later (resolve)."""
        if not self.recording:
            return
        if begin.event is None or end.event is None or self.anchor is None:
            self.add(name, lane, begin.host_us, end.host_us, cat=cat, **args)
            return
        ev = self._event(name, lane, begin.host_us, end.host_us, cat, args)
        with self._lock:
            self._unresolved.append((ev, begin, end))

    def resolve(self, block: bool) -> None:
        """Give the marked spans whose work is done their device times (`block`: wait for all)."""
        if not self._unresolved or self.anchor is None:
            return
        with self._lock:
            pending, self._unresolved = self._unresolved, []
        keep = []
        for ev, begin, end in pending:
            if block:
                device_clock.wait(end)
            elif not device_clock.done(end):
                keep.append((ev, begin, end))
                continue
            ev["ts"] = self.anchor.host_us(begin)
            ev["dur"] = max(0.0, device_clock.elapsed_us(begin, end))
            with self._lock:
                self.events.append(ev)
        if keep:
            with self._lock:
                self._unresolved = keep + self._unresolved

    @contextmanager
    def span(self, name: str, lane: int, cat: str | None = None, side_cpu: bool = False, **args):
        """`side_cpu`: also record `side_cpu_s`, the CPU seconds the span cost outside the compute
        side (see side_cpu_seconds), what a communication thread takes from the cores that compute,
        and `machine_cpu_s`, the whole machine's busy CPU seconds meanwhile (machine_cpu_seconds)."""
        begin = self.mark()
        cpu0 = side_cpu_seconds() if side_cpu and self.recording else None
        machine0 = machine_cpu_seconds() if cpu0 is not None else None
        try:
            yield
        finally:
            if cpu0 is not None:
                args["side_cpu_s"] = side_cpu_seconds() - cpu0
            if machine0 is not None:
                machine1 = machine_cpu_seconds()
                if machine1 is not None:
                    args["machine_cpu_s"] = machine1 - machine0
            end = self.mark() if begin.event is not None else Mark(self.now_us())
            self.add_marked(name, lane, begin, end, cat=cat, **args)

    def metadata(self) -> list[dict]:
        meta = [
            {"name": "process_name", "ph": "M", "pid": self.rank, "args": {"name": f"rank {self.rank}"}},
            {"name": "process_sort_index", "ph": "M", "pid": self.rank, "args": {"sort_index": self.rank}},
        ]
        for lane, lane_name in LANE_NAMES.items():
            meta.append({"name": "thread_name", "ph": "M", "pid": self.rank, "tid": lane, "args": {"name": lane_name}})
        return meta

    def dump_part(self, out_dir: str) -> str:
        try:
            self.resolve(block=True)
        except RuntimeError:  # a failed device: the spans still unread are lost, not the rest
            self._unresolved = []
        with self._lock:
            events = list(self.events)
        return write_part(os.path.join(out_dir, PART.format(rank=self.rank)), self.metadata() + events)


def write_part(path: str, events: Iterable[dict]) -> str:
    """One rank's events as the body of a JSON array (no brackets), one event a line, written as
    they come from `events`."""
    with atomic_open(path, "w") as f:
        sep = ""
        for ev in events:
            f.write(sep)
            f.write(json.dumps(ev, separators=(",", ":")))
            sep = ",\n"
    return path


def merge_trace_parts(out_dir: str, world_size: int, other_data: dict | None = None) -> str:
    """Rank 0 joins every rank's part into one trace.json (a Chrome trace, ``{"traceEvents": [...],
    "otherData": other_data, ...}``) and removes the parts. Streaming: memory stays at one copy
    chunk however many events there are."""
    path = os.path.join(out_dir, "trace.json")
    parts = [os.path.join(out_dir, PART.format(rank=rank)) for rank in range(world_size)]
    with atomic_open(path, "wb") as out:
        head = {"displayTimeUnit": "ms", "otherData": other_data or {}}
        out.write(json.dumps(head)[:-1].encode() + b', "traceEvents": [\n')
        first = True
        for part in parts:
            if not os.path.exists(part) or os.path.getsize(part) == 0:
                continue
            if not first:
                out.write(b",\n")
            with open(part, "rb") as f:
                shutil.copyfileobj(f, out, COPY_CHUNK)
            first = False
        out.write(b"\n]}\n")
    remove_parts(out_dir, world_size)
    return path


def remove_parts(out_dir: str, world_size: int) -> None:
    """Remove the ranks' trace parts (merged, or of no use without the merged trace)."""
    for rank in range(world_size):
        part = os.path.join(out_dir, PART.format(rank=rank))
        if os.path.exists(part):
            os.remove(part)


def load_spans(path: str, rank: int | None = None, cat: str | None = None) -> list[dict]:
    """The complete ('X') events of a trace.json, optionally of one rank and one category
    ("compute", "communication" or "idle")."""
    with open(path) as f:
        data = json.load(f)
    events = data["traceEvents"] if isinstance(data, dict) else data
    return [
        e
        for e in events
        if e.get("ph") == "X" and (rank is None or e["pid"] == rank) and (cat is None or e.get("cat") == cat)
    ]


def overlap_us(spans_a: list[dict], spans_b: list[dict]) -> float:
    """Total time during which some span of `spans_a` and some span of `spans_b` both run."""

    def intervals(spans):
        return [(e["ts"], e["ts"] + e["dur"]) for e in spans]

    return interval_overlap(intervals(spans_a), intervals(spans_b))


def summarize_overlap(path: str) -> list[dict]:
    """Per rank of a trace.json: busy seconds of the compute lane and of the communication lane
    (whole syncs, not their stages), the seconds both run, and the overlap efficiency
    (t_comp + t_comm - t_span) / min(t_comp, t_comm) = overlapped / min(t_comp, t_comm)."""
    spans = load_spans(path)
    rows = []
    for rank in sorted({e["pid"] for e in spans}):
        comp = [e for e in spans if e["pid"] == rank and e.get("cat") == "compute"]
        comm = [
            e
            for e in spans
            if e["pid"] == rank
            and e.get("cat") == "communication"
            and e["name"].startswith(("sync", "bwd + all_reduce"))
        ]  # whole syncs, not stages
        t_comp = overlap_us(comp, comp) / 1e6
        t_comm = overlap_us(comm, comm) / 1e6
        both = overlap_us(comp, comm) / 1e6
        rows.append(
            {
                "rank": rank,
                "compute_s": t_comp,
                "comm_s": t_comm,
                "overlap_s": both,
                "overlap_efficiency": both / min(t_comp, t_comm) if min(t_comp, t_comm) > 0 else 0.0,
            }
        )
    return rows


def backward_overlap(path: str) -> list[dict]:
    """How much of a DDP step's gradient reduction its last backward hid, per rank and step of a
    trace.json: the bucket reductions (the flat engine's overlapped ddp: "reduce_scatter (bucket k)";
    PyTorch's DDP: "all_reduce (bucket i)", cat ddp_bucket), their busy seconds, and the part of them
    that ran while the last backward did (the flat engine: the step's last micro-batch, whose forward
    ends before any bucket is final; PyTorch's DDP: "bwd (DDP, to the last gradient)", cat
    ddp_backward, which ends when the last gradient is final). Steps without buckets are left out."""
    spans = load_spans(path)
    rows = []
    for rank in sorted({e["pid"] for e in spans}):
        mine = [e for e in spans if e["pid"] == rank]
        by_step: dict[int, list[dict]] = {}
        for e in mine:
            by_step.setdefault(int(e.get("args", {}).get("step", 0)), []).append(e)
        for step, events in sorted(by_step.items()):
            buckets = [
                e for e in events if e["name"].startswith("reduce_scatter (bucket") or e.get("cat") == "ddp_bucket"
            ]
            if not buckets:
                continue
            backward = [e for e in events if e.get("cat") == "ddp_backward"]
            if not backward:
                compute = [e for e in events if e.get("cat") == "compute" and e["name"].startswith("fwd+bwd")]
                backward = [max(compute, key=lambda e: e["ts"])] if compute else []
            reduce = interval_overlap(*[[(e["ts"], e["ts"] + e["dur"]) for e in buckets]] * 2) / 1e6
            hidden = overlap_us(buckets, backward) / 1e6
            rows.append(
                {
                    "rank": rank,
                    "step": step,
                    "buckets": len(buckets),
                    "reduce_s": reduce,
                    "hidden_s": hidden,
                    "hidden_fraction": hidden / reduce if reduce > 0 else 0.0,
                }
            )
    return rows


def interval_overlap(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> float:
    """Total length of the intersection of the union of intervals `a` with the union of `b`."""

    def merged(iv):
        out: list[list[float]] = []
        for s, e in sorted(iv):
            if out and s <= out[-1][1]:
                out[-1][1] = max(out[-1][1], e)
            else:
                out.append([s, e])
        return out

    a, b = merged(a), merged(b)
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
