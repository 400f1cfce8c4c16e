"""The local launcher's watch over its worker processes: checkpoint signals are passed on to every
worker; when one worker ends badly the others get a short grace period to end by themselves
(they do: their training collectives time out or see the peer's connection close), then SIGKILL
(SIGTERM would only ask a worker for a checkpoint), so no worker outlives the run. What it saw
names the failed rank and the reason in summary.json."""

from __future__ import annotations

import multiprocessing.connection
import os
import signal
import time
from dataclasses import dataclass, field

from ...atomic import atomic_write_json
from ...config.schema import RunView
from ...runtime.files import read_failures, read_metrics, read_progress
from ...runtime.summary import SUMMARY_FILE, RunSummary, read_summary

FORWARDED = (signal.SIGUSR1, signal.SIGUSR2, signal.SIGTERM)
# words of the errors a rank reports when it is a peer, not itself, that failed
PEER_ERRORS = (
    "timed out",
    "timeout",
    "connection closed",
    "connection reset",
    "broken pipe",
    "communication thread failed",
    "distbackenderror",
    "peer",
    "watchdog",  # NCCL's: "Watchdog caught collective operation timeout"
)
# NCCL's watchdog SIGABRTs a rank whose collective outlived its timeout (unless blocking wait is on,
# acco.harness.launch.NCCL_ERROR_HANDLING; a user's own setting may still turn it off): that rank
# waited for a peer, it is not the one that failed
WATCHDOG_ABORT = -signal.SIGABRT


@dataclass
class Outcome:
    exitcodes: list
    first_failed: int | None = None
    stuck: list = field(default_factory=list)  # still running after a peer failed and the grace period

    @property
    def ok(self) -> bool:
        return self.first_failed is None and all(code == 0 for code in self.exitcodes)


class forward_signals:
    """While active, a checkpoint signal sent to this process goes to every live worker."""

    def __init__(self, processes):
        self.processes = processes
        self.old = {}

    def _forward(self, signum, frame):
        for p in self.processes:
            if p.is_alive():
                try:
                    os.kill(p.pid, signum)
                except ProcessLookupError:
                    pass

    def __enter__(self):
        for sig in FORWARDED:
            self.old[sig] = signal.signal(sig, self._forward)
        return self

    def __exit__(self, *exc):
        for sig, handler in self.old.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)


def supervise(processes, grace_s: float = 5.0, poll_s: float = 0.5) -> Outcome:
    """Wait for the workers; tear them all down once one has ended with a non-zero status."""
    first, failed_at = None, None
    while True:
        bad = [i for i, p in enumerate(processes) if p.exitcode not in (None, 0)]
        if bad and first is None:
            # several at once: one killed by a signal is the cause rather than the peers it took down
            # (SIGABRT excepted: NCCL's watchdog aborts a rank that waited for a peer)
            first = min(bad, key=lambda i: (not killed_by_signal(processes[i].exitcode), i))
            failed_at = time.monotonic()
        alive = [p for p in processes if p.exitcode is None]
        if not alive or (failed_at is not None and time.monotonic() - failed_at > grace_s):
            break
        multiprocessing.connection.wait([p.sentinel for p in alive], timeout=poll_s)
    stuck = [i for i, p in enumerate(processes) if p.exitcode is None]
    for i in stuck:
        processes[i].kill()
    for p in processes:
        p.join()
    return Outcome([p.exitcode for p in processes], first, stuck)


def killed_by_signal(code: int | None) -> bool:
    """Ended by a signal other than NCCL's watchdog abort (SIGKILL, SIGSEGV, ...)."""
    return code is not None and code < 0 and code != WATCHDOG_ABORT


def is_peer_error(error: str | None) -> bool:
    if not error:
        return False
    return any(word in error.lower() for word in PEER_ERRORS)


