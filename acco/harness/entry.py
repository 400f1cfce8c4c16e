"""What the train command does with a composed config, in two calls (torchtitan's build, then
train): `prepare(cfg) -> Run` checks it against the schema, validates it, makes sure what the run
depends on exists (a pretrained checkpoint, its data, room on disk), finds where it resumes from
and how it starts; bad input is one line and exit 2, before any worker starts or any file of the
run is written. `launch(run)` lays out the run folder and starts it: workers spawned locally, this
process as one rank under torchrun / srun, or a Slurm job."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Literal, NamedTuple, NoReturn

import torch
import yaml

from ..config.experiments import dependency_out_dir, with_out_dir
from ..config.plain import plain
from ..config.schema import DEFAULT_TASK, RunView, check_config, noted, typed
from ..config.validate import ConfigError, out_dir_problem
from ..runtime.files import PREEMPTED_EXIT, RUN_FILES
from ..runtime.progress import say_how_it_ended
from ..runtime.summary import read_summary, run_completed
from . import TRAIN
from .launch import DistEnv, external_env, local_envs, worker_start_method
from .run.preflight import data_problem, memory_problem, with_step_timeout
from .run.validate import validate


def help_asked(argv: list[str], doc: str | None) -> bool:
    """`-h`/`--help` among a script's arguments (one that takes Hydra overrides, not argparse options):
    its docstring (what it does, examples) printed; the caller exits 0."""
    if not any(a in ("-h", "--help") for a in argv):
        return False
    print((doc or "").strip())
    return True


def fail_config(message: str) -> NoReturn:
    print(f"error: {message}", file=sys.stderr, flush=True)
    sys.exit(2)


def prepare_out_dir(out_dir: str, cfg: dict) -> None:
    """The run folder made ready for `cfg` (plain data: what config.yaml holds)."""
    os.makedirs(out_dir, exist_ok=True)
    # leftovers of an earlier, unfinished or overwritten run (a resumed run keeps its own: the
    # worker cuts metrics.csv back to the checkpoint's step)
    for name in RUN_FILES if not cfg.get("_resume") else ("config.yaml",):
        path = os.path.join(out_dir, name)
        if os.path.isfile(path):
            os.remove(path)
    for name in ("model", "checkpoints", "failures") if not cfg.get("_resume") else ("failures",):
        if os.path.isdir(os.path.join(out_dir, name)):
            shutil.rmtree(os.path.join(out_dir, name))
    from ..runtime.disk import sweep

    sweep(out_dir)  # temporary files, unfinished checkpoints, trace parts of a run that was killed
    with open(os.path.join(out_dir, "config.yaml"), "w") as f:
        yaml.safe_dump(cfg, f, sort_keys=False)


def ensure_pretrained(view: RunView, external: bool) -> None:
    """A model with `pretrained_from` (e.g. the CPU-scale fine-tuning of Fig. 8 starts from the
    CPU-scale pretraining of Fig. 7) gets that run's saved model, trained first (once) into the
    data cache's folder for it (dependency_out_dir) if it is not there yet; model.pretrained_path
    is noted in the view."""
    spec = view.model.pretrained_from
    if view.model.pretrained_path or spec is None:
        return
    dep_dir = dependency_out_dir(spec, view.data.cache_dir)
    model_dir = os.path.join(dep_dir, "model")
    done = run_completed(dep_dir) and os.path.isdir(model_dir)
    if not done:
        from .slurm.status import active_job

        running = active_job(dep_dir)
        if running is not None:  # submitted before (e.g. by its own experiment): not a second time
            job, state = running
            fail_config(
                f"this run starts from the model of {dep_dir}, whose Slurm job {job['job_id']} is {state}; "
                f"submit this run again once it has completed"
            )
        launcher = view.launcher
        on_slurm = [f"launcher={launcher.profile}", "launcher.wait=true"] if launcher.name == "slurm" else []
        args = [
            f"experiment={spec.experiment}/{spec.scale}",
            *on_slurm,
            *spec.overrides,
            "train.save_model=true",  # what this folder is for
            f"out_dir='{dep_dir}'",  # quoted: run folder names contain '='
            # an unfinished pretraining run continues from its checkpoint; a completed one without
            # its model is made again
            "overwrite=true" if run_completed(dep_dir) else "resume=auto",
        ]

        if external:
            fail_config(
                f"this run starts from the model of `{' '.join(args[:-2])}`, which is not at "
                f"{model_dir}; run that first (python experiments/train.py {' '.join(args[:-1])})"
            )
        print(
            f"acco: {view.model.name} starts from the pretraining run {dep_dir}; training it first",
            file=sys.stderr,
            flush=True,
        )
        code, stopped_by = run_child([*TRAIN, *args])
        if stopped_by is not None:
            print(
                f"acco: interrupted while pretraining {dep_dir}; the same command continues it from its checkpoint",
                file=sys.stderr,
            )
            sys.exit(128 + stopped_by)
        if code != 0 or not os.path.isdir(model_dir):
            print(f"error: the pretraining run {dep_dir} failed (exit {code})", file=sys.stderr)
            sys.exit(1)
    noted(view, {"model.pretrained_path": os.path.abspath(model_dir)})


# the signals that stop a child run of ours (ensure_pretrained's) through this process, and what the
# child is sent: a checkpoint signal as it is; an interrupt or hang-up as SIGTERM (checkpoint, stop)
CHILD_SIGNALS = {
    signal.SIGTERM: signal.SIGTERM,
    signal.SIGINT: signal.SIGTERM,
    signal.SIGHUP: signal.SIGTERM,
    signal.SIGUSR1: signal.SIGUSR1,
    signal.SIGUSR2: signal.SIGUSR2,
}


def _die_with_parent() -> None:
    """In the child, before exec: SIGTERM when the process that started it dies (Linux' parent-death
    signal), so a launcher killed outright (SIGKILL) leaves no training behind it."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the signal forwarding below is all there is
        pass


