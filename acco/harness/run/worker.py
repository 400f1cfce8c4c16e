"""The per-rank main: join the process group, build the task and the method, train, save, evaluate
(every rank its share) and leave the run's files (rank 0 writes metrics.csv, the model, eval.json
and summary.json; every rank contributes its trace lane pair and its memory figures).

The end of a run depends on nothing but the run: whatever the final evaluation reads is loaded
when the task is built (before step 1), the model is saved before the evaluation starts, and an
evaluation that fails leaves the run `completed` with summary.json's `final_eval_error` (redo it
with experiments/evaluate.py from <out_dir>/model).

Waits after the last committed step, and what bounds them (nothing after training waits on the
default group, whose dist.timeout_s is sized for start-up):
  * gathering θ_T: the communication group, dist.step_timeout_s; every rank arrives straight from
    the last step's boundary, where they were all together;
  * the final evaluation's collectives (peers wait there while rank 0 saves the parameters and
    the model; then for the slowest share), the gather of every rank's figures (peers wait there
    while rank 0 writes eval.json): the post-training group, dist.final_timeout_s (hours);
  * nothing waits on rank 0 merging the trace and writing summary.json: the peers leave after
    the figures' gather (their trace parts are written before it)."""

from __future__ import annotations

import gc
import json
import os
import shutil
import socket
import sys
import time
import traceback
from collections.abc import Mapping
from typing import Any, NoReturn

import torch
import torch.distributed as dist
from omegaconf import DictConfig

from ...atomic import atomic_write, atomic_write_json
from ...config.plain import plain
from ...config.schema import typed
from ...engine.audit import CollectiveAudit
from ...engine.device_clock import DeviceWaitTimeout
from ...engine.trace import TraceRecorder, merge_trace_parts, remove_parts
from ...engine.virtual_clock import is_virtual
from ...runtime.disk import NoSpaceError, release, reserve, writing
from ...runtime.files import (
    MetricsWriter,
    clear_progress,
    peak_memory_bytes,
    write_failure,
    write_report,
)
from ...runtime.process_group import dump_flight_recorder, flight_recorder_path
from ...runtime.summary import SUMMARY_FILE, RunSummary
from ...tasks import load_task_factory
from ...train.checkpoint import CheckpointError
from ...train.post_training import FinalEvaluationError, final_evaluation, post_training_group
from ...train.precision import precision_report
from ...train.signals import Preempted, SignalLatch
from ...train.trainer import Trainer
from ..launch import DistEnv, cpu_threads, cuda_allocator_settings, init_process_group, pick_device
from ..testbed.link import summary as link_summary
from .disk import advice_for
from .supervise import is_peer_error


def _read_json(path: str):
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def spawned_worker(local_rank: int, cfg: dict, envs: list[DistEnv]) -> None:
    """Entry of a process spawned by the local launcher."""
    env = envs[local_rank]
    from ..testbed.emulate import join

    join(cfg, env)  # the emulated link: this rank's network namespace, in-process delays
    env.export()
    try:
        run_rank(cfg, env)
    except BaseException:  # already reported (traceback, summary/failure note): leave at once
        exit_now(1)
    exit_now(0)