def diagnose(outcome: Outcome, out_dir: str, step_timeout_s: float) -> tuple[int, str, list]:
    """(failed rank, why, every rank's own report) from how the workers ended."""
    notes = read_failures(out_dir)
    codes = outcome.exitcodes
    killed = [i for i, c in enumerate(codes) if killed_by_signal(c) and i not in outcome.stuck]
    if killed:
        rank = killed[0] if outcome.first_failed not in killed else outcome.first_failed
        return rank, f"rank {rank} was killed by {signal.Signals(-codes[rank]).name}", notes
    # a watchdog-aborted rank timed out waiting for a peer: its peers' own reports say who failed
    aborted = [i for i, c in enumerate(codes) if c == WATCHDOG_ABORT]
    waited = (
        f"; rank(s) {', '.join(map(str, aborted))} waited for it past dist.step_timeout_s={step_timeout_s:g} s "
        f"and NCCL's watchdog aborted them (SIGABRT)"
        if aborted
        else ""
    )
    own = [n for n in notes if not is_peer_error(n.get("error", ""))]
    if own:
        return own[0]["rank"], own[0]["error"] + waited, notes
    if outcome.stuck:
        rank = outcome.stuck[0]
        seen = read_progress(out_dir, rank)
        ago = None if seen is None else time.time() - float(seen.get("time", 0))
        if seen is not None and ago is not None and ago < step_timeout_s:  # still computing when its peers gave up
            micro_batches, steps = (list(seen.get("progress") or []) + [None, None])[:2]
            return (
                rank,
                (
                    f"rank {rank} was alive and still progressing (micro-batch {micro_batches}, step {steps}, "
                    f"{ago:.0f} s before it was stopped) but slower than dist.step_timeout_s={step_timeout_s:g} s "
                    f"allows its peers to wait: not a hang; raise dist.step_timeout_s (null: sized from the run)"
                ),
                notes,
            )
        return (
            rank,
            (
                f"rank {rank} hung: it stopped making progress, its peers gave up waiting for it "
                f"after dist.step_timeout_s={step_timeout_s:g} s, and it had to be stopped"
            ),
            notes,
        )
    if notes:
        return notes[0]["rank"], notes[0]["error"] + waited, notes
    others = [i for i, c in enumerate(codes) if c != 0 and i not in aborted]
    if aborted and not others:
        return (
            aborted[0],
            (
                f"NCCL's watchdog aborted rank(s) {', '.join(map(str, aborted))} (SIGABRT): a collective "
                f"outlived dist.step_timeout_s={step_timeout_s:g} s and no rank reported its own failure "
                f"(a peer stalled in a collective, or a network fault)"
            ),
            notes,
        )
    if outcome.first_failed in others or not others:
        rank = outcome.first_failed if outcome.first_failed is not None else 0
    else:
        rank = others[0]
    return rank, f"rank {rank} exited with status {codes[rank]}" + waited, notes


def record_failure(out_dir: str, cfg: RunView, world: int, outcome: Outcome) -> str:
    """Write the failed run's summary.json (keeping what rank 0 wrote, if it could); returns why."""
    step_timeout = float((cfg.get("dist") or {}).get("step_timeout_s") or 30)
    rank, why, notes = diagnose(outcome, out_dir, step_timeout)
    summary = read_summary(out_dir) or RunSummary(method=cfg["method"]["name"], world_size=world)
    rows = read_metrics(os.path.join(out_dir, "metrics.csv"))
    from ...train.checkpoint import CHECKPOINTS, MANIFEST, list_checkpoints

    complete = [
        p for _, p in list_checkpoints(os.path.join(out_dir, CHECKPOINTS)) if os.path.exists(os.path.join(p, MANIFEST))
    ]
    summary.status, summary.failed_rank, summary.error = "failed", rank, why
    summary.rank_errors, summary.exit_codes = [n.get("error") for n in notes], outcome.exitcodes
    summary.steps_completed, summary.steps = len(rows), cfg["train"]["steps"]
    summary.final_train_loss = rows[-1]["train_loss"] if rows else None
    summary.last_checkpoint = complete[0] if complete else None
    atomic_write_json(os.path.join(out_dir, SUMMARY_FILE), summary.to_json())
    return why
