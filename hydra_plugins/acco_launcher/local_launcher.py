"""acco's launcher for Hydra sweeps (`python experiments/train.py -m ...`, the default
hydra/launcher, conf/hydra/launcher/acco_local.yaml): Hydra's basic launcher (one job after the
other, in this process) with what a sweep of training runs needs:

- every job is composed and checked before the first starts (bad input in any job: one line naming
  the job, exit 2, nothing run);
- jobs outside the experiment's run list go to one folder for the sweep,
  `<results_root>/sweeps/<label>/<run>` (acco/harness/entry.py sweep_out_dirs), never beside the runs the
  figures and the report read;
- "run k of N" as each job starts, and a closing table (each run's folder, status, wall time, a
  failure's log and last error line); exit code 1 if a run failed, and a failed run does not stop
  the others;
- with launcher=slurm (or a profile of one's own), the sweep goes to Slurm the way every submission
  does (acco/harness/commands/submit.py): each run planned and checked first, completed runs and runs
  whose job is still queued or running skipped, the others submitted as one job array per shape
  (nodes and tasks per node from each run's layout), requeued with resume=auto after a time limit;
  launcher.wait=true follows them to the closing table."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from hydra._internal.core_plugins.basic_launcher import BasicLauncher
from hydra.core.utils import JobReturn, JobStatus, filter_overrides, run_job, setup_globals
from omegaconf import OmegaConf, open_dict

if TYPE_CHECKING:
    from acco.harness.sweep_preview import CheckedJob


def run_config(sweep_config) -> tuple[dict, list[str]]:
    """One job's run config (without the `hydra` node) and its task overrides (what varies)."""
    keys = [k for k in sweep_config if k != "hydra"]
    cfg = OmegaConf.to_container(OmegaConf.masked_copy(sweep_config, keys), resolve=True)
    return cfg, list(sweep_config.hydra.overrides.task)  # type: ignore[return-value]


def discard_sweep_dir(sweep_dir: str) -> None:
    """Hydra writes the sweep's multirun.yaml before the launcher sees the jobs: a sweep refused up
    front leaves nothing behind (its folder, and .multirun/ if that is all it held)."""
    import shutil

    if os.path.isdir(sweep_dir) and set(os.listdir(sweep_dir)) <= {"multirun.yaml"}:
        shutil.rmtree(sweep_dir, ignore_errors=True)
        parent = os.path.dirname(os.path.normpath(sweep_dir))
        if os.path.basename(parent) == ".multirun" and not os.listdir(parent):
            os.rmdir(parent)


def checked_jobs(configs: list[tuple[dict, list[str]]], sweep_dir: str) -> list[CheckedJob]:
    """Every job (its folder, whether it is complete already, its checked config), after the checks
    train.py makes on each (the first bad job: one line naming it, exit 2, before any job starts)."""
    from acco.config.plain import plain
    from acco.harness.entry import named_and_checked, precheck
    from acco.harness.sweep_preview import CheckedJob
    from acco.runtime.summary import run_completed

    def fail_config(message: str):
        from acco.harness.entry import fail_config as fail

        discard_sweep_dir(sweep_dir)
        fail(message)

    out = []
    for i, (cfg, overrides) in enumerate(configs):
        try:
            cfg = named_and_checked(cfg, overrides)
        except SystemExit:
            discard_sweep_dir(sweep_dir)
            raise
        complete = not cfg.get("overwrite") and run_completed(cfg["out_dir"])
        if not complete:
            checked, _, problem = precheck(cfg)
            if problem:
                job = " ".join(o for o in filter_overrides(overrides) if not o.startswith("out_dir="))
                fail_config(f"job {i} of the sweep ({job}): {problem}" if len(configs) > 1 else problem)
            cfg = plain(checked) if checked is not None else cfg  # with its world size
        out.append(CheckedJob(cfg["out_dir"], complete, cfg))
    return out


class LocalLauncher(BasicLauncher):
    def __init__(self, plan: bool = False) -> None:
        super().__init__()
        self.plan = plan  # hydra.launcher.plan (train.py's --plan): preview the sweep, run nothing

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        from acco.harness.entry import sweep_out_dirs, with_sweep_out_dir
        from acco.harness.multirun import MultiRun

        setup_globals()
        assert self.hydra_context is not None and self.config is not None and self.task_function is not None
        loader = self.hydra_context.config_loader
        configs = [run_config(loader.load_sweep_config(self.config, list(o))) for o in job_overrides]
        placed = sweep_out_dirs(configs)
        job_overrides = [with_sweep_out_dir(list(o), d) for o, d in zip(job_overrides, placed)]
        configs = [(cfg, with_sweep_out_dir(ov, d)) for (cfg, ov), d in zip(configs, placed)]
        for (cfg, _), d in zip(configs, placed):
            if d is not None:
                cfg["out_dir"] = d
        if self.plan:
            return preview_sweep(configs, job_overrides, placed, str(self.config.hydra.sweep.dir))
        if to_slurm(configs, str(self.config.hydra.sweep.dir)):
            return submit_sweep(configs, job_overrides, placed, str(self.config.hydra.sweep.dir))
        folders = checked_jobs(configs, str(self.config.hydra.sweep.dir))
        sweeps = sorted({os.path.dirname(d) for d in placed if d is not None})
        for folder in sweeps:  # where the runs outside the experiment's run list go
            print(f"acco: sweep folder {folder}", file=sys.stderr, flush=True)
        # a run in the sweep folder by its name, any other by its folder
        names = [os.path.basename(j.out_dir) if os.path.dirname(j.out_dir) in sweeps else j.out_dir for j in folders]
        title = f"sweep of {len(names)} run{'s' if len(names) != 1 else ''}"
        job = MultiRun(title, names, stream=sys.stderr, bar=False)
        returns: list[JobReturn] = []
        for idx, (overrides, name, (out_dir, complete, _)) in enumerate(zip(job_overrides, names, folders)):
            if complete:
                job.skip(name)
                ret = JobReturn()
                ret.status, ret.return_value, ret.overrides = JobStatus.COMPLETED, 0, list(overrides)
                returns.append(ret)
                continue
            sweep_config = loader.load_sweep_config(self.config, list(overrides))
            with open_dict(sweep_config):
                sweep_config.hydra.job.id = initial_job_idx + idx
                sweep_config.hydra.job.num = initial_job_idx + idx
            job.begin(name)
            started = time.monotonic()
            ret = run_job(
                hydra_context=self.hydra_context,
                task_function=self.task_function,
                config=sweep_config,
                job_dir_key="hydra.sweep.dir",
                job_subdir_key="hydra.sweep.subdir",
            )
            ok = ret.status == JobStatus.COMPLETED and not ret._return_value
            summary = os.path.join(out_dir, "summary.json")
            error = None if ok else _error_of(ret, out_dir)
            log = summary if os.path.exists(summary) else None
            job.end(ok, log=log, error=error, wall_s=time.monotonic() - started)
            returns.append(ret)
        code = job.close()
        if code:
            sys.exit(code)
        return returns


