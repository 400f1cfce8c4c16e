#!/usr/bin/env python
"""Reproduce one paper figure or table: run what is missing, then plot.

    python experiments/reproduce.py fig10 --scale cpu --launcher local
    python experiments/reproduce.py fig8 --scale paper --launcher slurm [launcher.partition=gpu ...]
    python experiments/reproduce.py fig7 --scale rehearsal --launcher slurm   # the dress rehearsal

Runs whose results are complete are not run again. Tables (table1-3) only plot: they are computed
from other experiments' runs (table2, table3 from fig7/fig11/fig8)."""

import argparse
import os
import subprocess
import sys

from acco.config.experiments import compose, expand_runs, experiment_ids, scales_of
from acco.run.files import read_summary

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


EXPERIMENTS = experiment_ids()
SOURCES = {"table2": ["fig11", "fig7"], "table3": ["fig11", "fig7", "fig8"], "table1": []}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("experiment")
    parser.add_argument("--scale", default="cpu", choices=["cpu", "paper", "rehearsal"])
    parser.add_argument("--launcher", default="local", choices=["local", "slurm"])
    parser.add_argument("--results", default="results")
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="print each run's GPUs, nodes, per-GPU memory estimate, wall-clock and GPU-hours; submit and run nothing",
    )
    parser.add_argument("overrides", nargs="*", help="extra Hydra overrides for every run")
    args = parser.parse_intermixed_args(argv)
    if args.experiment not in EXPERIMENTS:
        print(
            f"error: unknown experiment {args.experiment!r}; choose one of: {', '.join(EXPERIMENTS)}", file=sys.stderr
        )
        return 2
    print(
        f"reproduce {args.experiment}: SCALE={args.scale} LAUNCHER={args.launcher} results={args.results}", flush=True
    )
    todo = SOURCES.get(args.experiment, [args.experiment])
    missing = [e for e in todo if args.scale not in scales_of(e)]
    if missing:
        print(
            f"error: {', '.join(missing)} has no {args.scale} scale (conf/experiment/<id>/{args.scale}.yaml)",
            file=sys.stderr,
        )
        return 2
    base = [f"results_root={args.results}", *args.overrides]
    if args.dry_run:  # estimates only: no GPU, Slurm, data or model weights needed
        from acco.analytic.run_plan import dry_run

        profile = (
            [f"launcher={'slurm_local' if args.scale in ('cpu', 'rehearsal') else 'slurm'}"]
            if args.launcher == "slurm" and not any(o.startswith("launcher=") for o in base)
            else []
        )
        return dry_run(todo, [f"results_root={args.results}", *args.overrides, *profile], args.scale)
    for exp in todo:
        common = [f"experiment={exp}/{args.scale}", *base]
        if args.launcher == "slurm":
            # the CPU scale and the rehearsal (paper configs, CPU sizes) run on the local test cluster
            profile = "slurm_local" if args.scale in ("cpu", "rehearsal") else "slurm"
            if not any(o.startswith("launcher=") for o in common):
                common.append(f"launcher={profile}")
            code = subprocess.call([sys.executable, os.path.join(ROOT, "experiments", "submit.py"), *common, "--wait"])
            if code:
                return code
            continue
        runs = expand_runs(compose(common)["experiment"])
        for i, run in enumerate(runs, 1):
            out_dir = compose([*common, *run])["out_dir"]
            if (read_summary(out_dir) or {}).get("status") == "completed":
                print(f"[{exp} {i}/{len(runs)}] done already: {out_dir}", flush=True)
                continue
            print(f"[{exp} {i}/{len(runs)}] {' '.join(run)}", flush=True)
            code = subprocess.call(
                [sys.executable, os.path.join(ROOT, "experiments", "train.py"), *common, *run, "overwrite=true"]
            )
            if code:
                print(f"error: run {' '.join(run)} of {exp} failed (exit {code})", file=sys.stderr)
                return code
    return subprocess.call(
        [
            sys.executable,
            os.path.join(ROOT, "analysis", "make_figures.py"),
            args.results,
            "--scale",
            args.scale,
            "--only",
            ",".join(todo + ([args.experiment] if args.experiment not in todo else [])),
        ]
    )


if __name__ == "__main__":
    sys.exit(main())
