"""What a run needs before any worker starts or any job is submitted, besides a valid config: each
GPU holds it (the memory model, acco/train/memory.py), and every dataset, tokenizer and model it
reads is here (acco/tasks/preflight.py), seen as its job will see the hub. Each returns the
problem's one line, or None."""

from __future__ import annotations

import sys

from ...config.schema import DEFAULT_TASK, typed


def memory_problem(cfg: dict, world: int, note: bool = False) -> str | None:
    """Before any submission of a paper-scale run: will each GPU hold it? (one line, or None; `note`:
    say so on stderr when there is no estimate to hold it to)."""
    if not (cfg.get("experiment") and cfg.get("scale") == "paper"):
        return None
    from ...train.memory import fit_problem

    try:
        return fit_problem(cfg, world)
    except ValueError as exc:  # e.g. a vocabulary size nowhere in the config: no estimate
        if note:
            print(f"acco: no memory estimate: {exc}", file=sys.stderr, flush=True)
        return None


def with_step_timeout(cfg: dict) -> tuple[dict, str | None]:
    """The config with dist.step_timeout_s a number (null: sized from the run's estimated waits at
    the paper scale, acco/harness/run/plan.py step_timeout), and the problem's one line where an explicit
    one would declare a healthy run dead."""
    from .plan import step_timeout

    timeout, _, problem = step_timeout(cfg)
    return dict(cfg, dist=dict(cfg.get("dist") or {}, step_timeout_s=timeout)), problem


def data_problem(cfg: dict, external: bool = False, view=None) -> str | None:
    """Every dataset, tokenizer and model the run reads is here (tasks/preflight.py), seen as its
    job will see the hub: the problem's one line, or None. `view`: typed(cfg) if made already."""
    if cfg.get("task") != DEFAULT_TASK:
        return None
    from ...data.sources import DataNotFoundError
    from ...tasks.preflight import preflight

    try:
        with hub_as_the_job_sees_it(cfg, external):
            preflight(typed(cfg) if view is None else view)
    except DataNotFoundError as exc:
        return str(exc)
    return None


def hub_as_the_job_sees_it(cfg: dict, external: bool):
    """Where the run goes to Slurm from here: its checks see the hub as its job will (switched off,
    acco/config/slurm_profile.py), so a dataset the login node could still download but did not prepare
    is an error now, not in the job after its wait in the queue."""
    import contextlib

    if external or cfg["launcher"].get("name") != "slurm":
        return contextlib.nullcontext()
    from ...config.slurm_profile import as_the_job_sees_the_hub

    return as_the_job_sees_the_hub(cfg["launcher"])