def exit_now(code: int) -> NoReturn:
    """Leave without running interpreter-exit destructors: a process group's gloo threads can
    deadlock against the GIL while a DDP reducer or group is torn down at exit (seen with torch
    2.13: the main thread joins gloo's worker thread, which waits for the GIL to drop a tensor)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def run_rank(cfg: dict | DictConfig, env: DistEnv) -> str:
    """The rank's whole run. `cfg`: a checked config, plain where it crossed a process boundary (a
    spawned worker, a Slurm job's pickle), made the typed view here, once; or the entry point's view
    itself (a rank in the launching process: torchrun, srun, a submitit job), read as it is."""
    cfg = typed(cfg)
    SignalLatch.install()  # SIGUSR1/USR2/TERM from now on: checkpoint at the next step boundary
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    cuda_allocator_settings()  # before anything here touches CUDA
    device = pick_device(cfg.device, env.local_rank, env.local_world_size, shared=cfg.dist.backend == "gloo")
    if device.type == "cpu":
        torch.set_num_threads(cpu_threads(cfg.train.threads, env.local_world_size))
    backend = init_process_group(
        env,
        device,
        cfg.dist.timeout_s,
        cfg.dist.backend,
        # a virtual-clock run's counts are the model's, so its kernels are made reproducible too
        deterministic=bool(cfg.train.deterministic) or is_virtual(cfg),
        dump_dir=cfg.out_dir,  # NCCL's flight recorder dumps there on a timeout (nccl_trace_rank_<r>)
    )
    # train.audit_collectives: from here on every collective is recorded (the groups' creation too)
    audit = CollectiveAudit(cfg.out_dir, env.rank).install() if cfg.train.audit_collectives else None
    post_group = post_training_group(cfg, env.world_size)
    out_dir = cfg.out_dir
    rank, world = env.rank, env.world_size
    if rank == 0:
        os.makedirs(out_dir, exist_ok=True)
        reserve(out_dir)  # room for the failure report should the disk fill up
    window = cfg.train.trace_steps
    tracer = TraceRecorder(rank, enabled=cfg.train.trace, steps=tuple(window) if window is not None else None)
    trainer = None
    if audit is not None:
        audit.step_of = lambda: None if trainer is None else trainer.steps_done
    status, error = "running", None
    final_eval_error = None
    metrics = None
    t0 = time.time()
    load_at_start = _load_average()
    preempted = None
    try:
        resume = resume_point(cfg, world)
        task = load_task_factory(cfg.task)(cfg, rank, world, device)
        dist.barrier()  # rank 0 has created out_dir
        metrics = MetricsWriter(out_dir) if rank == 0 else None
        trainer = Trainer(cfg, task, rank, world, device, tracer, metrics, disk_advice=advice_for(cfg))
        if resume:  # the step it resumed from may be an older checkpoint's: one was found corrupt
            trainer.load_checkpoint(resume["dir"], resume.get("fallbacks") or ())
        if metrics is not None:  # only now: a resume that failed leaves metrics.csv as it was
            metrics.open(keep_until_step=trainer.start_step if resume else None)
        trainer.train()
        # θ_T as an fp32 vector only when it is saved: on a GPU a model-sized fp32 copy (28 GB
        # for a 7B model) would not fit beside the training state
        final = trainer.committed_vector() if cfg.train.save_final_params else None
        trainer.load_committed_into_model(final)  # every rank's model holds θ_T
        if rank == 0:  # the peers wait for this in the final evaluation, on the post-training group
            save_outputs(cfg, task, final, out_dir)
        del final
        # the training is done and saved: a failed evaluation is recorded (summary.json's
        # final_eval_error), the run stays completed, experiments/evaluate.py redoes it from model/
        final_eval_error = run_final_evaluation(cfg, task, trainer, rank, world, post_group)
        if task.on_finish is not None:
            task.on_finish(out_dir)
        status = "completed"
    except Preempted as exc:  # every rank: the checkpoint is written, the run stops to be resumed
        status, error, preempted = "preempted", None, exc
        print(f"acco: rank {rank} stopped by {exc}; continue with resume=auto", file=sys.stderr, flush=True)
    except (NoSpaceError, CheckpointError) as exc:  # the disk is full, or no checkpoint could be read:
        # one line (the launcher's, or rank 0's under torchrun/srun), no traceback
        status, error = "failed", str(exc)
        if rank == 0 and env.source != "local":
            print(f"error: {error}", file=sys.stderr, flush=True)
        write_failure(out_dir, rank, error)
        raise
    except BaseException as exc:
        status, error = "failed", f"rank {rank}: {type(exc).__name__}: {exc}"
        dump = flight_recorder_path(rank) if isinstance(exc, DeviceWaitTimeout) else None
        if dump and dump_flight_recorder(dump):  # before NCCL's watchdog would: this rank ends first
            error += f"; NCCL's flight recorder (the last collectives of every group): {dump}"
        traceback.print_exc()
        write_failure(out_dir, rank, error)
        raise
    finally:
        _finish(
            cfg,
            env,
            backend,
            device,
            trainer,
            tracer,
            metrics,
            status,
            error,
            t0,
            post_group,
            final_eval_error,
            load_at_start,
        )
    SignalLatch.uninstall()
    if audit is not None:
        audit.uninstall()
    if preempted is not None:
        handler = SignalLatch.previous_handler(preempted.signum)
        if callable(handler):  # submitit's own: rank 0 requeues the job
            handler(preempted.signum, None)
    return status


def resume_point(cfg: DictConfig, world: int) -> Mapping[str, Any] | None:
    """Where this run continues from ({"dir", "step"}): resolved (and checked) by the entry point
    before any worker started, or here for a run requeued by submitit with resume=auto."""
    if "_resume" in cfg:
        return cfg._resume
    from ...train.checkpoint import resolve_resume

    return resolve_resume(cfg, world, warn=lambda m: print(f"acco: {m}", file=sys.stderr, flush=True))


def run_final_evaluation(cfg: DictConfig, task, trainer: Trainer, rank: int, world: int, post_group) -> str | None:
    """The task's final evaluation at θ_T (every rank its share); rank 0 writes eval.json. Returns
    the evaluation's error (one line; the same on every rank of a sharded evaluation), or None."""
    if task.final_eval is None:
        return None
    try:
        with trainer.evaluation_precision():  # every method alike (train.precision)
            results = final_evaluation(cfg, task.final_eval, task.model, rank, world, post_group)
    except Exception as exc:  # noqa: BLE001 - any failure of the evaluation alone (a full disk is not one)
        if not isinstance(exc, FinalEvaluationError):
            traceback.print_exc()
        error = f"{type(exc).__name__}: {' '.join(str(exc).split())}"
        print(
            f"acco: rank {rank}: the final evaluation failed ({error}); the training result stands: "
            f"redo it with experiments/evaluate.py {cfg.out_dir}",
            file=sys.stderr,
            flush=True,
        )
        return error
    if rank == 0 and results is not None:
        with writing(cfg.out_dir, "eval.json", cfg.train.steps, advice=advice_for(cfg)):
            atomic_write_json(os.path.join(cfg.out_dir, "eval.json"), results)
    return None


