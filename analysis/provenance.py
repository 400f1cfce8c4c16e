"""Where the numbers of a report come from: per experiment, when its runs ran, on how many CPUs, at
what load and with which torch (summary.json `host`, written by acco/harness/run/worker.py), and the
commit of the code that wrote the report.

Runs made before `host` was recorded say so ("unrecorded"): nothing is guessed."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterable

from analysis.load import Run

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def host_line(exp: str, runs: Iterable[Run]) -> str:
    """'fig7: 35 runs, 2026-12-05 (10 with host records: 2 CPUs, load 1.9–2.6 at start, torch 2.13.0)'."""
    runs = list(runs)
    hosts = [r.summary.host for r in runs if r.summary.host]
    if not runs:
        return f"{exp}: no runs"
    if not hosts:
        return f"{exp}: {len(runs)} runs (machine, load and dates unrecorded: made before runs recorded them)"
    days = sorted({h["started_utc"][:10] for h in hosts if h.get("started_utc")})
    cpus = sorted({int(h["cpus"]) for h in hosts if h.get("cpus")})
    loads = [h["load_avg_start"][0] for h in hosts if h.get("load_avg_start")]
    torch = sorted({str(h.get("torch")) for h in hosts if h.get("torch")})
    span = days[0] if len(days) == 1 else f"{days[0]} to {days[-1]}" if days else "dates unrecorded"
    load = f"load (1 min) {min(loads):.1f}–{max(loads):.1f} at start" if loads else "load unrecorded"
    return (
        f"{exp}: {len(runs)} runs; {len(hosts)} recorded their host: {span}, "
        f"{'/'.join(map(str, cpus))} CPUs, {load}, torch {', '.join(torch)}; the rest unrecorded"
        if len(hosts) < len(runs)
        else f"{exp}: {len(runs)} runs, {span}, {'/'.join(map(str, cpus))} CPUs, {load}, torch {', '.join(torch)}"
    )


def _git(*args: str) -> str:
    try:
        out = subprocess.run(["git", "-C", REPO, *args], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


def code_commit() -> str:
    """The commit of the code that writes the report ('unknown' outside a git checkout), marked when
    the code (anything outside results/) has uncommitted changes."""
    head = _git("rev-parse", "--short=12", "HEAD") or "unknown"
    dirty = _git("status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)results")
    return f"{head} (with uncommitted changes)" if dirty else head
