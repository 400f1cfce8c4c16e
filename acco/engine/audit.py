"""The collective audit (train.audit_collectives): every collective this rank issues, one JSON line
each in <out_dir>/collectives.rank<r>.jsonl, and the checks a run's logs must pass before the
NCCL path is trusted (issue 30 point 8).

One place sees them all: while the audit is on, the torch.distributed functions the project and
PyTorch's DDP / ZeroRedundancyOptimizer call (`dist.all_reduce`, `dist.broadcast`, ...) are
replaced by recording wrappers; `dist.new_group` too, to name each group and note whether it
would be NCCL on a GPU (every group not created as gloo: on CPU all of them are gloo). Off, nothing
is replaced and nothing costs. PyTorch DDP's bucket all-reduce runs inside its C++ reducer, out of
Python's sight: the audit registers a collective hook (register_collective_hook), which makes the
torch DDP baseline run that all-reduce through a Python comm hook calling `dist.all_reduce`
(its _report_collectives), the same collective, now seen.

A record: seq (this rank's count), op, group (its role: where it was created, see
_creator, or "default"), backend (now), gpu_backend (on a GPU), thread, main (the main thread?), dtypes and
devices of its tensors, step (committed steps so far), pending (a communication-thread job in
flight), overlap (other threads inside a collective on the same group)."""

from __future__ import annotations

import inspect
import json
import linecache
import os
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterable
from typing import TextIO

import torch
import torch.distributed as dist

from .collectives import register_collective_hook, unregister_collective_hook
from .comm_worker import jobs_in_flight

# the torch.distributed functions audited: those acco/ calls, and those PyTorch's DDP and
# ZeroRedundancyOptimizer call from Python (the C++ ones take the group first)
AUDITED = (
    "all_reduce",
    "reduce_scatter_tensor",
    "all_gather_into_tensor",
    "all_gather_single",
    "all_gather",
    "broadcast",
    "barrier",
    "batch_isend_irecv",
    "all_gather_object",
    "broadcast_object_list",
    "gather_object",
    "_broadcast_coalesced",
    "_verify_params_across_processes",
)
GROUP_FIRST = {"_broadcast_coalesced", "_verify_params_across_processes"}


def audit_path(out_dir: str, rank: int) -> str:
    return os.path.join(out_dir, f"collectives.rank{rank}.jsonl")