def run_child(argv: list[str]) -> tuple[int, int | None]:
    """Run a command of ours to its end: (its exit code, the stop signal this process got meanwhile,
    if any). It has its own session (a Ctrl-C at
    the terminal reaches this process only); a stop signal this process gets is passed on to it (an
    interrupt as SIGTERM: it checkpoints and stops) and this process waits for it to end: an
    interrupted launcher never leaves its child running."""
    child = subprocess.Popen(argv, start_new_session=True, preexec_fn=_die_with_parent)
    got: list[int] = []

    def forward(signum, frame):
        got.append(signum)
        try:
            child.send_signal(CHILD_SIGNALS[signal.Signals(signum)])
        except ProcessLookupError:
            pass

    old = {sig: signal.signal(sig, forward) for sig in CHILD_SIGNALS}
    try:
        code = child.wait()
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
    stops = [s for s in got if s not in (signal.SIGUSR1, signal.SIGUSR2)]
    return code, (int(stops[0]) if stops else None)


class Resubmission(NamedTuple):
    """What submitting a run to Slurm (again) does (resubmission)."""

    cfg: dict  # the config to submit
    skip: str | None = None  # "running": its job is still queued or running; "completed"
    job: dict | None = None  # the active job's slurm.json record
    state: str = ""  # its Slurm state

    def line(self) -> str:
        why = f"Slurm job {self.job['job_id']} {self.state}" if self.job is not None else "completed"
        return f"skip ({why}): {self.cfg['out_dir']}"


