#!/usr/bin/env python
"""Regenerate every figure and table the results folder has data for.

    python analysis/make_figures.py results [--scale cpu] [--only fig5,fig8,table3]
                                    [--no-timelines] [--timeline-seconds 3]

Figures go to `<root>/<scale>/<exp>/figures/<exp>.{png,pdf}` (plus, per method, an overlap timeline
`timeline_<run>.{png,pdf}` from a run's trace.json), tables to `<root>/<scale>/tables/tableN.{md,csv}`,
and the report beside the paper's claims to `<root>/<scale>/REPORT.md` with claims.md, claims.csv,
details.md, headline.json and its picture figures/claims.{png,pdf} (analysis/report.py).
Prints each file written and each figure or table skipped, with the reason (no runs yet); a missing
experiment never makes it fail. Exit status 1 only if a figure or table raised an unexpected error.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from typing import Literal

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from analysis.figures import FIGURES, run_timeline
from analysis.load import discover_runs, loaded_once
from analysis.render import MissingRuns
from analysis.report import write_reproduction_report
from analysis.tables import TABLES

ALL = list(FIGURES) + list(TABLES)


def make_all(
    root: str,
    scale: str = "cpu",
    only: list[str] | None = None,
    timelines: bool = True,
    timeline_seconds: float = 3.0,
    out=print,
    report: bool = True,
) -> dict:
    """Returns {"written": [paths], "skipped": [(id, reason)], "errors": [(id, message)]}; every figure,
    table and the report read the one loaded set of runs (analysis/load.py loaded_once)."""
    with loaded_once():
        return _make_all(root, scale, only, timelines, timeline_seconds, out, report)


def _make_all(root, scale, only, timelines, timeline_seconds, out, report) -> dict:
    wanted = only or ALL
    unknown = [w for w in wanted if w not in ALL]
    written: list[str] = []
    skipped: list[tuple[str, str]] = [(u, "unknown id") for u in unknown]
    errors: list[tuple[str, str]] = []
    for fid in [w for w in ALL if w in wanted]:
        try:
            if fid in FIGURES:
                fig = FIGURES[fid](root, scale, save=True)
                paths = list(fig.saved_paths)
                plt.close(fig)
                if timelines:
                    paths += _timelines(root, fid, scale, timeline_seconds)
            else:
                result = TABLES[fid](root, scale, save=True)
                paths = result["paths"]
                if not paths:
                    raise MissingRuns(f"no completed source runs at scale {scale}")
        except MissingRuns as exc:
            skipped.append((fid, str(exc)))
            out(f"skipped {fid}: {exc}")
            continue
        except Exception as exc:  # report, keep going with the others
            errors.append((fid, f"{type(exc).__name__}: {exc}"))
            out(f"error {fid}: {type(exc).__name__}: {exc}")
            traceback.print_exc(file=sys.stderr)
            continue
        for path in paths:
            out(f"wrote {path}")
        written += paths
    for u in unknown:
        out(f"skipped {u}: unknown id (choose from {', '.join(ALL)})")
    if report:  # the report reads every experiment of this scale, whatever was redrawn now
        for path in write_reproduction_report(root, scale):
            out(f"wrote {path}")
            written.append(path)
    return {"written": written, "skipped": skipped, "errors": errors}


def _timelines(root: str, exp: str, scale: str, seconds: float) -> list[str]:
    """One overlap timeline per method: its first run (by name) that has a trace.json."""
    paths, done = [], set()
    for run in discover_runs(root, exp, scale):
        if run.method in done or not run.trace_path:
            continue
        try:
            fig = run_timeline(run, root, seconds=seconds)
        except (MissingRuns, ValueError, KeyError, OSError):
            continue
        paths += fig.saved_paths
        plt.close(fig)
        done.add(run.method)
    return paths


def log_to_wandb(
    root: str, scale: str, paths: list[str], mode: Literal["offline", "online"] = "offline", project: str = "acco"
) -> str:
    """The PNG figures written as images in one W&B run (group <scale>, job type figures) beside the
    training runs, and REPORT.md as a file; offline by default, under <root>/<scale>/wandb (git-ignored).
    Returns the run's folder."""
    import wandb

    pngs = sorted(p for p in paths if p.endswith(".png"))
    where = os.path.join(root, scale)
    run = wandb.init(
        project=project,
        name=f"figures-{scale}",
        group=scale,
        job_type="figures",
        dir=where,
        mode=mode,
        config={"results": os.path.abspath(root), "scale": scale},
        reinit="finish_previous",
    )
    run.log({os.path.splitext(os.path.basename(p))[0]: wandb.Image(p) for p in pngs})
    report = os.path.join(where, "REPORT.md")
    if os.path.exists(report):
        run.save(report, base_path=where, policy="now")
    folder = str(run.dir)
    run.finish()
    return folder


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("root", help="results folder (holds <scale>/<exp>/<run>/)")
    ap.add_argument("--scale", default="cpu", choices=["cpu", "paper", "rehearsal"])
    ap.add_argument("--only", default="", help=f"comma-separated ids among {','.join(ALL)}")
    ap.add_argument("--no-timelines", action="store_true", help="skip the per-run overlap timelines")
    ap.add_argument("--timeline-seconds", type=float, default=3.0)
    ap.add_argument("--wandb", action="store_true", help="also log the figures as images to a W&B run (offline)")
    ap.add_argument("--wandb-mode", default="offline", choices=["offline", "online"])
    args = ap.parse_args(argv)
    if not os.path.isdir(args.root):
        print(f"error: no results folder {args.root}", file=sys.stderr)
        return 2
    only = [s.strip() for s in args.only.split(",") if s.strip()] or None
    unknown = [i for i in only or [] if i not in ALL]
    if unknown:  # before a minute of drawing: a typo is one line
        print(
            f"error: --only {','.join(unknown)}: no such figure or table; choose from {','.join(ALL)}", file=sys.stderr
        )
        return 2
    result = make_all(
        args.root, args.scale, only, timelines=not args.no_timelines, timeline_seconds=args.timeline_seconds
    )
    print(f"{len(result['written'])} files written, {len(result['skipped'])} skipped, {len(result['errors'])} errors")
    if args.wandb:
        print(f"logged the figures to W&B: {log_to_wandb(args.root, args.scale, result['written'], args.wandb_mode)}")
    return 1 if result["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
