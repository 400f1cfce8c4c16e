#!/usr/bin/env python
"""Submit all runs of an experiment to Slurm through submitit: runs of the same shape go out as
one job array; runs that already have a completed result are skipped. With --wait: "run k of N"
and an ETA while the jobs run, one table at the end (status, wall time, a failure's log and last
error line), exit code 1 if a job failed.

    python experiments/submit.py experiment=fig5/cpu launcher=slurm_local
    python experiments/submit.py experiment=fig8/paper launcher=slurm launcher.partition=gpu --wait
"""

import os
import sys
from typing import Any

from acco.config.experiments import CONF_DIR, compose, expand_runs
from acco.config.validate import ConfigError, check_overrides
from acco.run.multirun import MultiRun, last_error_line, log_error_line
from acco.run.start import check_run, fail_config, prepare_out_dir

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def plan(overrides: list[str]) -> tuple[str, list[tuple[str, dict, int | None]]]:
    """The experiment's id and its runs: (name, config, world size), the world None for a run that
    is complete already. Bad input: one `error:` line, exit 2, before anything is submitted."""
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
    planned: list[tuple[str, dict, int | None]] = []
    for run in runs:
        cfg = compose([*overrides, *run])  # the run's own settings define it (and its folder)
        name = f"{exp['id']}/{os.path.basename(os.path.normpath(cfg['out_dir']))}"
        if (cfg.get("overwrite") is not True) and _completed(cfg["out_dir"]):
            planned.append((name, cfg, None))
            continue
        cfg, world = check_run(dict(cfg, overwrite=True), external=False)
        planned.append((name, cfg, world))
    return str(exp["id"]), planned


def submit_planned(planned, job: MultiRun | None) -> list[tuple[str, Any]]:
    """Submit the runs still to do (the complete ones are skipped, through `job` if any); (name, submitit job)."""
    from acco.slurm.submit import submit

    for name, cfg, world in planned:
        if world is None:
            if job is not None:
                job.skip(name)
            else:
                print(f"skip (completed): {cfg['out_dir']}")
    todo = [(name, cfg, world) for name, cfg, world in planned if world is not None]
    if not todo:
        return []
    try:
        jobs = submit(
            [c for _, c, _ in todo], [w for _, _, w in todo], prepare=lambda c: prepare_out_dir(c["out_dir"], c)
        )
    except ConfigError as exc:
        fail_config(str(exc))
    for (_, cfg, _), sjob in zip(todo, jobs):
        line = f"submitted {sjob.job_id}: {cfg['out_dir']}"
        job.note(line) if job is not None else print(line, flush=True)
    return [(name, sjob) for (name, _, _), sjob in zip(todo, jobs)]


def wait_submitted(job: MultiRun, submitted: list[tuple[str, Any]]) -> None:
    """Wait for the jobs in order of submission. A run's wall time is how long the wait for it
    took (jobs run side by side: the later ones often end soon after the first)."""
    for name, sjob in submitted:
        job.begin(name)
        try:
            sjob.results()  # every task's result (one per rank)
        except Exception as exc:  # noqa: BLE001 - submitit's job error carries the remote traceback
            log = str(sjob.paths.stderr)  # task 0's (rank 0)
            error = log_error_line(log) or last_error_line(str(exc)) or type(exc).__name__
            job.end(False, log=log, error=f"Slurm job {sjob.job_id} ({sjob.state}): {error}")
            continue
        job.end(True)


def main(argv: list[str]) -> int:
    wait = "--wait" in argv
    overrides = [a for a in argv if a != "--wait"]
    exp_id, planned = plan(overrides)
    if all(world is None for _, _, world in planned):
        scale = planned[0][1].get("scale") if planned else "?"
        print(f"all {len(planned)} runs of {exp_id} ({scale}) are complete")
        return 0
    job = MultiRun(f"submit {exp_id}", [name for name, _, _ in planned], stream=sys.stdout) if wait else None
    submitted = submit_planned(planned, job)
    if job is None:
        return 0
    wait_submitted(job, submitted)
    return job.close()


def _completed(out_dir: str) -> bool:
    from acco.slurm.submit import completed

    return completed(out_dir)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
