"""The up-front checks of a run written as an sbatch script (the make_sbatch command): what
the submit command checks through acco.harness.entry.checked_run before it submits, so a script that
could not run is never written. Each check is the run's own, called, not copied: the memory fit
against the profile's gpu_mem_gb, a dist.step_timeout_s long enough for the run's estimated waits,
the data, tokenizer and model present, the disk.

Unlike checked_run nothing is trained or resolved here: a model another run saves (fig8 fine-tunes
fig7's) is that job's to make, so its folder is not required (the script says what it needs), and
the checkpoint a requeued job continues from is found when the job starts."""

from __future__ import annotations


def script_problem(cfg: dict, world: int, data: bool = True) -> str | None:
    """The first one-line problem of the run `cfg` (composed with its Slurm profile, validated),
    or None. `data=False`: the memory fit only, not the data, tokenizer, model and disk (the scripts
    are written to be read before those are on this machine; make_sbatch's --no-data-checks)."""
    from ...config.schema import typed
    from ...config.slurm_profile import sbatch_options
    from ..run.disk import check_disk
    from ..run.preflight import data_problem, memory_problem, with_step_timeout

    sbatch_options(cfg["launcher"])  # ConfigError for a bad profile (also in validate)
    view = typed(cfg)  # past the checks of its values: the one typed view
    problem = memory_problem(view, world) or with_step_timeout(view)[1] or (data_problem(view) if data else None)
    if problem:
        return problem.splitlines()[0]
    return check_disk(view, world) if data else None
