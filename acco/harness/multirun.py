"""Where a job of many runs stands (reproduce, rehearse, bench, submit --wait): "run k of N: <name>"
with an ETA for the whole job, a bar on a terminal (plain lines otherwise, as the per-run progress
line), and at the end one table: each run's status, wall time and, for a failure, its log and last
error line. The job's exit code is 1 when a run failed.

    job = MultiRun("reproduce fig8", [(name, cost), ...])
    job.skip(name)                        # complete already
    job.begin(name); ...; job.end(ok, log=path, error=line)
    return job.close()                    # prints the table

The ETA weighs the runs still to do by their `cost` (e.g. training steps; 1 when unknown) at the
seconds per unit of cost the finished runs took: runs of different lengths get their share."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass

from ..runtime.progress import duration, wants_bar

COMPLETED, SKIPPED, FAILED = "completed", "skipped: already complete", "failed"
# a line that says what went wrong: our one-line `error: ...`, an exception's last line, a signal
_ERROR = re.compile(r"^(error: |[\w.]*(Error|Exception|Interrupt)\b|.*\b(failed|Killed|killed by signal)\b)")


def eta_s(done: list[tuple[float, float]], todo_costs: list[float], elapsed_current: float = 0.0) -> float | None:
    """Seconds the job still needs: `done` holds (wall seconds, cost) of the finished runs,
    `todo_costs` the costs of the runs not finished yet (the current one first, running for
    `elapsed_current` seconds). None before any run has finished (nothing measured yet)."""
    measured = [(wall, cost) for wall, cost in done if cost > 0]
    if not todo_costs:
        return 0.0
    if not measured:
        return None
    per_cost = sum(w for w, _ in measured) / sum(c for _, c in measured)
    current = max(per_cost * todo_costs[0] - elapsed_current, 0.0)
    return current + per_cost * sum(todo_costs[1:])


def last_error_line(text: str) -> str | None:
    """The last line of a run's output that says what went wrong (else its last non-empty line)."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for line in reversed(lines):
        if _ERROR.match(line):
            return line
    return lines[-1] if lines else None


def log_error_line(path: str, tail_bytes: int = 65536) -> str | None:
    """last_error_line of a log file's end (None when there is no log)."""
    try:
        with open(path, "rb") as f:
            f.seek(max(os.path.getsize(path) - tail_bytes, 0))
            return last_error_line(f.read().decode("utf-8", "replace"))
    except OSError:
        return None


@dataclass
class RunRecord:
    name: str
    cost: float = 1.0
    status: str | None = None  # None: not finished
    wall_s: float | None = None
    log: str | None = None
    error: str | None = None


