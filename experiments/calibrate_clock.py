#!/usr/bin/env python
"""Measure the virtual clock's costs on this machine, and the paper-scale presets from the cost model
(acco/harness/clock_calibration/calibrate.py), into results/cpu/clock/calibration.json.

python experiments/calibrate_clock.py [--points fig7:500,fig8:45,...] [--steps 8]
       [--out results/cpu/clock/calibration.json] [--runs-dir /tmp/acco_calibration] [--presets-only] [--merge]
python experiments/calibrate_clock.py --validate 100,25 [--reps 3] [--steps 8]   (against real runs)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

from acco.config.experiments import experiment_ids, scales_of
from acco.harness.clock_calibration.calibrate import POINTS, Point, calibrate, machine_load, paper_presets

MIN_STEPS = 3  # the first step is left out, and a sync needs a step after it to be measured again


def parse_points(text: str | None) -> tuple[tuple[Point, ...], str | None]:
    """`fig7:500,fig8:45` -> points (the figures' own extra overrides kept); (points, problem)."""
    if not text:
        return POINTS, None
    known = {(p.figure, float(p.rate_mbit)): p for p in POINTS}
    out = []
    for item in text.split(","):
        fig, sep, rate = item.strip().partition(":")
        if not sep:
            return (), f"--points: '{item}' is not FIGURE:RATE_MBIT (e.g. fig8:45)"
        if fig not in experiment_ids() or "cpu" not in scales_of(fig):
            return (), f"--points: no CPU-scale experiment '{fig}' (conf/experiment/<id>/cpu.yaml)"
        try:
            r = float(rate)
        except ValueError:
            return (), f"--points: rate '{rate}' of {fig} is not a number (Mbit/s, 0 for no link)"
        if r < 0:
            return (), f"--points: rate {r:g} of {fig} is negative (Mbit/s, 0 for no link)"
        extra = next((p.extra for (f, _), p in known.items() if f == fig), ())
        out.append(known.get((fig, r), Point(fig, r, extra)))
    return tuple(out), None


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--points", default=None, help="FIGURE:RATE_MBIT,... (default: every wall-clock figure's links)")
    p.add_argument("--steps", type=int, default=8, help="committed steps per calibration run (the first not measured)")
    p.add_argument("--out", default=os.path.join("results", "cpu", "clock", "calibration.json"))
    p.add_argument("--runs-dir", default=None, help="where the calibration runs go (default: a temporary folder)")
    p.add_argument("--presets-only", action="store_true", help="only the paper-scale presets (no runs)")
    p.add_argument("--merge", action="store_true", help="keep --out's other points (measure only --points again)")
    p.add_argument(
        "--validate",
        default=None,
        metavar="RATES",
        help="instead: validate the virtual clock against real runs on these links of the calibration in --out "
        "(Mbit/s, e.g. 100,25), writing validation.csv and validation.md beside it",
    )
    p.add_argument("--reps", type=int, default=3, help="--validate: repetitions (real then virtual, interleaved)")
    a = p.parse_args(argv)
    points, problem = parse_points(a.points)
    if problem is None and a.steps < MIN_STEPS:
        problem = f"--steps {a.steps}: need at least {MIN_STEPS} (the first step is not measured)"
    rates: list[float] = []
    if problem is None and a.validate is not None:
        try:
            rates = [float(r) for r in a.validate.split(",") if r.strip()]
        except ValueError:
            problem = f"--validate {a.validate}: not a comma list of link rates (Mbit/s)"
        if problem is None and not os.path.exists(a.out):
            problem = f"--validate needs a calibration at {a.out}: run this command without --validate first"
        if problem is None and a.reps < 2:
            problem = f"--reps {a.reps}: an interval needs at least 2 repetitions"
    if problem is not None:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    if a.validate is not None:
        return run_validation(a.out, rates, a.reps, a.steps, a.runs_dir)
    previous = None
    if a.merge and os.path.exists(a.out):
        with open(a.out) as f:
            previous = json.load(f)
    if a.presets_only:
        result = {"machine": {"before": machine_load()}, "points": [], "paper_presets": paper_presets()}
    elif a.runs_dir:
        os.makedirs(a.runs_dir, exist_ok=True)
        result = calibrate(points, a.runs_dir, a.steps, previous=previous)
    else:
        with tempfile.TemporaryDirectory(prefix="acco_calibration_") as runs_dir:
            result = calibrate(points, runs_dir, a.steps, previous=previous)
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump(result, f, indent=1)
        f.write("\n")
    print(f"calibration: {a.out}")
    return 0


def run_validation(calibration_path: str, rates: list[float], reps: int, steps: int, runs_dir: str | None) -> int:
    from acco.harness.clock_calibration.validate_clock import validate_against_real_runs, write_csv
    from analysis.clock_report import validation_lines

    with open(calibration_path) as f:
        calibration = json.load(f)
    where = os.path.dirname(os.path.abspath(calibration_path))
    with tempfile.TemporaryDirectory(prefix="acco_validation_") as tmp:
        rows = validate_against_real_runs(calibration, rates, reps, steps, runs_dir or tmp)
    write_csv(rows, os.path.join(where, "validation.csv"))
    with open(os.path.join(where, "validation.md"), "w") as f:
        f.write("\n".join(validation_lines(rows)) + "\n")
    print(f"validation: {os.path.join(where, 'validation.csv')}, validation.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
