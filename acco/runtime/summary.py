"""summary.json, a run's record of how it ended, as one typed record.

Rank 0 writes it when the run ends; the launcher rewrites it for a run whose ranks it saw fail. The
harness reads it to resubmit, report status and print the closing line; analysis/ reads it beside
metrics.csv. Every field may be missing from a file (an older writer's, or a run that died early):
it then reads as None. Keys this version does not know are kept in `extra` and written back after
the known ones, so a rewrite loses nothing.
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass, field
from typing import Any

SUMMARY_FILE = "summary.json"

# fields only the launcher writes, for a run whose ranks it saw fail: absent from a run's own summary
LAUNCHER_ONLY = ("rank_errors", "exit_codes")


@dataclass
class RunSummary:
    method: str | None = None
    world_size: int | None = None
    status: str | None = None  # completed | preempted | failed
    error: str | None = None
    # a lost connection or a timed-out collective means a peer failed, not the rank that saw it
    failed_rank: int | None = None
    launcher: str | None = None  # local | torchrun | slurm
    slurm_job_id: str | None = None
    backend: str | None = None
    device: str | None = None
    deterministic: bool | None = None
    accum: int | None = None
    steps_completed: int | None = None
    steps: int | None = None
    # the machine's seconds, or the virtual clock's modelled ones (clock["mode"] says which)
    total_wall_time_s: float | None = None
    final_train_loss: float | None = None
    final_eval_loss: float | None = None
    samples: int | None = None
    hetero: dict | None = None
    link: dict | None = None  # the emulated network link, or why none was
    clock: dict | None = None  # {"mode": "real"} or the virtual clock's costs
    final_eval: dict | None = None  # eval.json's numbers
    # a final evaluation that failed after a completed training (experiments/evaluate.py redoes it)
    final_eval_error: str | None = None
    precision: dict | None = None  # each buffer's dtype (docs/rounds.md: precision)
    per_rank: list[dict | None] = field(default_factory=list)  # memory, busy time, micro-batches
    resumed_from_step: int | None = None
    last_checkpoint: str | None = None
    # where and when it ran: CPUs, load averages at start and end, torch, UTC times
    host: dict | None = None
    rank_errors: list | None = None  # launcher only: each rank's own failure note
    exit_codes: list | None = None  # launcher only: each rank's exit code
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: dict) -> RunSummary:
        known = {f.name for f in dataclasses.fields(cls)} - {"extra"}
        values = {k: v for k, v in data.items() if k in known}
        if values.get("per_rank") is None:
            values["per_rank"] = []
        return cls(**values, extra={k: v for k, v in data.items() if k not in known})

    def to_json(self) -> dict:
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "extra"}
        for key in LAUNCHER_ONLY:
            if out[key] is None:
                del out[key]
        return {**out, **self.extra}

    @property
    def completed(self) -> bool:
        return self.status == "completed"

    @property
    def modelled_time(self) -> bool:
        """Whether total_wall_time_s is the virtual clock's modelled seconds."""
        return (self.clock or {}).get("mode") == "virtual"

    def ranks(self) -> list[dict]:
        """The ranks' own figures (memory, busy time, micro-batches) that reached rank 0."""
        return [r for r in self.per_rank if r]


def read_summary(out_dir: str) -> RunSummary | None:
    """The run's summary.json, or None where there is none (or it cannot be read)."""
    path = os.path.join(out_dir, SUMMARY_FILE)
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, json.JSONDecodeError):
        return None
    return RunSummary.from_json(data) if isinstance(data, dict) else None


def run_completed(out_dir: str) -> bool:
    """Whether the run in `out_dir` finished its training (summary.json says completed)."""
    summary = read_summary(out_dir)
    return summary is not None and summary.completed
