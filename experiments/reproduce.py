#!/usr/bin/env python
"""Reproduce paper figures and tables: run what is missing, then plot.

    python experiments/reproduce.py fig10 --scale cpu --launcher local
    python experiments/reproduce.py fig5,fig8 --scale cpu          # several: one job, one summary
    python experiments/reproduce.py all --scale cpu                # every figure and table (make reproduce)
    python experiments/reproduce.py fig8 --scale paper --launcher slurm [launcher.partition=gpu ...]
    python experiments/reproduce.py fig7,fig8 --scale paper --launcher slurm --no-wait   # submit, return
    python experiments/reproduce.py fig7 --scale rehearsal --launcher slurm   # the dress rehearsal

Runs whose results are complete are not run again ("skipped: already complete"); a completed run
whose saved config.yaml differs from what the experiment's files now compose (a changed rate, step
budget, ...) is run again, and says in which settings. Every run shows
"run k of N: <experiment>/<run>" with an ETA for the whole job; a local run's output goes to
<run folder>/train.log as it runs (and to the terminal); a failed run does not stop the others.
At the cpu scale (--add-seeds; --no-add-seeds turns it off) the claims each experiment lists
(conf/experiment_info/<id>.yaml, tested by analysis/claims.py) that are undecided at a planned look
then get the seeds of their next planned look (analysis/stats.py's stopping rule: the default looks at
5 and 10 paired seeds; a claim with one fixed n gets none), the runs of both groups again with those
seeds; no other number of seeds is ever looked at. The end: one table per pass (each run's status,
wall time, a failure's log and last error line), then the figures; exit code 1 if a run failed. Tables (table1-3) only
plot: they are computed from other experiments' runs (table2, table3 from fig7/fig11/fig8).

With --launcher slurm every run of every experiment is submitted first, then waited for (--no-wait:
return once submitted; experiments/status.py shows where they are). The same command again skips
what is complete or still queued/running (and waits for it), and resumes what stopped from its
checkpoint; only overwrite=true starts runs over (experiments/submit.py)."""

import argparse
import os
import re
import subprocess
import sys

from acco.config.experiments import (
    CONF_DIR,
    compose,
    compose_run_list,
    compose_runs,
    experiment_block,
    experiment_ids,
    results_root_override,
    run_list_keys,
    scales_of,
    variant_root,
)
from acco.config.validate import ConfigError, check_overrides
from acco.harness import TRAIN
from acco.harness.multirun import MultiRun, log_error_line, run_logged
from acco.harness.preview import plan_text, run_cost, run_state, weigh

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


EXPERIMENTS = experiment_ids()
SOURCES = {"table2": ["fig11", "fig7"], "table3": ["fig11", "fig7", "fig8"], "table1": []}


def paper_order(ids: list[str]) -> list[str]:
    """fig4 ... fig11, then table1 ... table3, then what goes beyond the paper (beyond_diloco, lr_sweep)."""
    kind = {"fig": 0, "table": 1}
    return sorted(ids, key=lambda e: (kind.get(re.sub(r"\d", "", e), 2), int(re.sub(r"\D", "", e) or 0), e))


def chosen(arg: str, scale: str) -> list[str]:
    """The experiments named (a comma list), or all that have this scale (lr_sweep, beyond_diloco: cpu only)."""
    if arg != "all":
        return [e for e in arg.split(",") if e]
    return [e for e in paper_order(EXPERIMENTS) if scale in scales_of(e) or e in SOURCES]


def training_experiments(wanted: list[str]) -> list[str]:
    """The experiments whose runs the wanted figures and tables need, each once, in order."""
    out: list[str] = []
    for e in wanted:
        out += [s for s in SOURCES.get(e, [e]) if s not in out]
    return out


