"""A sweep's preview (`python experiments/train.py -m <overrides> --plan`, which sets
hydra.launcher.plan=true for acco's launcher): every job's folder, complete (the sweep skips it) or
to train, and the ETA, by the planner of `experiments/reproduce.py --plan` (plan_text); with
launcher=slurm, the job arrays a submission would make and the runs whose job is still queued or
running. Nothing is trained, submitted or
written."""

from __future__ import annotations

from typing import NamedTuple


class CheckedJob(NamedTuple):
    """One job of a sweep after the launcher's checks (local_launcher.checked_jobs)."""

    out_dir: str
    complete: bool  # completed and not overwrite=true: the sweep skips it
    cfg: dict  # named and checked; a job to train with its world size (entry.precheck)


def planned_job(job: CheckedJob) -> dict:
    """The job as the planner counts it (preview.plan_text): named by its folder, its ETA from its
    experiment's measured times."""
    from .preview import run_cost, run_state

    exp = job.cfg.get("experiment") or {}
    state = run_state(job.out_dir, job.cfg, compare=False)  # a sweep skips a completed run as it is
    return {
        "name": job.out_dir,
        "exp": str(exp.get("id") or "runs"),
        "scale": str(job.cfg.get("scale") or "cpu"),
        "cost": run_cost(job.cfg),
        **state,
        "complete": job.complete,
    }


def slurm_lines(to_submit: list[dict], running: list[str]) -> list[str]:
    """What submitting would do: the job arrays (one per shape,
    job_arrays), and the runs left alone because their job is still queued or running."""
    from ..config.validate import ConfigError
    from .entry import fail_config
    from .slurm.dispatch import job_arrays

    try:
        arrays = job_arrays(to_submit, [int(c["world_size"]) for c in to_submit])
    except ConfigError as exc:  # the shape submit() would refuse: refused here too
        fail_config(str(exc))
    lines = []
    if arrays:
        profile = to_submit[0]["launcher"]
        lines.append(
            f"Slurm: would submit {len(to_submit)} run(s) as {len(arrays)} job array(s), one per shape "
            f"(launcher={profile.get('profile')}):"
        )
        limits = f"partition {profile.get('partition') or 'default'}, {profile.get('time_min')} min"
        for k, members in enumerate(arrays, 1):
            shape = members[0][1]
            lines.append(
                f"  job array {k}: {len(members)} run(s), {shape['nodes']} node(s) x {shape['tasks_per_node']} "
                f"task(s), {shape['gpus_per_node']} GPU(s) per node, {limits}"
            )
    else:
        lines.append("Slurm: nothing to submit")
    if running:
        lines.append(f"{len(running)} run(s) not submitted again (their job is still queued or running):")
        lines += [f"  {line}" for line in running]
    return lines


def sweep_preview(jobs: list[CheckedJob], sweep_folders: list[str], on_slurm: bool) -> str:
    """The preview's text: a head, the sweep folders, the plan of every job, and on Slurm what
    would be submitted."""
    from .entry import resubmission
    from .preview import plan_text, weigh

    runs, to_submit, running = [], [], []
    for job in jobs:
        if on_slurm and not job.complete:
            todo = resubmission(job.cfg)
            if todo.skip == "running":  # submitting leaves it alone: no second job into its folder
                running.append(todo.line())
                continue
            to_submit.append(job.cfg)
        runs.append(planned_job(job))
    where = "submitted to Slurm" if on_slurm else "trained"
    lines = [f"preview of a sweep of {len(jobs)} job(s): nothing is {where} or written (without --plan it runs)"]
    lines += [f"sweep folder: {folder}" for folder in sweep_folders]
    if runs:
        lines.append(plan_text(weigh(runs), "cpu", [], all_done=f"nothing is {where}"))
    if on_slurm:
        lines += slurm_lines(to_submit, running)
    return "\n".join(lines)
