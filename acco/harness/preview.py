"""What a job of many runs would do, before it does it: each run complete (skipped), to train, or to
train again (made with other settings than its config now says), with an ETA for what trains. The
one planner of `experiments/reproduce.py <ids> --plan` and of a sweep's preview
(`experiments/train.py -m ... --plan`).

A planned run is a dict: name (what the plan calls it), exp and scale (whose measured times give
its ETA), cost (steps x workers, seconds_per_cost's unit), and its state (run_state): complete,
stale, status, wall_s."""

from __future__ import annotations

import os
import re
import textwrap

from ..methods import METHODS
from ..runtime.progress import duration
from ..runtime.saved_config import saved_config
from ..runtime.summary import RunSummary, read_summary
from . import SOURCE_ROOT

# the plan's lines fit a terminal of this many columns: a longer run name wraps in the name column
PLAN_WIDTH = 110
NAME_WIDTH = 72  # the name column; the status (24) and the ETA follow it


def run_cost(cfg: dict) -> float:
    """A run's weight for the ETA: its steps x workers, or for a budget its samples x workers over
    the samples a committed step holds without adaptive extras (0: unknown)."""
    train = cfg.get("train") or {}
    world = int(cfg.get("world_size") or 1)
    if train.get("steps"):
        return float(train["steps"]) * world
    data = cfg.get("data") or {}
    per_step = world * int(train.get("accum") or 1) * int(data.get("micro_batch_size") or 1)
    spec = METHODS.get(str((cfg.get("method") or {}).get("name")))  # unknown: the run's own check says so
    per_step *= spec.rounds_per_step if spec else 1
    if train.get("samples"):
        return float(train["samples"]) / per_step * world
    if train.get("tokens") and data.get("seq_len"):  # packed pretraining: seq_len tokens a sample
        return float(train["tokens"]) / (per_step * int(data["seq_len"])) * world
    return 0.0


def stale_settings(out_dir: str, cfg: dict) -> list[str]:
    """The settings in which the run in `out_dir` was made differently from `cfg`
    (changed_keys); [] without a saved config.yaml."""
    from ..config.experiments import changed_keys

    saved = saved_config(out_dir)
    return changed_keys(saved, cfg) if saved is not None else []


def run_state(out_dir: str, cfg: dict, compare: bool = True) -> dict:
    """Where the run `cfg` stands in its folder: complete (a completed run made with these settings:
    skipped), stale (the settings a completed run was made with otherwise: it trains again), status
    (summary.json's, None without one) and wall_s (its wall time; None on the virtual clock, whose
    times say nothing of the machine's). compare=False: a completed run is complete whatever its
    settings (a sweep skips it so; the reproduce command trains a stale one again)."""
    summary = read_summary(out_dir) or RunSummary()
    stale = stale_settings(out_dir, cfg) if summary.completed and compare else []
    real_clock = (cfg.get("clock") or {}).get("mode") != "virtual"
    return {
        "complete": summary.completed and not stale,
        "stale": stale,
        "status": summary.status,
        "wall_s": summary.total_wall_time_s if real_clock else None,
    }


def weigh(runs: list[dict]) -> list[dict]:
    if any(r["cost"] <= 0 for r in runs):  # a run of unknown length somewhere: weigh runs alike
        for r in runs:
            r["cost"] = 1.0
    return runs


def seconds_per_cost(runs: list[dict], exp: str, scale: str) -> tuple[float, str] | None:
    """Seconds per unit of cost (steps x workers) the complete runs of `exp` took on the machine:
    those of this plan, else the committed ones (results/<scale>/<exp> of the clone, from another
    machine); None with neither. A run on the virtual clock says nothing of the machine's time."""
    timed = [(r["wall_s"], r["cost"]) for r in runs if r["exp"] == exp and r["complete"]]
    timed = [(w, c) for w, c in timed if w and c]
    source = "this results folder's complete runs"
    if not timed:
        folder = os.path.join(SOURCE_ROOT, "results", scale, exp)
        for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
            summary = read_summary(os.path.join(folder, name)) or RunSummary()
            cfg = saved_config(os.path.join(folder, name)) if summary.completed else None
            if cfg is None:
                continue
            if (cfg.get("clock") or {}).get("mode") != "virtual" and summary.total_wall_time_s:
                timed.append((float(summary.total_wall_time_s), run_cost(cfg)))
        timed = [(w, c) for w, c in timed if c]
        source = f"the committed runs' times in results/{scale}/{exp}"
    if not timed:
        return None
    return sum(w for w, _ in timed) / sum(c for _, c in timed), source