def error(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def plan_run(exp: str, scale: str, base: list[str], run: list[str], cfg: dict | None = None) -> dict:
    """One run composed (a bad override fails here, before any run): its name, overrides, folder, cost
    for the ETA (steps x workers), whether it is complete, and its identity (analysis/load.py run_info).
    `cfg`: the run composed already (compose_run_list)."""
    from analysis.claims import identity
    from analysis.load import run_info

    common = [f"experiment={exp}/{scale}", *base]
    if cfg is None:
        cfg = compose([*common, *run], in_experiment=True)  # the experiment's own folder under results_root
    out_dir = cfg["out_dir"]
    return {
        "name": f"{exp}/{os.path.basename(os.path.normpath(out_dir))}",
        "exp": exp,
        "scale": scale,
        "args": [*common, *run],
        "run": list(run),
        "out_dir": out_dir,
        "cost": run_cost(cfg),
        # complete, status, wall time; a completed run made from other settings (the experiment's
        # file changed since) is run again: "stale" says in which
        **run_state(out_dir, cfg),
        "info": identity(run_info(cfg), cfg),
    }


_PLANNED: dict[tuple, list[dict]] = {}


def local_runs(todo: list[str], scale: str, base: list[str]) -> list[dict]:
    """Every run of the experiments, composed up front (plan_run; compose_run_list: Hydra composes
    once per method, not once per run). Cached: the seeds' passes plan the same runs again."""
    runs = []
    for exp in todo:
        key = (exp, scale, tuple(base))
        if key not in _PLANNED:
            listed, cfgs = compose_run_list([f"experiment={exp}/{scale}", *base], in_experiment=True)
            _PLANNED[key] = [plan_run(exp, scale, base, run, cfg) for run, cfg in zip(listed, cfgs)]
        runs += [dict(r) for r in _PLANNED[key]]
    return weigh(runs)


def without_seed(run: list[str]) -> list[str]:
    return [o for o in run if not o.startswith("seed=")]


def more_seed_runs(todo: list[str], scale: str, base: list[str], results: str) -> list[dict]:
    """The runs the experiments' undecided claims need (analysis/claims.py): for each claim whose
    verdict is 'needs more seeds', every configured run of its groups A and B with the seeds up to
    its next planned look (seeds_wanted; paired: both groups get the same seeds), those not already
    there."""
    from analysis.claims import claim_clock, claims_of, evaluate, resolve, runs_for, seeds_wanted, selected
    from analysis.load import loaded_once

    extra: dict[tuple, list[str]] = {}  # (exp, *overrides, seed) -> the run's overrides
    for exp in todo:
        claims = claims_of(experiment_block(exp, scale), scale)
        if not claims:
            continue
        planned = local_runs([exp], scale, base)
        with loaded_once():  # each run folder read once, whichever clocks the claims read
            done = runs_for(claims, results, exp, scale)
        infos = [r["info"] for r in planned]
        for claim in claims:
            want = seeds_wanted(evaluate(claim, done[claim_clock(claim)]))
            for side in (claim.a, claim.b) if want else ():
                chosen_side = resolve(side, infos)
                for r in planned:
                    if not selected(r["info"], chosen_side):
                        continue
                    unseeded = without_seed(r["run"])
                    have = {p["info"]["seed"] for p in planned if without_seed(p["run"]) == unseeded}
                    for seed in range(want):
                        key = (exp, *unseeded, seed)
                        if seed not in have and key not in extra:
                            extra[key] = [*unseeded, f"seed={seed}"]
    return weigh([p for exp in todo for p in _plan_runs(exp, scale, base, [k for k in extra if k[0] == exp], extra)])


def _plan_runs(exp: str, scale: str, base: list[str], keys: list[tuple], runs: dict[tuple, list[str]]) -> list[dict]:
    """plan_run for each of `exp`'s runs, composed together (compose_runs: once per method)."""
    if not keys:
        return []
    listed = [runs[k] for k in keys]
    cfgs = compose_runs([f"experiment={exp}/{scale}", *base], listed, in_experiment=True)
    return [plan_run(exp, scale, base, run, cfg) for run, cfg in zip(listed, cfgs)]


def run_here(title: str, runs: list[dict]) -> MultiRun:
    job = MultiRun(title, [(r["name"], r["cost"]) for r in runs], stream=sys.stdout)
    for r in runs:
        if r["complete"]:
            job.skip(r["name"])
            continue
        if r.get("stale"):
            print(
                f"{r['name']}: completed with other settings than the experiment's now "
                f"({', '.join(r['stale'][:4])}{', …' if len(r['stale']) > 4 else ''}): running it again",
                flush=True,
            )
        job.begin(r["name"])
        log = os.path.join(r["out_dir"], "train.log")
        try:
            code = run_logged([*TRAIN, *r["args"], "overwrite=true"], log, job)
        except OSError as exc:  # no log file (e.g. the disk is full): the run cannot start either
            job.end(False, log=None, error=f"cannot write {log}: {exc.strerror}")
            continue
        job.end(code == 0, log=log, error=None if code == 0 else (log_error_line(log) or f"exit {code}"))
    return job


def load_submit():
    """experiments/submit.py's module, acco.harness.commands.submit (imported when Slurm is used)."""
    from acco.harness.commands import submit

    return submit


def slurm_profile(scale: str, base: list[str]) -> list[str]:
    """The launcher profile, unless the overrides name one: the CPU scale and the rehearsal (paper
    configs, CPU sizes) run on the local test cluster."""
    if any(o.startswith("launcher=") for o in base):
        return []
    return [f"launcher={'slurm_local' if scale in ('cpu', 'rehearsal') else 'slurm'}"]


def run_slurm(title: str, todo: list[str], scale: str, base: list[str], wait: bool = True) -> MultiRun | None:
    """Every experiment's runs planned (and checked: bad input stops before anything is submitted),
    then all submitted (as experiments/submit.py: complete runs and runs whose job is still queued
    or running are skipped, unfinished ones resume), then waited for under one "run k of N" and one
    table. wait=False: return once submitted (None); status.py shows where they are."""
    submit = load_submit()
    profile = slurm_profile(scale, base)
    plans = [submit.plan([f"experiment={exp}/{scale}", *base, *profile])[1] for exp in todo]
    job = MultiRun(title, [p.name for planned in plans for p in planned], stream=sys.stdout) if wait else None
    submitted = [sjob for planned in plans for sjob in submit.submit_planned(planned, job)]
    if job is None:
        for exp in todo:
            args = " ".join([f"experiment={exp}/{scale}", *base, *profile])
            print(f"not waiting: python experiments/status.py {args}", flush=True)
        return None
    submit.wait_submitted(job, submitted)
    return job


def add_seeds(title: str, todo: list[str], scale: str, base: list[str], results: str) -> list[MultiRun]:
    """Passes of more_seed_runs until every claim is decided or at its last planned look (a run that
    fails is not tried again in this job)."""
    jobs: list[MultiRun] = []
    tried: set[str] = set()
    while True:
        extra = [r for r in more_seed_runs(todo, scale, base, results) if not r["complete"] and r["name"] not in tried]
        if not extra:
            return jobs
        tried |= {r["name"] for r in extra}
        print(
            f"{len(extra)} more runs: claims undecided at a planned look need the next (analysis/stats.py)", flush=True
        )
        jobs.append(run_here(f"{title}: more seeds", extra))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("experiment", help=f"one of {', '.join(EXPERIMENTS)}, a comma list, or all")
    parser.add_argument("--scale", default="cpu", choices=["cpu", "paper", "rehearsal"])
    parser.add_argument("--launcher", default="local", choices=["local", "slurm"])
    parser.add_argument("--results", default="results")
    parser.add_argument(
        "--dry-run",
        "--plan",
        dest="dry_run",
        action="store_true",
        help="say what would happen and do nothing: every run, complete (skipped) or to train, with an ETA; at "
        "--scale paper also each run's GPUs, nodes, per-GPU memory estimate, wall-clock and GPU-hours",
    )
    parser.add_argument(
        "--add-seeds",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="after the configured runs, add the seeds of the next planned look to the groups of every claim "
        "undecided at a look (default: on at the cpu scale; local launcher only)",
    )
    parser.add_argument(
        "--no-wait",
        dest="wait",
        action="store_false",
        help="--launcher slurm: submit every run and return (no figures); experiments/status.py shows where they are",
    )
    parser.add_argument("overrides", nargs="*", help="extra Hydra overrides for every run")
    args = parser.parse_intermixed_args(argv)
    wanted = chosen(args.experiment, args.scale)
    unknown = [e for e in wanted if e not in EXPERIMENTS]
    if unknown or not wanted:
        return error(f"unknown experiment {','.join(unknown)!r}; choose among: {', '.join(EXPERIMENTS)}, or all")
    print(
        f"reproduce {args.experiment}: SCALE={args.scale} LAUNCHER={args.launcher} results={args.results}", flush=True
    )
    todo = training_experiments(wanted)
    missing = [e for e in todo if args.scale not in scales_of(e)]
    if missing:
        return error(f"{', '.join(missing)} has no {args.scale} scale (conf/experiment/<id>/{args.scale}.yaml)")
    if not args.wait and args.launcher != "slurm":
        return error("--no-wait is for --launcher slurm (local runs are this process's own)")
    # overrides that change the runs (not a path, the launcher, ...): a results root of their own
    listed_keys = set().union(*(run_list_keys(experiment_block(e, args.scale)) for e in todo))
    results = variant_root(args.results, ",".join(todo), args.scale, args.overrides, listed_keys)
    if results != args.results:
        print(
            f"these overrides change the experiment's runs: results go to {results} "
            f"(not beside the runs of {args.results}/{args.scale}/; --results names another root)",
            flush=True,
        )
    args.results = results
    base = [results_root_override(args.results), *args.overrides]
    if args.dry_run:  # estimates only: no GPU, Slurm, data or model weights needed
        profile = slurm_profile(args.scale, base) if args.launcher == "slurm" else []
        try:
            check_overrides(args.overrides, CONF_DIR)
            planned = local_runs(todo, args.scale, [*base, *profile])
        except (ConfigError, ValueError) as exc:
            return error(str(exc).splitlines()[0])
        adding = args.add_seeds if args.add_seeds is not None else args.scale == "cpu"
        seeds: list[dict] | None = None if not all(r["complete"] for r in planned) else []
        if adding and seeds is not None:  # all there: the undecided claims' next seeds are known now
            seeds = more_seed_runs(todo, args.scale, base, args.results)
        print(plan_text(planned, args.scale, seeds if adding else []), flush=True)
        if args.scale != "paper":
            return 0
        from acco.harness.run.plan import dry_run

        return dry_run(todo, [*base, *profile], args.scale)
    title = f"reproduce {args.experiment} ({args.scale})"
    jobs: list[MultiRun] = []
    if todo and args.launcher == "slurm":
        slurm_job = run_slurm(title, todo, args.scale, base, wait=args.wait)
        if slurm_job is None:  # submitted, not waited for: the figures come once the runs are done
            again = " ".join(
                [args.experiment, "--scale", args.scale, "--launcher slurm", "--results", args.results, *args.overrides]
            )
            # run again: it waits for the jobs still running (submitting nothing twice), then plots
            print(f"figures: python experiments/reproduce.py {again}", flush=True)
            return 0
        jobs = [slurm_job]
    elif todo:
        try:
            check_overrides(args.overrides, CONF_DIR)
            runs = local_runs(todo, args.scale, base)
        except (ConfigError, ValueError) as exc:
            return error(str(exc).splitlines()[0])
        jobs = [run_here(title, runs)]
        if args.add_seeds if args.add_seeds is not None else args.scale == "cpu":
            jobs += add_seeds(title, todo, args.scale, base, args.results)
    figures = subprocess.call(
        [
            sys.executable,
            os.path.join(ROOT, "analysis", "make_figures.py"),
            args.results,
            "--scale",
            args.scale,
            "--only",
            ",".join(todo + [e for e in wanted if e not in todo]),
        ]
    )
    # the tables last: what a user reads when it ends
    codes = [job.close() for job in jobs]
    return max(codes, default=0) or figures


if __name__ == "__main__":
    sys.exit(main())
