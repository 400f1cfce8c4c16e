#!/usr/bin/env python
"""Make a results folder small enough to commit (what results/cpu/ holds in the repository).

    python analysis/slim_results.py results --scale cpu [--seconds 8]

Keeps config.yaml, metrics.csv, summary.json, eval.json of every run, and writes timing.json (the
trace's median span times, analysis/load.py Run.span_times) for every run that has a trace. Removes models, final
parameters, checkpoints, W&B files and the run's console log (train.log). Keeps trace.json only
where a figure draws from it: every fig4 run (its per-step times) and, per experiment and method,
the run the overlap timeline uses (the first by name), cut to its first `--seconds` of events, with
times made relative to the trace's start and rounded to 0.1 µs. Every other trace.json is removed."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys

from acco.atomic import atomic_open
from analysis.load import TIMING_FILE, discover_runs, trace_is_cut

DROP = ("model", "final_params.pt", "wandb", "checkpoints", "train.log")


def slim_trace(path: str, seconds: float | None) -> None:
    with open(path) as f:
        data = json.load(f)
    events = data["traceEvents"] if isinstance(data, dict) else data
    spans = [e for e in events if e.get("ph") == "X"]
    t0 = min((e["ts"] for e in spans), default=0.0)
    kept = []
    for e in events:
        if e.get("ph") != "X":
            kept.append(e)
            continue
        ts = e["ts"] - t0
        if seconds is not None and ts > seconds * 1e6:
            continue
        e = {k: v for k, v in e.items() if k != "args"}
        e["ts"], e["dur"] = round(ts, 1), round(e["dur"], 1)
        kept.append(e)
    out: dict[str, object] = {"traceEvents": kept, "displayTimeUnit": "ms"}
    if seconds is not None:
        out["otherData"] = {"note": f"first {seconds:g} s of the run (slimmed for the repository)"}
    with atomic_open(path, "w") as f:
        json.dump(out, f, separators=(",", ":"))


def slim(root: str, scale: str, seconds: float) -> dict:
    kept, removed = [], 0
    timeline_runs = set()
    runs = discover_runs(root, scale=scale, completed_only=False, clock=None)  # the virtual clock's too
    for exp in sorted({r.exp for r in runs}):
        seen = set()
        for run in (r for r in runs if r.exp == exp and r.info["clock"] == "real"):  # timelines: measured
            if run.method not in seen and run.trace_path:
                seen.add(run.method)
                timeline_runs.add(run.path)
    for run in runs:
        for name in DROP:
            p = os.path.join(run.path, name)
            if os.path.isdir(p):
                shutil.rmtree(p)
            elif os.path.exists(p):
                os.remove(p)
        trace = os.path.join(run.path, "trace.json")
        if not os.path.exists(trace):
            continue
        timing = os.path.join(run.path, TIMING_FILE)
        if not os.path.exists(timing) and not trace_is_cut(trace):  # from the whole trace only
            with atomic_open(timing, "w") as f:
                json.dump(run.span_times(), f, indent=1)
        if run.exp == "fig4":
            slim_trace(trace, None)
            kept.append(trace)
        elif run.path in timeline_runs:
            slim_trace(trace, seconds)
            kept.append(trace)
        else:
            os.remove(trace)
            removed += 1
    return {"kept": kept, "removed": removed}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("root")
    ap.add_argument("--scale", default="cpu", choices=["cpu", "paper"])
    ap.add_argument("--seconds", type=float, default=8.0)
    args = ap.parse_args(argv)
    if not os.path.isdir(os.path.join(args.root, args.scale)):
        print(f"error: no {args.scale} results under {args.root}", file=sys.stderr)
        return 2
    out = slim(args.root, args.scale, args.seconds)
    print(f"kept {len(out['kept'])} traces (slimmed), removed {out['removed']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
