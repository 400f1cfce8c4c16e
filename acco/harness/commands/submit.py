"""Submit all runs of an experiment to Slurm through submitit: runs of the same shape go out as
one job array. Running the same command again is safe: a run whose results are complete is
skipped, a run whose job is still queued or running is skipped ("skip (Slurm job 123 RUNNING):
<folder>"), and any other run continues from its newest checkpoint (resume=auto); only
overwrite=true starts runs over. With --wait: "run k of N" and an ETA while the jobs run (those
still running from an earlier submission included), one table at the end (status, wall time, a
failure's log and last error line), exit code 1 if a job failed.

    python experiments/submit.py experiment=fig5/cpu launcher=slurm_local
    python experiments/submit.py experiment=fig8/paper launcher=slurm launcher.partition=gpu --wait

(experiments/reproduce.py --launcher slurm submits through it too.)
"""

import os
import sys
from typing import Any, NamedTuple

from acco.config.experiments import CONF_DIR, compose, expand_runs, in_variant_root
from acco.config.plain import plain
from acco.config.validate import ConfigError, check_overrides
from acco.harness.entry import (
    Resubmission,
    checked_run,
    fail_config,
    for_slurm_job,
    help_asked,
    prepare_out_dir,
    resubmission,
)
from acco.harness.multirun import MultiRun, last_error_line, log_error_line


class Planned(NamedTuple):
    name: str  # <experiment>/<run folder>
    plan: Resubmission  # what submitting it does: skip it, or submit plan.cfg
    world: int | None  # its world size; None for a run skipped


def plan(overrides: list[str]) -> tuple[str, list[Planned]]:
    """The experiment's id and its runs, each checked (bad input: one `error:` line, exit 2, before
    anything is submitted) unless it is skipped (a resubmission)."""
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
    overrides, variant = in_variant_root(overrides, base)  # overrides that change the runs: a root of their own
    if variant:
        print(f"these overrides change the experiment's runs: results go to {variant}", flush=True)
    named = []
    for run in runs:
        cfg = compose([*overrides, *run], in_experiment=True)  # the run's own settings define it (and its folder)
        named.append((f"{exp['id']}/{os.path.basename(os.path.normpath(cfg['out_dir']))}", cfg))
    return str(exp["id"]), plan_runs(named)


def plan_runs(named: list[tuple[str, dict]]) -> list[Planned]:
    """What submitting each (name, composed config) does: skip it (complete, or its job still queued
    or running), or submit it checked (bad input: one `error:` line, exit 2, before anything is
    submitted). The one planning step of every submission of many runs: an experiment's run list
    here, a Hydra sweep with launcher=slurm (acco's sweep launcher)."""
    planned: list[Planned] = []
    for name, cfg in named:
        todo = resubmission(cfg)
        if todo.skip is not None:
            planned.append(Planned(name, todo, None))
            continue
        # overwrite=true for the check alone: a completed run gets here only when it is asked for
        view, world = checked_run(dict(todo.cfg, overwrite=True), external=False)
        # a job is sent plain data
        planned.append(Planned(name, todo._replace(cfg=dict(plain(view), overwrite=todo.cfg.get("overwrite"))), world))
    return planned