def resubmission(cfg: dict) -> Resubmission:
    """A run whose job is still queued or running is skipped, whatever `overwrite` says: a second
    job would write into the same folder. A completed run is skipped unless overwrite=true. Any
    other run continues from its newest checkpoint (resume=auto; none there: from scratch) unless
    overwrite=true: resubmitting after a cancel, a failure or a requeue cap never throws the
    training away, only overwrite=true starts over."""
    from .slurm.status import active_job

    out_dir = cfg["out_dir"]
    active = active_job(out_dir)
    # COMPLETING: every task has ended and Slurm is cleaning up, so a completed run's folder gets no
    # more writes: it is complete, not running (a submit right after `submit --wait` returned saw it so)
    if active is not None and not (active[1] == "COMPLETING" and run_completed(out_dir)):
        return Resubmission(cfg, "running", *active)
    if cfg.get("overwrite") is True:
        return Resubmission(cfg)
    if run_completed(out_dir):
        return Resubmission(cfg, "completed")
    if cfg.get("resume") in (None, "", "none", "null"):
        cfg = dict(cfg, resume="auto")
    return Resubmission(cfg)


def for_slurm_job(cfg: dict) -> tuple[dict, dict | None]:
    """(the config a Slurm job is sent, where the folder is prepared to resume from): the job finds
    its checkpoint again when it starts, and when it is requeued (a checkpoint resolved now would
    be stale by then)."""
    cfg = dict(cfg)
    return cfg, cfg.pop("_resume", None)


def submit_to_slurm(view: RunView, world: int) -> int:
    from .slurm.dispatch import submit, wait_for

    cfg, resume = for_slurm_job(plain(view))  # a job is sent plain data
    try:
        jobs = submit([cfg], [world], prepare=lambda c: prepare_out_dir(c["out_dir"], dict(c, _resume=resume)))
    except ConfigError as exc:
        fail_config(str(exc))
    whence = f" (resuming from step {resume['step']})" if resume else ""
    print(
        f"acco: submitted {cfg['method']['name']} as Slurm job {jobs[0].job_id}{whence} -> {cfg['out_dir']}",
        file=sys.stderr,
        flush=True,
    )
    if not cfg["launcher"].get("wait"):
        return 0
    code = wait_for(jobs)
    say_how_it_ended(cfg["out_dir"])
    return code


def precheck(cfg: dict, external: bool = False) -> tuple[RunView | None, int, str | None]:
    """The checks of a run that build, train or fetch nothing (a local sweep makes them on every job
    before its first starts): (its typed view, with its world size and step timeout, that size,
    None) or (None, 0, the problem's one line). The front door: the values as written are checked
    (validate) on the plain config; past it every check reads the one typed view."""
    try:
        env = external_env() if external else None
        assert env is not None or not external  # torchrun / srun set the environment it reads
        world = validate(cfg, None if env is None else env.world_size, torch.cuda.is_available())
    except (ConfigError, ValueError) as exc:
        return None, 0, str(exc).splitlines()[0]
    problem = out_dir_problem(cfg.get("out_dir"))
    if problem:
        return None, 0, problem
    view = typed(dict(cfg, world_size=world))  # the one view, made once
    problem = None if external else memory_problem(view, world, note=True)
    if problem:
        return None, 0, problem
    view, problem = with_step_timeout(view)  # null: sized from the run's estimated waits
    if problem:
        return None, 0, problem
    from ..runtime.progress import check_logger

    problem = check_logger(view)
    return (None, 0, problem) if problem else (view, world, None)


def checked_run(cfg: dict, external: bool) -> tuple[RunView, int]:
    """A named config validated (precheck), what it needs made sure of (a pretrained model, the
    checkpoint it resumes from, its data, room on disk): (its typed view, the world size); bad
    input: one line, exit 2. What the run learns here (model.pretrained_path, _resume) is noted
    in the view."""
    view, world, problem = precheck(cfg, external)
    if view is None:
        fail_config(problem or "?")
    ensure_pretrained(view, external=external)
    from ..train.checkpoint import CheckpointError, resolve_resume

    try:  # where resume=auto|<path> continues from (None: from scratch)
        noted(view, {"_resume": resolve_resume(view, world, warn=lambda m: print(f"acco: {m}", file=sys.stderr))})
    except CheckpointError as exc:
        fail_config(str(exc))
    problem = data_problem(view, external)
    if problem:
        fail_config(problem)
    from .run.disk import check_disk

    problem = check_disk(view, world)  # out_dir's filesystem (and the data cache's) can hold the run
    if problem:
        fail_config(problem)
    return view, world