def save_outputs(cfg: DictConfig, task, final: torch.Tensor | None, out_dir: str) -> None:
    """Rank 0, after training and before any final evaluation: final parameters, the model (+ tokenizer)."""
    step = cfg.train.steps
    if cfg.train.save_final_params:
        path = os.path.join(out_dir, "final_params.pt")
        assert final is not None  # gathered for rank 0 when train.save_final_params is set
        with writing(path, "the final parameters", step, need=final.numel() * 4, advice=advice_for(cfg)):
            atomic_write(path, lambda tmp: torch.save(final.cpu(), tmp))
    if cfg.train.save_model:
        model_dir = os.path.join(out_dir, "model")
        # the parameters are views into one flat buffer: save independent copies
        state = {k: v.detach().clone().cpu() for k, v in task.model.state_dict().items()}
        need = sum(v.numel() * v.element_size() for v in state.values())
        # built beside and renamed: a model folder is complete (a full disk leaves none)
        partial = os.path.join(out_dir, ".model.partial")
        shutil.rmtree(partial, ignore_errors=True)
        try:
            with writing(partial, "the model", step, need=need, advice=advice_for(cfg)):
                task.model.save_pretrained(partial, state_dict=state)
                if task.tokenizer is not None:
                    task.tokenizer.save_pretrained(partial)
            shutil.rmtree(model_dir, ignore_errors=True)
            os.rename(partial, model_dir)
        finally:
            shutil.rmtree(partial, ignore_errors=True)


def _load_average() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:  # not on every platform
        return None


def _host_report(t0: float, load_at_start: list[float] | None) -> dict:
    """Where and when the run ran, for a report's provenance: the machine's CPUs and its load averages
    (1/5/15 min) at the start and the end (a busy machine slows every measured time), torch's
    version, the start and end in UTC."""
    stamp = lambda t: time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))  # noqa: E731
    return {
        "cpus": os.cpu_count(),
        "load_avg_start": load_at_start,
        "load_avg_end": _load_average(),
        "torch": torch.__version__,
        "started_utc": stamp(t0),
        "ended_utc": stamp(time.time()),
    }


def _link_report(cfg: DictConfig) -> dict:
    """summary.json's `link` block; on the virtual clock it says the link was not emulated."""
    note = (cfg.link.get("runtime") or {}).get("note")
    return link_summary(cfg) | ({"note": note} if note else {})


