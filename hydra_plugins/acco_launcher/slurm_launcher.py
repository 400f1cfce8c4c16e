"""Hydra's own submitit launcher (hydra-submitit-launcher) for acco's multi-rank runs:

    python experiments/train.py -m hydra/launcher=submitit_slurm experiment=fig5/cpu method=ddp,acco seed=0,1

The plugin submits every job of a sweep with one set of executor settings (nodes, tasks per node,
GPUs), read once from hydra.launcher. An acco run is world_size ranks, one Slurm task each, shaped
by its own layout, and a sweep may vary it (layout=1x2,2x1). So this launcher, the plugin's
SlurmLauncher with `launch` replaced, first composes every job's config and checks it as train.py
would (bad input: one line, exit 2, nothing submitted), then submits one job array per shape.
In the job, every task runs the task function (acco.harness.commands.train's main): one rank, from the
Slurm step's variables (acco/harness/launch.py external_env); rank 0's return is the job's.
conf/hydra/launcher/submitit_slurm.yaml selects it under the plugin's name. (Hydra accepts a
launcher only from the hydra_plugins namespace, hence this package beside acco/.)"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, JobStatus, filter_overrides
from hydra_plugins.hydra_submitit_launcher.submitit_launcher import SlurmLauncher as PluginSlurmLauncher
from omegaconf import OmegaConf

# the plugin's settings that are not sbatch parameters, and those that name the job's shape (ours)
INIT_KEYS = {"submitit_folder", "max_num_timeout"}
SHAPE_KEYS = {"nodes", "tasks_per_node", "gpus_per_node"}
BASE_KEYS = {"timeout_min", "cpus_per_task", "mem_gb", "name", "stderr_to_stdout"}


def run_config(sweep_config) -> tuple[dict, list[str]]:
    """One job's run config (without the `hydra` node) and its task overrides (what varies)."""
    keys = [k for k in sweep_config if k != "hydra"]
    cfg = OmegaConf.to_container(OmegaConf.masked_copy(sweep_config, keys), resolve=True)
    return cfg, list(sweep_config.hydra.overrides.task)  # type: ignore[return-value]


def job_shapes(configs: Sequence[tuple[dict, list[str]]], gpus_per_node: int | None) -> list[dict]:
    """Each job's nodes, tasks per node and GPUs per node, from its run's layout / world size,
    after the checks train.py makes (exit 2 on the first bad run)."""
    from acco.config.validate import ConfigError
    from acco.harness.slurm.submit import job_shape
    from acco.harness.start import check_run, fail_config, named_and_checked

    shapes = []
    for cfg, overrides in configs:
        cfg, world = check_run(named_and_checked(cfg, overrides), external=False)
        try:
            shapes.append(job_shape(cfg, world, profile={"gpus_per_node": gpus_per_node}))
        except ConfigError as exc:
            fail_config(f"{' '.join(filter_overrides(overrides))}: {exc}")
    return shapes


class SlurmLauncher(PluginSlurmLauncher):
    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        import submitit

        from acco.harness.slurm.submit import shape_parameters
        from acco.harness.start import (  # acco: only when a sweep is launched
            fail_config,
            sweep_out_dirs,
            with_sweep_out_dir,
        )

        assert self.config is not None and self.hydra_context is not None

        if self.params.get("nodes", 1) != 1 or self.params.get("tasks_per_node", 1) != 1:
            fail_config(
                "hydra.launcher.nodes/tasks_per_node: each run's job takes its shape from its own "
                "layout (layout=2x4: 2 nodes x 4 tasks) or world_size; set those instead"
            )
        Path(str(self.config.hydra.sweep.dir)).mkdir(parents=True, exist_ok=True)
        loader = self.hydra_context.config_loader
        configs = [run_config(loader.load_sweep_config(self.config, list(o))) for o in job_overrides]
        # the jobs outside the experiment's run list: one folder for the sweep (acco/harness/start.py)
        placed = sweep_out_dirs(configs)
        job_overrides = [with_sweep_out_dir(list(o), d) for o, d in zip(job_overrides, placed)]
        configs = [
            (dict(cfg, out_dir=d or cfg.get("out_dir")), list(o))
            for (cfg, _), o, d in zip(configs, job_overrides, placed)
        ]
        shapes = job_shapes(configs, self.params.get("gpus_per_node"))

        sbatch: dict[str, Any] = {}
        for key, value in self.params.items():
            if key in INIT_KEYS or key in SHAPE_KEYS:
                continue
            sbatch[key if key in BASE_KEYS else f"slurm_{key}"] = value

        groups: dict[tuple, list[int]] = {}
        for i, shape in enumerate(shapes):
            groups.setdefault(tuple(sorted(shape.items())), []).append(i)
        jobs: dict[int, Any] = {}
        for members in groups.values():
            shape = shapes[members[0]]
            executor = submitit.AutoExecutor(
                folder=self.params["submitit_folder"],
                cluster="slurm",
                slurm_max_num_timeout=self.params.get("max_num_timeout", 0),
            )
            executor.update_parameters(**sbatch, **shape_parameters(shape))
            state = Singleton.get_state()  # the plugin's call signature: (overrides, dir key, num, id, state)
            args = [(list(job_overrides[i]), "hydra.sweep.dir", initial_job_idx + i, f"job{i}", state) for i in members]
            for i, job in zip(members, executor.map_array(self, *zip(*args))):
                print(f"submitted {job.job_id}: {' '.join(filter_overrides(job_overrides[i]))}", flush=True)
                jobs[i] = job
        return wait_with_table([jobs[i] for i in range(len(job_overrides))], [cfg["out_dir"] for cfg, _ in configs])


def wait_with_table(jobs: list[Any], out_dirs: list[str]) -> list[JobReturn]:
    """Wait for the sweep's jobs in order, "run k of N" as each is waited for, then one table: each
    run's folder, status, wall time (of the wait), and for a failure its job's log and last error
    line (submitit keeps the logs under the sweep's .submitit/ folder: the table names them). Exit
    code 1 once the table is printed if a job failed."""
    from acco.harness.multirun import MultiRun, last_error_line, log_error_line

    sweeps = sorted({os.path.dirname(d) for d in out_dirs})
    names = [os.path.basename(d) for d in out_dirs] if len(sweeps) == 1 else list(out_dirs)
    if len(sweeps) == 1:
        print(f"acco: the runs go to {sweeps[0]}", file=sys.stderr, flush=True)
    table = MultiRun(f"sweep of {len(jobs)} Slurm job(s)", names, stream=sys.stderr, bar=False)
    returns: list[JobReturn] = []
    for name, job in zip(names, jobs):
        table.begin(name)
        try:
            ret = job.results()[0]  # rank 0's
        except Exception as exc:  # noqa: BLE001 - submitit's job error carries the remote traceback
            log = str(job.paths.stderr)
            error = log_error_line(log) or last_error_line(str(exc)) or type(exc).__name__
            table.end(False, log=log, error=f"Slurm job {job.job_id} ({job.state}): {error}")
            ret = JobReturn()
            ret.status, ret.return_value = JobStatus.FAILED, exc
            returns.append(ret)
            continue
        code = ret._return_value if ret.status == JobStatus.COMPLETED else 1
        ok = ret.status == JobStatus.COMPLETED and not code
        table.end(
            ok, log=None if ok else str(job.paths.stderr), error=None if ok else f"Slurm job {job.job_id}: exit {code}"
        )
        returns.append(ret)
    if table.close():
        sys.exit(1)
    return returns