def rank_view(view: RunView, cfg: dict) -> RunView:
    """The one view as a rank in this process reads it (torchrun / srun / a submitit job): with
    the link's runtime setting its worker config `cfg` took (link.runtime) noted in it, not a
    second conversion. A spawned worker is sent plain data and makes its own."""
    return noted(view, {"link.runtime": cfg["link"]["runtime"]})


def sweep_out_dirs(jobs: list[tuple[dict, list[str]]]) -> list[str | None]:
    """Where each job of a Hydra sweep (its composed config, its overrides) goes when the user named
    no out_dir: a job of an experiment's run list to the experiment's folder as always (None: the
    default); every other job to one folder for the sweep, `<results_root>/sweeps/<label>/<run>`,
    the label naming the experiment and what the sweep varies (sweep_label), so a sweep never
    mixes with the runs the figures and the report read."""
    from ..config.experiments import SWEEPS, in_run_list, run_name, sweep_label

    groups: dict[tuple, list[int]] = {}
    for i, (cfg, _) in enumerate(jobs):
        exp = cfg.get("experiment") or {}
        groups.setdefault((exp.get("id"), cfg.get("scale"), cfg.get("results_root")), []).append(i)
    out: list[str | None] = [None] * len(jobs)
    for (_, scale, root), members in groups.items():
        exp = jobs[members[0]][0].get("experiment")
        label = sweep_label(exp, str(scale), [jobs[i][1] for i in members])
        for i in members:
            cfg, overrides = jobs[i]
            name = run_name(cfg, overrides)
            if cfg.get("out_dir") or (exp and in_run_list(name, exp)):
                continue
            out[i] = os.path.join(str(root or "results"), SWEEPS, label, name)
    return out


def with_sweep_out_dir(overrides: list[str], out_dir: str | None) -> list[str]:
    """A job's overrides with its sweep folder (sweep_out_dirs) named, quoted for Hydra."""
    from .slurm.sbatch import hydra_quote

    return list(overrides) if out_dir is None else [*overrides, f"out_dir={hydra_quote(out_dir)}"]


def named_and_checked(cfg: dict, overrides: list[str]) -> dict:
    """The composed config with its out_dir named (from the overrides: what varies), checked
    against the schema; bad input: one line, exit 2."""
    try:
        cfg = with_out_dir(cfg, overrides)
        # Hydra has typed the composition against the schema; this checks what it cannot: the
        # resolved values (interpolations) and every key under its option's own kind
        check_config(cfg, allow_extra_top_level=cfg.get("task") != DEFAULT_TASK)
    except (ConfigError, ValueError) as exc:
        fail_config(str(exc).splitlines()[0])
    return cfg


Launch = Literal["skip", "slurm", "rank", "local"]


@dataclass(frozen=True)
class Run:
    """A run made ready by `prepare`, and how `launch` starts it:
    skip  -- nothing to do; `skip` says why (a sweep's completed run, a Slurm job still active);
    slurm -- submitted to Slurm from this process (its job prepares the folder and resumes);
    rank  -- this process is one of its ranks (torchrun / srun set `env`);
    local -- `world` worker processes spawned on this machine."""

    how: Launch
    out_dir: str
    view: RunView | None = None  # the checked config's typed view (None: skipped)
    world: int = 0
    env: DistEnv | None = None  # torchrun's / srun's environment
    skip: str | None = None  # the line said for a run skipped
    in_sweep: bool = False  # a job of a Hydra sweep: a folder in use elsewhere is skipped, not refused
    auto_named: bool = False  # out_dir was named here: in use elsewhere, the next free name is taken