def _finish(
    cfg,
    env,
    backend,
    device,
    trainer,
    tracer,
    metrics,
    status,
    error,
    t0,
    post_group,
    final_eval_error=None,
    load_at_start=None,
) -> None:
    out_dir, rank = cfg.out_dir, env.rank
    if metrics is not None:
        metrics.close()
    late = None  # a full disk while the trace is written: the run fails after all
    if os.path.isdir(out_dir) and not (status == "failed" and error and error.startswith("no space left")):
        try:
            with writing(out_dir, "the trace", tracer.step - 1, advice=advice_for(cfg)):
                tracer.dump_part(out_dir)
        except NoSpaceError as exc:
            late = exc
    mem = peak_memory_bytes(device)
    mem["node"] = os.environ.get("SLURMD_NODENAME") or socket.gethostname()
    if trainer is not None:
        mem.update(trainer.memory_report())
        mem["micro_batches"] = trainer.runner.next_index
        mem["compute_busy_s"] = round(trainer.runner.busy_s, 4)
        # this rank's micro-batches in each round (adaptive mode: they vary per round and rank)
        mem["round_micro_batches"] = trainer.round_micro_batches()
        # what its checkpoints cost it: the last save's bytes, seconds and host-memory peak; the load's reads
        mem["checkpoint_io"] = trainer.checkpoint_io
    per_rank: list[dict | None] = [mem]
    if status in ("completed", "preempted"):  # peers are alive: collect every rank's figures
        clear_progress(out_dir, rank)  # the note that tells a slow rank from a hung one: not needed
        per_rank = [None] * env.world_size
        # on the long group: peers may wait here while rank 0 saves the model; once it returns,
        # every rank's trace part is on disk
        dist.all_gather_object(per_rank, mem, group=post_group)
    if rank == 0:
        if status in ("completed", "preempted") and late is None:  # streamed, and no peer waits for it
            window = cfg.train.trace_steps
            try:
                with writing(out_dir, "the trace", tracer.step - 1, advice=advice_for(cfg)):
                    merge_trace_parts(
                        out_dir, env.world_size, {"trace_steps": list(window)} if window is not None else None
                    )
            except NoSpaceError as exc:
                late = exc
        if late is not None:  # the parts are of no use without the merged trace
            status, error = "failed", str(late)
            remove_parts(out_dir, env.world_size)
        rows = metrics.rows if metrics is not None else []
        last_eval = next((r["eval_loss"] for r in reversed(rows) if r.get("eval_loss") is not None), None)
        summary = RunSummary(
            method=cfg.method.name,
            world_size=env.world_size,
            status=status,
            error=error,
            failed_rank=rank if status == "failed" and not is_peer_error(error) else None,
            launcher=env.source,
            slurm_job_id=os.environ.get("SLURM_JOB_ID"),
            backend=backend,
            device=str(device),
            deterministic=cfg.train.deterministic,
            accum=cfg.train.accum,
            steps_completed=len(rows),
            steps=cfg.train.steps,
            total_wall_time_s=round(getattr(trainer, "wall_time_s", time.time() - t0), 4),
            final_train_loss=rows[-1]["train_loss"] if rows else None,
            final_eval_loss=last_eval,
            samples=rows[-1]["samples"] if rows else 0,
            hetero=plain(cfg.hetero),
            link=_link_report(cfg),
            clock=trainer.clock_report() if trainer is not None else {"mode": "virtual" if is_virtual(cfg) else "real"},
            final_eval=_read_json(os.path.join(out_dir, "eval.json")),
            final_eval_error=final_eval_error,
            precision=precision_report(trainer.backend) if trainer is not None else None,
            per_rank=per_rank,
            resumed_from_step=(cfg.get("_resume") or {}).get("step")
            if trainer is None
            else (trainer.start_step or None),
            last_checkpoint=getattr(trainer, "last_checkpoint", None),
            host=_host_report(t0, load_at_start),
        )
        release(out_dir)  # the reserve's room goes to the summary
        write_report(out_dir, os.path.join(out_dir, SUMMARY_FILE), summary.to_json())
        if trainer is not None:
            trainer.finish_logging(summary)
    if late is not None:  # every file but the trace is written: report it, then fail this rank
        if rank == 0 and env.source != "local":
            print(f"error: {late}", file=sys.stderr, flush=True)
        write_failure(out_dir, rank, str(late))
    if trainer is not None:
        trainer.close(wait=status != "failed")  # after a failure the thread may be stuck in gloo
    if status == "failed":  # peers may be dead or stuck in a collective: tearing the group down could hang
        if late is not None:
            raise late
        return
    if status == "preempted":
        # a barrier after rank 0's files: under srun --kill-on-bad-exit one rank's exit ends the
        # others, so none may leave while rank 0 still writes (acco.harness.entry: leave_preempted)
        dist.barrier(group=post_group)
    # otherwise no barrier: peers leave while rank 0 merges the trace (destroying a group is local)
    if trainer is not None:
        trainer.release()  # DDP's reducer and the optimizer go while their groups still exist
        gc.collect()
    dist.destroy_process_group()
    if late is not None:
        raise late