class MultiRun:
    """The runs of one job, in order; `begin`/`end` (or `skip`) each once."""

    def __init__(self, title: str, runs: list, stream=None, bar: bool | None = None, unit: str = "run"):
        self.title, self.unit = title, unit
        self.runs = [RunRecord(*r) if isinstance(r, tuple) else RunRecord(r) for r in runs]
        self.stream = stream if stream is not None else sys.stderr
        self.started = time.monotonic()
        self.current: RunRecord | None = None
        self.current_start = 0.0
        self.bar = None
        if bar if bar is not None else wants_bar(self.stream):
            from tqdm import tqdm

            from ..data.cache import untracked_tqdm_lock

            untracked_tqdm_lock()
            # our own ETA in the postfix: tqdm's rate would count skipped runs as instant ones
            self.bar = tqdm(
                total=len(self.runs),
                desc=title,
                unit=unit,
                file=self.stream,
                dynamic_ncols=True,
                bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}{postfix}]",
            )

    # -- the runs -----------------------------------------------------------------------------
    def _record(self, name: str) -> RunRecord:
        for r in self.runs:
            if r.name == name and r.status is None and r is not self.current:
                return r
        raise KeyError(f"{name} is not a run of {self.title} still to do")

    def _k(self, rec: RunRecord) -> int:
        return self.runs.index(rec) + 1

    def eta(self) -> float | None:
        done = [(r.wall_s or 0.0, r.cost) for r in self.runs if r.status in (COMPLETED, FAILED)]
        todo = [r for r in self.runs if r.status is None]
        if self.current is not None:  # the current run first
            todo.remove(self.current)
            todo.insert(0, self.current)
        elapsed = time.monotonic() - self.current_start if self.current is not None else 0.0
        return eta_s(done, [r.cost for r in todo], elapsed)

    def _eta_text(self) -> str:
        eta = self.eta()
        return "ETA after the first run" if eta is None else f"ETA {duration(eta)}"

    def skip(self, name: str, why: str = SKIPPED) -> None:
        rec = self._record(name)
        rec.status, rec.wall_s = why, None
        self._say(f"{self.unit} {self._k(rec)} of {len(self.runs)}: {name}: {why}")
        if self.bar is not None:
            self.bar.update(1)

    def begin(self, name: str) -> None:
        rec = self._record(name)
        self.current, self.current_start = rec, time.monotonic()
        self._say(f"{self.unit} {self._k(rec)} of {len(self.runs)}: {name} ({self._eta_text()})")
        if self.bar is not None:
            self.bar.set_postfix_str(f"{name} | {self._eta_text()}")

    def end(self, ok: bool, log: str | None = None, error: str | None = None, wall_s: float | None = None) -> None:
        rec = self.current
        if rec is None:
            raise RuntimeError("end() without begin()")
        rec.wall_s = wall_s if wall_s is not None else time.monotonic() - self.current_start
        rec.status, rec.log, rec.error = (COMPLETED if ok else FAILED), log, (None if ok else error)
        self.current = None
        if self.bar is not None:
            self.bar.update(1)
            self.bar.set_postfix_str(self._eta_text())
        if not ok:
            self._say(f"{self.unit} {self._k(rec)} of {len(self.runs)}: {rec.name} failed: {error or '?'}")

    def note(self, line: str) -> None:
        """A line from the current run (above the bar on a terminal)."""
        self._say(line.rstrip("\n"))

    def _say(self, line: str) -> None:
        if self.bar is not None:
            self.bar.write(line, file=self.stream)
        else:
            print(line, file=self.stream, flush=True)

    # -- the end ------------------------------------------------------------------------------
    def failed(self) -> list[RunRecord]:
        return [r for r in self.runs if r.status == FAILED]

    def table(self) -> str:
        counts = {s: sum(r.status == s for r in self.runs) for s in (COMPLETED, SKIPPED, FAILED)}
        head = (
            f"{self.title}: {len(self.runs)} {self.unit}s in {duration(time.monotonic() - self.started)}: "
            f"{counts[COMPLETED]} completed, {counts[SKIPPED]} skipped (already complete), {counts[FAILED]} failed"
        )
        left = len(self.runs) - sum(counts.values())
        if left:
            head += f", {left} not run"
        width = max([len(r.name) for r in self.runs] + [len(self.unit)])
        lines = [head, f"  {self.unit:<{width}}  {'status':<25}  wall"]
        for r in self.runs:
            lines.append(f"  {r.name:<{width}}  {r.status or 'not run':<25}  {duration(r.wall_s)}")
            if r.status == FAILED:
                lines.append(f"  {'':<{width}}    log: {r.log or '-'}")
                lines.append(f"  {'':<{width}}    last error: {r.error or '-'}")
        return "\n".join(lines)

    def close(self) -> int:
        """Print the table; the job's exit code (1 when a run failed or did not run)."""
        if self.bar is not None:
            self.bar.close()
            self.bar = None
        print(self.table(), file=self.stream, flush=True)
        return 1 if self.failed() or any(r.status is None for r in self.runs) else 0


def run_logged(cmd: list[str], log_path: str, job: MultiRun | None = None, echo: bool = True, **popen) -> int:
    """Run `cmd`, its stdout and stderr written line by line to `log_path` (as it runs) and, with
    `echo`, shown through `job` (above its bar). The exit code."""
    os.makedirs(os.path.dirname(os.path.abspath(log_path)), exist_ok=True)
    with open(log_path, "w", buffering=1) as log:
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1, errors="replace", **popen
        )
        assert proc.stdout is not None
        for line in proc.stdout:
            log.write(line)
            if echo and job is not None:
                job.note(line)
            elif echo:
                print(line, end="", flush=True)
        return proc.wait()