def prepare(cfg: dict, overrides: list[str], multirun: bool = False) -> Run:
    """Everything before a worker starts, from the composed config: named and checked (bad input:
    one line, exit 2), skipped if there is nothing to do, the final config's checks and what it
    needs (checked_run). Nothing is written in the run folder yet (a pretrained model it starts
    from may be trained into the data cache)."""
    env = external_env()
    auto_named = not cfg.get("out_dir")
    cfg = named_and_checked(cfg, overrides)
    if multirun and not cfg.get("overwrite") and run_completed(cfg["out_dir"]):
        return Run("skip", cfg["out_dir"], skip=f"skip (completed): {cfg['out_dir']}")
    if cfg["launcher"].get("name") == "slurm" and env is None:
        plan = resubmission(cfg)
        if plan.skip == "running":  # no second job into the same folder
            return Run("skip", plan.cfg["out_dir"], skip=plan.line())
        # a completed run: the checks say what to do (overwrite=true)
        view, world = checked_run(plan.cfg, external=False)
        return Run("slurm", view.out_dir, view, world)
    view, world = checked_run(cfg, external=env is not None)
    how: Launch = "local" if env is None else "rank"
    return Run(how, view.out_dir, view, world, env, in_sweep=multirun, auto_named=auto_named)


def launch(run: Run) -> int:
    """Start what `prepare` made ready; the launching process's exit code (a rank of torchrun /
    srun exits here)."""
    if run.how == "skip":
        print(f"acco: {run.skip}", file=sys.stderr, flush=True)
        return 0  # a sweep goes on with its other runs
    assert run.view is not None
    if run.how == "slurm":
        return submit_to_slurm(run.view, run.world)
    if run.how == "rank":
        run_this_rank(run)
    return launch_local(run)


def run_this_rank(run: Run) -> NoReturn:
    """torchrun / srun: this process is one rank; it exits with the rank's status."""
    env, out_dir = run.env, run.out_dir
    assert env is not None and run.view is not None
    cfg = plain(run.view)
    if env.rank == 0:
        prepare_out_dir(out_dir, cfg)
    from ..engine.virtual_clock import is_virtual, unemulated_link
    from .run.worker import exit_now, run_rank
    from .testbed.emulate import for_external_launcher, join

    cfg = unemulated_link(cfg) if is_virtual(cfg) else for_external_launcher(cfg)
    join(cfg, env)  # a link setting: in-process delays (no namespaces under torchrun/srun)
    try:
        status = run_rank(rank_view(run.view, cfg), env)
    except BaseException:  # reported by run_rank; leave without interpreter teardown
        if env.rank == 0:
            say_how_it_ended(out_dir)  # what rank 0's summary.json says of it
        exit_now(1)
    if env.rank == 0:
        say_how_it_ended(out_dir)
    if status == "preempted":  # the checkpoint and every file are written
        leave_preempted(env.rank, env.world_size)
    exit_now(0)


def launch_local(run: Run) -> int:
    """The workers spawned on this machine, this launcher the only writer of the run folder until
    they have ended."""
    from .lock import RunInUse, claim

    view, out_dir = run.view, run.out_dir
    assert view is not None
    try:
        lock = claim(out_dir)
    except RunInUse as exc:
        if run.in_sweep:
            print(f"acco: skip (running elsewhere): {exc}", file=sys.stderr, flush=True)
            return 0
        if not run.auto_named:
            fail_config(str(exc))
        lock = claim(out_dir := next_free_name(out_dir))  # runs/<time>_<name> taken this same second
        noted(view, {"out_dir": out_dir})
    with lock:
        return run_local(view, run.world, out_dir)


# how long rank 0 waits, once every rank has agreed the run is preempted and its files are written,
# for its peers' processes to be gone before it exits with PREEMPTED_EXIT
PREEMPTED_GRACE_S = 3.0


