"""The up-front checks of a run written as an sbatch script (experiments/make_sbatch.py): what
experiments/submit.py checks through acco.run.start.check_run before it submits, so a script that
could not run is never written. Each check is the run's own, called, not copied: the memory fit
against the profile's gpu_mem_gb (acco/analytic/memory.py), the data, tokenizer and model present
(acco/tasks/preflight.py), the disk (acco/run/disk.py).

Unlike check_run nothing is trained or resolved here: a model another run saves (fig8 fine-tunes
fig7's) is that job's to make, so its folder is not required (the script says what it needs), and
the checkpoint a requeued job continues from is found when the job starts."""

from __future__ import annotations


def script_problem(cfg: dict, world: int) -> str | None:
    """The first one-line problem of the run `cfg` (composed with its Slurm profile, validated),
    or None."""
    from ..config.schema import DEFAULT_TASK, typed
    from ..data.sources import DataNotFoundError
    from ..run.disk import check_disk
    from ..tasks.preflight import preflight
    from .profile import as_the_job_sees_the_hub, sbatch_options

    sbatch_options(cfg["launcher"])  # ConfigError for a bad profile (also in validate)
    if cfg.get("experiment") and cfg.get("scale") == "paper":  # will each GPU hold it?
        from ..analytic.memory import fit_problem

        try:
            problem = fit_problem(cfg, world)
        except ValueError:  # e.g. a vocabulary size nowhere in the config: no estimate to hold it to
            problem = None
        if problem:
            return problem
    if cfg.get("task") == DEFAULT_TASK:
        try:
            with as_the_job_sees_the_hub(cfg["launcher"]):  # the hub switched off, as in the job
                preflight(typed(cfg))
        except DataNotFoundError as exc:
            return str(exc).splitlines()[0]
    return check_disk(cfg, world)