def to_slurm(configs: list[tuple[dict, list[str]]], sweep_dir: str) -> bool:
    """Whether the sweep goes to Slurm: its jobs say launcher=slurm and this is not itself a Slurm
    job's step (there a run's ranks come from srun). All of its jobs or none."""
    from acco.harness.entry import fail_config
    from acco.harness.launch import external_env

    on_slurm = [cfg["launcher"].get("name") == "slurm" for cfg, _ in configs]
    if not any(on_slurm) or external_env() is not None:
        return False
    if not all(on_slurm):
        discard_sweep_dir(sweep_dir)
        fail_config("a sweep goes to Slurm whole or not at all: sweep over one launcher (launcher=slurm or a profile)")
    return True


def submit_sweep(
    configs: list[tuple[dict, list[str]]],
    job_overrides: Sequence[Sequence[str]],
    placed: list[str | None],
    sweep_dir: str,
) -> Sequence[JobReturn]:
    """The sweep's runs submitted as every submission of many runs is (acco/harness/commands/submit.py:
    planned and checked first, then one job array per shape), waited for with launcher.wait=true."""
    from acco.harness.commands.submit import plan_runs, submit_runs
    from acco.harness.entry import named_and_checked

    try:
        named = []
        for cfg, overrides in configs:
            cfg = named_and_checked(cfg, overrides)
            named.append((cfg["out_dir"], cfg))
        planned = plan_runs(named)
    except SystemExit:  # bad input: one line, exit 2, nothing submitted and no sweep folder left
        discard_sweep_dir(sweep_dir)
        raise
    sweeps = sorted({os.path.dirname(d) for d in placed if d is not None})
    for folder in sweeps:  # where the runs outside the experiment's run list go
        print(f"acco: sweep folder {folder}", file=sys.stderr, flush=True)
    # a run in the sweep folder by its name, any other by its folder
    planned = [
        p._replace(name=os.path.basename(p.name) if os.path.dirname(p.name) in sweeps else p.name) for p in planned
    ]
    wait = bool(configs[0][0]["launcher"].get("wait"))
    title = f"sweep of {len(planned)} run{'s' if len(planned) != 1 else ''} on Slurm"
    code = submit_runs(title, planned, wait, stream=sys.stderr)
    if code:
        sys.exit(code)
    return done_returns(job_overrides)


def done_returns(job_overrides: Sequence[Sequence[str]]) -> list[JobReturn]:
    """Hydra's record of jobs this process did not run itself (submitted, or only previewed): done."""
    returns = []
    for job in job_overrides:
        ret = JobReturn()
        ret.status, ret.return_value, ret.overrides = JobStatus.COMPLETED, 0, list(job)
        returns.append(ret)
    return returns


def preview_sweep(
    configs: list[tuple[dict, list[str]]],
    job_overrides: Sequence[Sequence[str]],
    placed: list[str | None],
    sweep_dir: str,
) -> Sequence[JobReturn]:
    """--plan: every job checked as the sweep would check it (bad input: one line, exit 2), then its
    folder, complete or to train, and the ETA (acco/harness/sweep_preview.py); on Slurm the job
    arrays submitting would make. No worker starts, nothing is submitted, and the folder Hydra made
    for the sweep is removed: nothing is left under results_root."""
    from acco.harness.sweep_preview import sweep_preview

    on_slurm = to_slurm(configs, sweep_dir)
    jobs = checked_jobs(configs, sweep_dir)
    sweeps = sorted({os.path.dirname(d) for d in placed if d is not None})
    try:
        print(sweep_preview(jobs, sweeps, on_slurm), flush=True)
    finally:
        discard_sweep_dir(sweep_dir)
    return done_returns(job_overrides)


def _error_of(ret: JobReturn, out_dir: str) -> str:
    """What a failed job's run says of its end (summary.json's error), else its exception or exit code."""
    from acco.runtime.summary import read_summary

    if ret.status == JobStatus.FAILED:
        exc = ret._return_value
        return f"{type(exc).__name__}: {exc}".splitlines()[0]
    summary = read_summary(out_dir)
    said = summary.error if summary is not None else None
    return str(said).splitlines()[0] if said else f"exit {ret._return_value}"