def leave_preempted(rank: int, world: int) -> None:
    """End a preempted rank under torchrun or srun, every rank's part written (the worker's last
    barrier): the job's exit status is PREEMPTED_EXIT, rank 0's; the other ranks exit 0, first.
    Under `srun --kill-on-bad-exit=1` (the generated sbatch scripts) one task's non-zero exit
    makes Slurm terminate the others, and srun then reports the terminated tasks' signal (143), not
    3: the script would not requeue. Seen on the local cluster: peers exiting 3 before rank 0 gave
    143; peers exiting 0, then rank 0 exiting 3, gave 3."""
    from .run.worker import exit_now

    if rank != 0:
        exit_now(0)
    if world > 1:
        time.sleep(PREEMPTED_GRACE_S)
    exit_now(PREEMPTED_EXIT)


def next_free_name(out_dir: str) -> str:
    n = 2
    while os.path.exists(f"{out_dir}-{n}"):
        n += 1
    return f"{out_dir}-{n}"


def run_local(view: RunView, world: int, out_dir: str) -> int:
    """Spawn the workers on this machine, watch them, and report how the run ended."""
    started = time.monotonic()
    cfg = plain(view)  # what config.yaml holds and the workers are sent
    prepare_out_dir(out_dir, cfg)
    print(f"acco: {view.method.name} with {world} local worker(s) -> {out_dir}", file=sys.stderr, flush=True)
    layout_note = local_layout_note(view, world)
    if layout_note:
        print(f"acco: {layout_note}", file=sys.stderr, flush=True)
    import torch.multiprocessing as mp

    from ..engine.virtual_clock import is_virtual, unemulated_link
    from .run.worker import spawned_worker
    from .testbed import emulate

    topology = None
    from .run.supervise import forward_signals, record_failure, supervise

    try:
        if is_virtual(cfg):  # link.* only feed the virtual clock's model: nothing to build
            cfg = unemulated_link(cfg)
        else:
            cfg, topology = emulate.prepare(cfg, world)  # link.*: namespaces + tc, or in-process delays
        start_method = worker_start_method(cfg["dist"]["start_method"], cfg["device"])
        if start_method == "fork":
            preload_worker_modules(cfg)
        workers = mp.start_processes(
            spawned_worker, args=(cfg, local_envs(world)), nprocs=world, join=False, start_method=start_method
        )
        with forward_signals(workers.processes):  # SIGUSR1/USR2/TERM: checkpoint, then stop
            outcome = supervise(workers.processes)
    finally:
        if topology is not None:
            topology.destroy()
    from ..runtime.disk import sweep

    sweep(out_dir, traces=outcome.ok)  # every worker has ended: what they were writing is garbage
    if not outcome.ok:
        record_failure(out_dir, view, world, outcome)
    summary = read_summary(out_dir)
    say_how_it_ended(out_dir, time.monotonic() - started, summary)
    if not outcome.ok:
        return 1
    return PREEMPTED_EXIT if summary is not None and summary.status == "preempted" else 0


def local_layout_note(cfg: RunView, world: int) -> str | None:
    """What a layout of several nodes means to the local launcher: all its ranks on this machine."""
    from ..config.validate import parse_layout

    if not cfg.get("layout"):
        return None
    nodes, per_node = parse_layout(cfg["layout"])
    if nodes == 1:
        return None
    link = cfg.get("link") or {}
    how = (
        f"every worker behind the same {link['rate_mbit']} Mbit/s link (link.*)"
        if link.get("rate_mbit")
        else "no link between them but loopback (set link.rate_mbit to emulate one)"
    )
    return (
        f"layout={cfg['layout']}: {nodes} nodes x {per_node} = {world} workers, all on this machine, {how}; "
        "launcher=slurm puts them on nodes"
    )


def preload_worker_modules(cfg: dict) -> None:
    """Import what every worker needs (the models, the task's module) here, once, before forking."""
    import importlib

    importlib.import_module("acco.models")
    importlib.import_module(cfg["task"].partition(":")[0])