def submit_planned(planned: list[Planned], job: MultiRun | None) -> list[tuple[str, Any]]:
    """Submit the runs still to do, say what is skipped (through `job` if any); (name, submitit job)
    for each run submitted, and for each run whose job was already queued or running (to wait for)."""
    from acco.harness.slurm.dispatch import submit

    def say(line: str) -> None:
        job.note(line) if job is not None else print(line, flush=True)

    # planned long ago, maybe: a later experiment's planning may have trained a run this one lists
    # (fig8's pretraining is one of fig7's runs), or someone submitted it meanwhile
    planned = [p if p.plan.skip is not None else recheck(p) for p in planned]
    waiting: list[tuple[str, Any]] = []
    for p in planned:
        if p.plan.skip == "completed":
            job.skip(p.name) if job is not None else print(p.plan.line(), flush=True)
        elif p.plan.skip == "running":
            say(p.plan.line())
            waiting.append((p.name, attach(p.plan.job or {})))
    todo = [p for p in planned if p.plan.skip is None]
    if not todo:
        return waiting
    worlds = [p.world for p in todo if p.world is not None]
    assert len(worlds) == len(todo)  # a run to submit was checked, which gave its world size
    cfgs, resumes = zip(*(for_slurm_job(p.plan.cfg) for p in todo))
    resume_of = {c["out_dir"]: r for c, r in zip(cfgs, resumes)}
    try:
        jobs = submit(
            list(cfgs),
            worlds,
            prepare=lambda c: prepare_out_dir(c["out_dir"], dict(c, _resume=resume_of[c["out_dir"]])),
        )
    except ConfigError as exc:
        fail_config(str(exc))
    for cfg, sjob in zip(cfgs, jobs):
        resume = resume_of[cfg["out_dir"]]
        whence = f" (resuming from step {resume['step']})" if resume else ""
        say(f"submitted {sjob.job_id}: {cfg['out_dir']}{whence}")
    return waiting + [(p.name, sjob) for p, sjob in zip(todo, jobs)]


def recheck(p: Planned) -> Planned:
    """`p` as submitting it would do now: skipped if it has completed or its job is queued or running."""
    now = resubmission(p.plan.cfg)
    return p._replace(plan=now, world=None) if now.skip is not None else p


def attach(record: dict):
    """The submitit job of a run's still active job, from its slurm.json record, to wait for."""
    import submitit

    job_id = str(record["job_id"])
    # submitit's folder pattern is <log_dir>/%j; the record has the job's own log path,
    # <log_dir>/<job id>/<job id>_<task>_log.out
    folder = os.path.join(os.path.dirname(os.path.dirname(str(record.get("stdout") or ""))), "%j")
    tasks = int(record.get("nodes") or 1) * int(record.get("tasks_per_node") or 1)
    return submitit.SlurmJob(folder=folder, job_id=job_id, tasks=tuple(range(tasks)))


def wait_submitted(job: MultiRun, submitted: list[tuple[str, Any]]) -> None:
    """Wait for the jobs in order of submission. A run's wall time is how long the wait for it
    took (jobs run side by side: the later ones often end soon after the first). A job counts as
    ended when Slurm says so, not only when its tasks have returned (wait_until_ended)."""
    from acco.harness.slurm.status import wait_until_ended

    for name, sjob in submitted:
        job.begin(name)
        try:
            sjob.results()  # every task's result (one per rank)
            wait_until_ended(str(sjob.job_id))
        except Exception as exc:  # noqa: BLE001 - submitit's job error carries the remote traceback
            log = str(sjob.paths.stderr)  # task 0's (rank 0)
            error = log_error_line(log) or last_error_line(str(exc)) or type(exc).__name__
            job.end(False, log=log, error=f"Slurm job {sjob.job_id} ({sjob.state}): {error}")
            continue
        job.end(True)


def main(argv: list[str]) -> int:
    if help_asked(argv, __doc__):
        return 0
    wait = "--wait" in argv
    overrides = [a for a in argv if a != "--wait"]
    exp_id, planned = plan(overrides)
    if all(p.plan.skip == "completed" for p in planned):
        scale = planned[0].plan.cfg.get("scale") if planned else "?"
        print(f"all {len(planned)} runs of {exp_id} ({scale}) are complete")
        return 0
    return submit_runs(f"submit {exp_id}", planned, wait, stream=sys.stdout)


def submit_runs(title: str, planned: list[Planned], wait: bool, stream=None) -> int:
    """Submit the planned runs (one job array per shape); with `wait`, follow them to the end and
    close with the table (exit code 1 if a run failed)."""
    job = MultiRun(title, [p.name for p in planned], stream=stream) if wait else None
    submitted = submit_planned(planned, job)
    if job is None:
        return 0
    wait_submitted(job, submitted)
    return job.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