def _tensors(value) -> Iterable[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _tensors(v)
    elif isinstance(value, dist.P2POp):
        yield value.tensor


def _creator(frame) -> str:
    """A group's role: the function that created it, and the name it was assigned to there
    ("Trainer.__init__:self.control_group"), or the function alone ("checkpoint_group")."""
    code = frame.f_code
    where = getattr(code, "co_qualname", code.co_name)
    line = linecache.getline(code.co_filename, frame.f_lineno).strip()
    target, sep, _ = line.partition("=")
    if sep and target.strip().replace(".", "").replace("_", "").isalnum():
        return f"{where}:{target.strip()}"
    return where


class CollectiveAudit:
    def __init__(self, out_dir: str, rank: int, default_gpu_backend: str = "nccl"):
        self.path = audit_path(out_dir, rank)
        self.out_dir = out_dir
        self.default_gpu_backend = default_gpu_backend
        self.step_of: Callable[[], int | None] = lambda: None
        self._lock = threading.Lock()
        self._file: TextIO | None = None
        self._seq = 0
        self._groups: dict = {}  # group -> (role, gpu_backend)
        self._roles: Counter = Counter()
        self._active: dict = {}  # group role -> {thread names inside a collective on it}
        self._originals: dict[str, Callable] = {}

    # -- switching on and off ------------------------------------------------------------------
    def install(self) -> CollectiveAudit:
        for name in (*AUDITED, "new_group"):
            fn = getattr(dist, name, None)
            if fn is None:  # not in this torch
                continue
            self._originals[name] = fn
            setattr(dist, name, self._new_group if name == "new_group" else self._wrap(name, fn))
        register_collective_hook(self._seen_by_hooks)
        return self

    def uninstall(self) -> None:
        for name, fn in self._originals.items():
            setattr(dist, name, fn)
        self._originals.clear()
        unregister_collective_hook(self._seen_by_hooks)
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None

    @staticmethod
    def _seen_by_hooks(op: str, nbytes: int, world: int, started: float) -> None:
        """Registered only so torch DDP routes its bucket all-reduce through Python (see above);
        the collective itself is recorded by the wrapped dist function."""

    # -- groups ---------------------------------------------------------------------------------
    def _new_group(self, *args, **kwargs):
        group = self._originals["new_group"](*args, **kwargs)
        role = _creator(sys._getframe(1))
        with self._lock:
            self._roles[role] += 1
            if self._roles[role] > 1:
                role = f"{role}#{self._roles[role]}"
            gloo = kwargs.get("backend") in ("gloo", dist.Backend.GLOO)
            self._groups[group] = (role, "gloo" if gloo else self.default_gpu_backend)
        return group

    def _group_info(self, group) -> tuple[str, str]:
        if group is None or group is dist.group.WORLD:
            return "default", self.default_gpu_backend
        return self._groups.get(group, ("unnamed", self.default_gpu_backend))

    # -- recording ------------------------------------------------------------------------------
    def _wrap(self, name: str, fn: Callable) -> Callable:
        try:
            signature: inspect.Signature | None = inspect.signature(fn)
        except (TypeError, ValueError):  # a C++ function
            signature = None

        def audited(*args, **kwargs):
            if name in GROUP_FIRST:
                group, rest = (args[0] if args else kwargs.get("process_group")), [*args[1:], *kwargs.values()]
            elif name == "batch_isend_irecv":
                ops = args[0] if args else kwargs["p2p_op_list"]
                group, rest = (ops[0].group if ops else None), ops
            else:
                bound = signature.bind(*args, **kwargs).arguments if signature is not None else kwargs
                group, rest = bound.get("group"), list(bound.values())
            role, gpu_backend = self._group_info(group)
            thread = threading.current_thread().name
            with self._lock:
                others = sorted(self._active.setdefault(role, set()) - {thread})
                self._active[role].add(thread)
            try:
                self._record(name, group, role, gpu_backend, thread, list(_tensors(rest)), others)
                return fn(*args, **kwargs)
            finally:
                with self._lock:
                    self._active[role].discard(thread)

        audited.__wrapped__ = fn  # type: ignore[attr-defined]
        return audited

    def _record(self, op, group, role, gpu_backend, thread, tensors, overlap) -> None:
        backend = dist.get_backend(group)
        record = {
            "op": op,
            "group": role,
            "backend": str(backend),
            "gpu_backend": gpu_backend,
            "thread": thread,
            "main": threading.current_thread() is threading.main_thread(),
            "dtypes": sorted({str(t.dtype).removeprefix("torch.") for t in tensors}),
            "devices": sorted({t.device.type for t in tensors}),
            "step": self.step_of(),
            "pending": jobs_in_flight() > 0,
            "overlap": overlap,
        }
        with self._lock:
            if self._file is None:
                os.makedirs(self.out_dir, exist_ok=True)
                self._file = open(self.path, "a", buffering=1)  # noqa: SIM115 (open until uninstall)
            self._seq += 1
            self._file.write(json.dumps({"seq": self._seq, **record}) + "\n")


# -- the checks -----------------------------------------------------------------------------------
def load_audit(path: str) -> list[dict]:
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def _signature(r: dict) -> tuple:
    return (r["op"], tuple(r["dtypes"]), tuple(r["devices"]))


def audit_problems(logs: dict[int, list[dict]]) -> list[str]:
    """What the ranks' audit logs (rank -> records) show wrong, one line each; [] = all good:
    * every group sees the same sequence of collectives (op, dtypes, devices) on every rank;
    * a group NCCL on a GPU is used by one thread at a time, and never by the main thread while
      a communication-thread job is in flight;
    * a group gloo on a GPU (as every group on CPU) gets only CPU tensors."""
    problems: list[str] = []
    per_group: dict[str, dict[int, list[tuple]]] = {}
    for rank, records in sorted(logs.items()):
        for r in records:
            per_group.setdefault(r["group"], {}).setdefault(rank, []).append(_signature(r))
            where = f"rank {rank} #{r['seq']} {r['op']} on {r['group']} (thread {r['thread']}, step {r['step']})"
            if r["gpu_backend"] == "nccl":
                if r["overlap"]:
                    problems.append(f"{where}: NCCL group used at once by {', '.join(r['overlap'])} too")
                if r["main"] and r["pending"]:
                    problems.append(f"{where}: NCCL group used by the main thread while a sync is in flight")
            elif any(d != "cpu" for d in r["devices"]):
                problems.append(f"{where}: {r['gpu_backend']} group given {', '.join(r['devices'])} tensors")
    for group, by_rank in sorted(per_group.items()):
        ranks = sorted(logs)
        seqs = [by_rank.get(rank, []) for rank in ranks]
        for rank, seq in zip(ranks[1:], seqs[1:]):
            if seq != seqs[0]:
                i = next((i for i, (a, b) in enumerate(zip(seqs[0], seq)) if a != b), min(len(seq), len(seqs[0])))
                first = seqs[0][i] if i < len(seqs[0]) else "nothing"
                other = seq[i] if i < len(seq) else "nothing"
                problems.append(
                    f"group {group}: collective {i + 1} is {first} on rank {ranks[0]} but {other} on rank {rank}"
                )
    return problems
