#!/usr/bin/env python
"""Submit all runs of an experiment to Slurm through submitit: runs of the same shape go out as
one job array; runs that already have a completed result are skipped.

    python experiments/submit.py experiment=fig5/cpu launcher=slurm_local
    python experiments/submit.py experiment=fig8/paper launcher=slurm launcher.partition=gpu --wait
"""

import os
import sys

from acco.config.experiments import CONF_DIR, compose, expand_runs
from acco.config.validate import ConfigError, check_overrides
from acco.run.start import check_run, fail_config, prepare_out_dir

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main(argv: list[str]) -> int:
    wait = "--wait" in argv
    overrides = [a for a in argv if a != "--wait"]
    try:
        check_overrides(overrides, CONF_DIR)
        base = compose(overrides)
    except (ConfigError, ValueError) as exc:
        fail_config(str(exc).splitlines()[0])
    exp = base.get("experiment")
    if not exp:
        fail_config("name an experiment: experiment=<id>/<scale> (see conf/experiment/)")
    if base["launcher"].get("name") != "slurm":
        fail_config("submit.py submits to Slurm: add launcher=slurm (or launcher=slurm_local, or your profile)")
    runs = expand_runs(exp)
    if not runs:
        fail_config(f"experiment {exp['id']} has no training runs of its own")
    cfgs, worlds = [], []
    for run in runs:
        cfg = compose([*overrides, *run])  # the run's own settings define it (and its folder)
        if (cfg.get("overwrite") is not True) and _completed(cfg["out_dir"]):
            print(f"skip (completed): {cfg['out_dir']}")
            continue
        cfg, world = check_run(dict(cfg, overwrite=True), external=False)
        cfgs.append(cfg)
        worlds.append(world)
    if not cfgs:
        print(f"all {len(runs)} runs of {exp['id']} ({base['scale']}) are complete")
        return 0
    from acco.slurm.submit import submit, wait_for

    try:
        jobs = submit(cfgs, worlds, prepare=lambda c: prepare_out_dir(c["out_dir"], c))
    except ConfigError as exc:
        fail_config(str(exc))
    for cfg, job in zip(cfgs, jobs):
        print(f"submitted {job.job_id}: {cfg['out_dir']}")
    return wait_for(jobs) if wait else 0


def _completed(out_dir: str) -> bool:
    from acco.slurm.submit import completed

    return completed(out_dir)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