def wrapped_name(name: str, width: int = NAME_WIDTH) -> list[str]:
    """A run name in lines of at most `width` characters, cut after a '/' or a '_' (a folder name's
    separator) where it can be: a long folder name wraps in its column, not past the terminal."""
    lines, line = [], ""
    for part in re.findall(r"[^_/]*[_/]|[^_/]+$", name):
        while len(part) > width:  # one part longer than the column: cut it where it must be
            if line:
                lines.append(line)
                line = ""
            lines.append(part[:width])
            part = part[width:]
        if len(line) + len(part) > width:
            lines.append(line)
            line = ""
        line += part
    return [*lines, line] if line or not lines else lines


def plan_text(
    runs: list[dict],
    scale: str,
    seeds: list[dict] | None,
    all_done: str = "nothing trains; the figures are drawn again",
) -> str:
    """What the job would do: each run complete (skipped), to train, or to train again (made with
    other settings), with the ETA of what trains (seconds_per_cost); `seeds`: the runs the undecided
    claims add next (None: not known before the runs above are made); `all_done`: what the head
    says when nothing trains. Every line fits PLAN_WIDTH columns."""
    keys = dict.fromkeys((r["exp"], r.get("scale", scale)) for r in runs)
    rates = {key: seconds_per_cost(runs, *key) for key in keys}
    lines, todo_s, unknown = [], 0.0, 0
    width = min(max((len(r["name"]) for r in runs), default=0), NAME_WIDTH)
    for r in runs:
        rate = rates[(r["exp"], r.get("scale", scale))]
        if r["complete"]:
            what, eta = "complete: skipped", ""
        else:
            what = "to train again" if r["stale"] else "to train"
            what += f" ({r['status']})" if r["status"] and not r["stale"] else ""
            est = rate[0] * r["cost"] if rate else None
            todo_s += est or 0.0
            unknown += est is None
            eta = f"~{duration(est)}" if est is not None else "?"
        *above, last = wrapped_name(r["name"], width)
        lines += [f"  {part}" for part in above]
        lines.append(f"  {last:<{width}}  {what:<24}  {eta}".rstrip())
        if r["stale"]:
            more = ", …" if len(r["stale"]) > 4 else ""
            lines += textwrap.wrap(
                f"changed: {', '.join(r['stale'][:4])}{more}",
                PLAN_WIDTH,
                initial_indent="    ",
                subsequent_indent="      ",
                break_on_hyphens=False,
            )
    done = sum(r["complete"] for r in runs)
    head = [f"plan: {len(runs)} runs, {done} complete (skipped), {len(runs) - done} to train"]
    if len(runs) > done:
        head[0] += f", ETA ~{duration(todo_s)}" if todo_s else ""
        head[0] += f" ({unknown} of unknown length)" if unknown else ""
        sources = sorted({rate[1] for rate in rates.values() if rate}) if todo_s else []
        head += [f"  (ETA from {source})" for source in sources]  # one a line: an experiment each
    elif not seeds:
        head[0] += f": {all_done}"
    tail = []
    if seeds is None:
        tail.append("then, for each claim undecided at a planned look, the seeds of its next look")
    elif seeds:
        todo = [r for r in seeds if not r["complete"]]
        tail.append(f"then {len(seeds)} more runs for claims undecided at a planned look, {len(todo)} to train:")
        tail += [f"  {part}" for r in todo for part in wrapped_name(r["name"], PLAN_WIDTH - 2)]
    return "\n".join([*head, *lines, *tail])
