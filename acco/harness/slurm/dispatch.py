"""Dispatch to Slurm through submitit: one job per run, or one job array per group of runs with the
same shape. Inside the job every task is one rank: submitit's TorchDistributedEnvironment exports
RANK / WORLD_SIZE / LOCAL_RANK / MASTER_ADDR / MASTER_PORT from the Slurm variables.

On submitit's checkpoint signal (SIGUSR2, `signal_delay_s` before the time limit, or a preemption)
the job is requeued with `resume=auto`, so a run that saved a checkpoint continues from it: at most
launcher.max_requeues times, counted by SlurmRun.checkpoint for every requeue and by submitit
(max_num_timeout) for those after a time limit. The profile's setup lines, environment and extra
#SBATCH options go into submitit's batch file (slurm_setup, slurm_additional_parameters)."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import time

from ...config.schema import typed
from ...config.slurm_profile import sbatch_options
from ...config.validate import ConfigError, parse_layout

LOCAL_CLUSTER_HINT = "start the local test cluster with `sudo slurm/local-cluster/start`"


def slurm_reachable() -> bool:
    if not shutil.which("sbatch") or not shutil.which("sinfo"):
        return False
    try:
        return subprocess.run(["sinfo", "-h"], capture_output=True, timeout=15).returncode == 0
    except (subprocess.SubprocessError, OSError):
        return False


def job_shape(cfg: dict, world: int, profile: dict | None = None) -> dict:
    """nodes, tasks per node (one per GPU), GPUs per node; checked against the world size.
    `profile`: the cluster profile (conf/launcher/*.yaml), by default the run's own launcher."""
    prof = cfg["launcher"] if profile is None else profile
    if cfg.get("layout"):
        nodes, per_node = parse_layout(cfg["layout"])
    else:
        nodes = int(prof.get("nodes") or 1)
        per_node = prof.get("tasks_per_node") or max(1, world // nodes)
    nodes = int(prof.get("nodes") or nodes)
    per_node = int(prof.get("tasks_per_node") or per_node)
    if nodes * per_node != world:
        raise ConfigError(
            f"the job would start {nodes} nodes x {per_node} tasks = {nodes * per_node} ranks "
            f"but the run needs world_size={world}; fix launcher.nodes/launcher.tasks_per_node "
            f"or layout"
        )
    uses_gpu = cfg.get("device") == "cuda"
    gpus = prof.get("gpus_per_node")
    gpus = (per_node if uses_gpu else 0) if gpus is None else int(gpus)
    if gpus > per_node:
        raise ConfigError(
            f"launcher.gpus_per_node={gpus} but only {per_node} tasks per node would use "
            f"them (one GPU per task); set launcher.tasks_per_node={gpus} or fewer GPUs"
        )
    if uses_gpu and gpus < per_node:
        raise ConfigError(f"{per_node} tasks per node need {per_node} GPUs per node, the profile gives {gpus}")
    gres = [v for k, v in sbatch_options(prof) if k == "gres" and "gpu" in str(v)]
    if gpus and gres:  # two requests for the same GPUs: Slurm adds them up or refuses, per version
        raise ConfigError(
            f"launcher.sbatch_options has --gres={gres[0]} and acco asks for --gpus-per-node={gpus} "
            f"(one GPU per task, from layout); drop the --gres option"
        )
    return {"nodes": nodes, "tasks_per_node": per_node, "gpus_per_node": gpus}


def shape_parameters(shape: dict) -> dict:
    """submitit's parameters for a job of this shape (job_shape), as every acco job sets them."""
    params = {
        "nodes": shape["nodes"],
        "tasks_per_node": shape["tasks_per_node"],
        # one dead task ends the step at once instead of leaving its peers in a collective
        "slurm_srun_args": ["--kill-on-bad-exit=1"],
    }
    if shape["gpus_per_node"]:
        params["gpus_per_node"] = shape["gpus_per_node"]
    return params


def executor_parameters(
    cfg: dict, shape: dict, name: str, signal_delay_s: int | None = None, environ: dict | None = None
) -> dict:
    """submitit's parameters for a job of this run (its launcher profile and shape): the limits,
    max_requeues as submitit's own limit on requeues after a time limit, the profile's setup lines,
    environment and extra #SBATCH options. Pure: no Slurm needed."""
    from ...config.slurm_profile import job_env, sbatch_options, setup_lines, whole_node_options
    from ..run.plan import signal_delay

    prof = cfg["launcher"]
    params = {
        "name": name,
        "cpus_per_task": int(prof.get("cpus_per_task") or 1),
        "timeout_min": int(prof.get("time_min") or 60),
        "slurm_signal_delay_s": signal_delay(typed(cfg)) if signal_delay_s is None else int(signal_delay_s),
        **shape_parameters(shape),
    }
    if prof.get("mem_gb"):
        params["mem_gb"] = prof["mem_gb"]
    for key in ("partition", "account", "qos", "constraint"):
        if prof.get(key):
            params[f"slurm_{key}"] = prof[key]
    exports = [f"export {k}={shlex.quote(v)}" for k, v in job_env(prof, environ)]
    setup = [*exports, *setup_lines(prof)]
    if setup:
        params["slurm_setup"] = setup
    options = [*sbatch_options(prof), *whole_node_options(prof, shape["gpus_per_node"])]
    extra = {key: True if value is None else value for key, value in options}
    if extra:
        params["slurm_additional_parameters"] = extra
    return params


def max_timeouts(cfg: dict) -> int:
    """submitit's max_num_timeout: how often a job stopped by its time limit is requeued (submitit's
    own default, 3, would override launcher.max_requeues)."""
    return int(cfg["launcher"].get("max_requeues", 3))


def make_executor(cfg: dict, shape: dict, name: str, signal_delay_s: int | None = None):
    """The submitit executor for runs like `cfg`; `signal_delay_s`: the group's (its largest run's)."""
    import submitit

    prof = cfg["launcher"]
    folder = os.path.abspath(os.path.join(prof.get("log_dir") or "results/.slurm", "%j"))
    executor = submitit.AutoExecutor(folder=folder, cluster="slurm", slurm_max_num_timeout=max_timeouts(cfg))
    executor.update_parameters(**executor_parameters(cfg, shape, name, signal_delay_s))
    return executor


class SlurmRun:
    """The callable a Slurm job runs, once per task (= rank)."""

    def __init__(self, cfg: dict):
        self.cfg = cfg

    def __call__(self) -> str:
        import submitit

        from ..launch import external_env, slurm_master_port
        from ..run.worker import run_rank
        from ..testbed.emulate import for_external_launcher, join

        dist_env = submitit.helpers.TorchDistributedEnvironment()
        # the rendezvous as slurm/README.md says: MASTER_ADDR / MASTER_PORT when the job's environment
        # sets them (launcher.env), else the first node and a port from the job id (submitit's own
        # pick is a random port that may be in use); RANK and the rest are Slurm's, whatever the
        # environment held (a job started from another job, a shell that exported RANK)
        if os.environ.get("MASTER_ADDR"):
            dist_env.master_addr = os.environ["MASTER_ADDR"]
        dist_env.master_port = int(os.environ.get("MASTER_PORT") or slurm_master_port())
        dist_env.export(set_cuda_visible_devices=False, overwrite=True)
        env = external_env()
        assert env is not None  # srun set SLURM_PROCID and the rest for this task
        env.source = "slurm"
        cfg = for_external_launcher(self.cfg)
        join(cfg, env)  # a link setting: in-process delays on the ranks
        run_rank(cfg, env)
        if env.rank == 0:  # the job's log ends as a local run's does
            from ...runtime.progress import say_how_it_ended

            say_how_it_ended(self.cfg["out_dir"])
        return self.cfg["out_dir"]

    def checkpoint(self, *args, **kwargs):
        import submitit

        requeues = int(self.cfg.get("_requeues", 0)) + 1
        if requeues > max_timeouts(self.cfg):
            return None
        return submitit.helpers.DelayedSubmission(SlurmRun(dict(self.cfg, resume="auto", _requeues=requeues)))


def record_job(out_dir: str, job, shape: dict) -> None:
    info = {
        "job_id": job.job_id,
        "submitted_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "stdout": str(job.paths.stdout),
        "stderr": str(job.paths.stderr),
        **shape,
    }
    with open(os.path.join(out_dir, "slurm.json"), "w") as f:
        json.dump(info, f, indent=2)


def job_arrays(cfgs: list[dict], worlds: list[int]) -> list[list[tuple[dict, dict]]]:
    """The runs grouped as submit() sends them: one group, one job array (one job for a group of
    one), per shape (job_shape: nodes, tasks and GPUs per node); each member is (config, shape).
    Pure: what a sweep's preview says would be submitted, without Slurm."""
    groups: dict[tuple, list[tuple[dict, dict]]] = {}
    for cfg, world in zip(cfgs, worlds):
        shape = job_shape(cfg, world)
        groups.setdefault(tuple(sorted(shape.items())), []).append((cfg, shape))
    return list(groups.values())


def submit(cfgs: list[dict], worlds: list[int], prepare) -> list:
    """Submit runs (each already validated); runs of one shape go out together as one job array.
    `prepare(cfg)` lays out each run's folder first. Returns the submitit jobs."""
    if not slurm_reachable():
        raise ConfigError(f"launcher=slurm but no Slurm cluster answers here (sbatch/sinfo); {LOCAL_CLUSTER_HINT}")
    from ..run.plan import signal_delay, time_limit_warnings

    views = {id(cfg): typed(cfg) for cfg in cfgs}  # each run's estimates read its view, made once
    for cfg in cfgs:  # before anything is queued: runs that would outlast time x (requeues + 1)
        try:
            warnings = time_limit_warnings(views[id(cfg)])
        except ValueError as exc:  # e.g. a vocabulary size nowhere in the config: no estimate
            warnings = [f"acco: no time estimate for {cfg['out_dir']}: {exc}"]
        for line in warnings:
            print(line, file=sys.stderr, flush=True)
    arrays = job_arrays(cfgs, worlds)  # a bad shape: refused before anything is queued
    import submitit

    jobs = []
    for members in arrays:
        first_cfg, shape = members[0]
        exp = (first_cfg.get("experiment") or {}).get("id", "run")
        delay = max(signal_delay(views[id(cfg)]) for cfg, _ in members)  # the run with the largest checkpoint
        executor = make_executor(first_cfg, shape, f"acco-{exp}", delay)
        new_dirs = [cfg["out_dir"] for cfg, _ in members if not os.path.exists(cfg["out_dir"])]
        for cfg, _ in members:
            prepare(cfg)
        try:
            if len(members) == 1:
                group_jobs = [executor.submit(SlurmRun(members[0][0]))]
            else:
                with executor.batch():  # one sbatch --array
                    group_jobs = [executor.submit(SlurmRun(cfg)) for cfg, _ in members]
        except submitit.core.utils.FailedJobError as exc:  # sbatch said no: its own words, one line
            for out_dir in new_dirs:  # nothing half-written in results/ (folders that were there stay)
                shutil.rmtree(out_dir, ignore_errors=True)
            raise ConfigError(f"sbatch refused the job: {sbatch_refusal(str(exc))}") from None
        for (cfg, _), job in zip(members, group_jobs):
            record_job(cfg["out_dir"], job, shape)
            jobs.append(job)
    return jobs


def sbatch_refusal(stderr: str) -> str:
    """The line of sbatch's output that says why (`sbatch: error: ...`), and what to look at."""
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    why = next((ln for ln in lines if ln.startswith("sbatch: error:")), lines[-1] if lines else "no reason given")
    return (
        f"{why.removeprefix('sbatch: error: ')}; check the launcher profile (partition, account, qos, "
        f"constraint, gpus_per_node, sbatch_options) against `sinfo` and your cluster's documentation"
    )


def wait_for(jobs) -> int:
    """Block until every job ends; 0 when all completed."""
    from .status import wait_until_ended

    failed = 0
    for job in jobs:
        try:
            job.results()  # every task's result (one per rank)
            wait_until_ended(str(job.job_id))
        except Exception as exc:  # noqa: BLE001 - submitit's job error carries the remote traceback
            failed += 1
            last = (str(exc).strip().splitlines() or [type(exc).__name__])[-1]
            print(f"error: Slurm job {job.job_id} failed ({job.state}): {last}", file=sys.stderr, flush=True)
    return 1 if failed else 0
