"""A stand-in for a training job on the local Slurm cluster (tests/slurm/test_requeues.py): submitted through
acco's own submitit executor (acco/harness/slurm/dispatch.py make_executor), it notes each start and waits for
the checkpoint signal. Its checkpoint() always asks to be requeued, so how often the job comes back
is decided by the executor alone (submitit's max_num_timeout, which must be launcher.max_requeues).
Standard library only: the job unpickles it without importing torch."""

from __future__ import annotations

import json
import os
import time


class RequeueProbe:
    def __init__(self, notes: str):
        self.notes = notes

    def __call__(self) -> str:
        with open(self.notes, "a") as f:  # one line per start of the job
            restarts = int(os.environ.get("SLURM_RESTART_COUNT") or 0)
            f.write(json.dumps({"restart": restarts, "probe_env": os.environ.get("ACCO_PROBE")}) + "\n")
        time.sleep(300)  # until the checkpoint signal (the test sends it)
        return "not signalled"

    def checkpoint(self, *args, **kwargs):
        import submitit

        return submitit.helpers.DelayedSubmission(RequeueProbe(self.notes))
