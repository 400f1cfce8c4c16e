"""One rank's training run: builds the chosen method's backend (PyTorch DDP + ZeRO, or a schedule
of rounds on the flat engine: acco/train/backend*.py), runs it, and at every committed step records
one metrics row, evaluates when due, and agrees with the other ranks on signals, non-finite values
and checkpoints."""

from __future__ import annotations

import dataclasses
import math
import sys
import time
from collections.abc import Sequence
from contextlib import contextmanager, nullcontext
from datetime import timedelta
from typing import Any, cast

import torch
import torch.distributed as dist
from omegaconf import DictConfig

from ..engine import comm_worker, device_clock
from ..engine.compute import autocast
from ..engine.rounds import StopRule
from ..engine.sharded_adamw import AdamWSettings
from ..engine.sync import SyncResult
from ..engine.trace import TraceRecorder
from ..engine.virtual_clock import ClockSettings
from ..runtime.disk import Advice
from ..runtime.files import MetricsWriter, note_progress, reset_peak_memory
from ..runtime.process_group import Timeouts, set_group_timeout, training_group_options
from ..runtime.progress import Progress, make_logger
from ..runtime.summary import RunSummary
from ..runtime.watchdog import Watchdog, exit_on_stall
from ..tasks import Task
from . import checkpoint
from .backend import Backend
from .budget import lr_schedule, run_length
from .build import build_backend
from .faults import FaultPlan, nan_injecting
from .precision import compute_dtype, grad_dtype, parameters_in
from .signals import Preempted, SignalLatch
from .train_state import TrainState


class NonFiniteError(RuntimeError):
    pass


class Trainer:
    def __init__(
        self,
        cfg: DictConfig,  # acco.config.schema.typed: read here, once (not in per-step code)
        task: Task,
        rank: int,
        world_size: int,
        device: torch.device,
        tracer: TraceRecorder,
        metrics: MetricsWriter | None,
        disk_advice: Advice | None = None,  # what a full disk's one line adds (the harness sizes the run)
    ):
        self.cfg = cfg
        self.disk_advice = disk_advice
        self.task = task
        self.rank, self.world_size = rank, world_size
        self.device = device
        self.tracer = tracer
        self.metrics = metrics
        train, method = cfg.train, cfg.method
        self.method = method.name
        # train.steps and/or a budget of samples or tokens (acco.train.budget): whichever comes first
        self.length = run_length(train, task.tokens_per_sample)
        self.steps = self.length.steps  # None: the budget alone ends the run
        self.until = StopRule(lambda t: self.length.done(t, self.samples), self.steps)
        self.accum = train.accum
        # clock.mode=virtual: time is the schedule's modelled time (VirtualClock); a
        # heterogeneous worker is then slower by the clock, not by a sleep
        self.clock_settings = ClockSettings.from_config(cfg)
        virtual = self.clock_settings.virtual
        slowdown = cfg.hetero.factor if cfg.hetero.slow_rank == rank and not virtual else 1.0
        clock = self.clock_settings if virtual else None
        self.lr_at = lr_schedule(cfg, world_size, task.samples_per_micro_batch, task.tokens_per_sample)
        # bf16 (train.precision): autocast compute for every method, bf16 storage on the flat path
        self.compute_dtype = compute_dtype(train, device)
        if train.activation_checkpointing:  # recompute each block's activations in backward
            if not hasattr(task.model, "activation_checkpointing_enable"):
                raise ValueError(
                    "train.activation_checkpointing=true needs a Hugging Face model "
                    "(activation_checkpointing_enable); set it to false for this task"
                )
            cast(Any, task.model).activation_checkpointing_enable({"use_reentrant": False})
        self.samples = 0
        self.eval_s = 0.0
        self.last_eval: float | None = None
        self.progress = self.logger = None
        if metrics is not None:  # rank 0 shows progress and feeds the optional experiment tracker
            self.progress = Progress(
                method.name,
                self.steps,
                train.log_every,
                budget=self.length.budget,
                unit=self.length.unit,
                per_sample=self.length.per_sample,
                modelled=virtual,  # the virtual clock's seconds: the log line says they are modelled
            )
            self.logger = make_logger(cfg, cfg.out_dir)
        # the waits that end a run whose peer is gone, in one order (acco.runtime.process_group.Timeouts):
        # a rank waiting in a training collective gives up at dist.step_timeout_s, NCCL's watchdog
        # later, the rank's own watchdog last; the first training step waits by the start-up timeout
        # (dist.timeout_s), then on_step sets the step timeouts (the default group keeps dist.timeout_s)
        self.nccl = dist.get_backend() == "nccl"
        self.step_timeout_s = cfg.dist.step_timeout_s
        self.timeouts = Timeouts.of(self.step_timeout_s, cfg.dist.timeout_s, self.nccl)
        first = self.timeouts.first_step()
        # this thread's own collectives (evaluation; the check of carried gradients when a
        # checkpoint is due): a few host scalars, so gloo on GPU as well
        self.control_group = dist.new_group(
            list(range(world_size)), timeout=timedelta(seconds=first.host_wait_s), backend="gloo"
        )
        # a save's waits for the other ranks' writes: dist.checkpoint_timeout_s (a paper-scale
        # checkpoint is tens of GB), on a group of its own
        self.checkpoint_group = checkpoint.checkpoint_group(cfg, world_size)
        self.checkpoint_every = train.checkpoint_every or 0  # null: like 0, only on a signal
        self.keep_checkpoints = train.keep_checkpoints or 2
        self.eval_every = train.eval_every
        self.fault = FaultPlan.of(cfg.fault)  # read at every step boundary, so read once here
        self.start_step = self.steps_done = 0
        self.wall_offset = 0.0  # wall time of the steps before a resume
        self.last_checkpoint: str | None = None
        # what this rank's checkpoint saves and load cost (summary.json's checkpoint_io)
        self.checkpoint_io: dict[str, Any] = {"saves": 0, "last_save": None, "load": None}
        if cfg.fault.nan_at_step:
            task.loss_fn = nan_injecting(task.loss_fn, cfg.fault.nan_at_step, lambda: self.steps_done)
        # the training collectives' own process group: PyTorch DDP's, or the flat engine's
        # communication thread's (so they never interleave with the main thread's collectives);
        # on NCCL its kernels run on high-priority streams (acco.runtime.process_group.training_group_options)
        # On NCCL the host waits for a sync at most host_wait_s (device_clock.wait_for raises on the
        # waiting thread) and NCCL's watchdog, the backstop, waits a little longer (collective_s)
        device_clock.configure_waits(first.host_wait_s if self.nccl else None)
        group = dist.new_group(
            list(range(world_size)),
            timeout=timedelta(seconds=first.collective_s),
            pg_options=training_group_options(dist.get_backend()),
        )
        self.training_group = group
        self.backend: Backend
        # dist.comm_thread=false: the flat engine's syncs inline, on this thread and stream (the
        # sequential reference of make gpu-check's race check)
        comm_worker.configure(cfg.dist.get("comm_thread", True))
        # PyTorch's DDP (ddp, method.impl=torch), the local methods' or the flat engine's, as
        # acco.Overlapped builds it (build_backend). Deterministic on CUDA: torch's
        # deterministic kernels. The local methods agree on the inner steps' counts on this
        # thread's group: never behind a fragment's sync on the communication thread's
        self.backend = build_backend(
            task,
            self.method,
            method,
            AdamWSettings.of(cfg.optim),
            rank=rank,
            world_size=world_size,
            device=device,
            accum=self.accum,
            lr_at=self.lr_at,
            compute_dtype=self.compute_dtype,
            grad_dtype=grad_dtype(train, device),
            deterministic=train.deterministic,
            tracer=tracer,
            comm_group=group,
            start_group=self.control_group,  # the same-start check: this thread's gloo group
            step_group=self.control_group,
            max_accum_factor=train.max_accum_factor,
            slowdown=slowdown,
            may_extend=self.budget_allows_more if self.length.budget is not None else None,
            clock=clock,
        )

    @property
    def runner(self):
        """The compute side (data position, micro-batch counts); None after release()."""
        return self.backend.runner

    def use_step_timeouts(self) -> None:
        """From the first committed step on, the step timeouts instead of the start-up one's
        (collectives already issued, the next round's sync among them, keep theirs)."""
        t = self.timeouts
        set_group_timeout(self.control_group, t.host_wait_s)
        set_group_timeout(self.training_group, t.collective_s)
        if self.nccl:
            device_clock.configure_waits(t.host_wait_s)
        watchdog = getattr(self, "watchdog", None)
        if watchdog is not None:
            watchdog.timeout_s = t.watchdog_s

    def budget_allows_more(self, uncommitted: int) -> bool:
        """Adaptive rounds near the end of a budget: one more micro-batch beyond the round's minimum
        only while this rank's uncommitted micro-batches stay within its equal share of the samples
        left. Far from the end it never binds; at the end it keeps the step that reaches the budget
        from overshooting it by more than the rounds' minimum micro-batches (a rank alone cannot see
        the others' counts before the sync adds them up, so the share is what it can bound)."""
        assert self.length.budget_samples is not None  # only a budget run asks
        left = self.length.budget_samples - self.samples
        return (uncommitted + 1) * self.world_size * self.task.samples_per_micro_batch <= left

    # -- running --------------------------------------------------------------------------------
    def train(self) -> None:
        # from_pretrained hands the model back in eval mode, where HF skips activation checkpointing
        # (and dropout): training mode for every model
        self.task.model.train()
        dist.barrier()
        reset_peak_memory(self.device)  # peak memory from here on is training's, not start-up's
        self.start = time.perf_counter()
        start = self.start_step
        self.tracer.at_step(start + 1)  # the trace window (train.trace_steps) counts committed steps
        SignalLatch.install()
        self.backend.carry_votes(SignalLatch.votes)
        # last of the timeouts: a rank waiting for a stuck peer fails by its collective's timeout first
        out_dir = self.cfg.out_dir
        self.watchdog = Watchdog(
            lambda: (self.runner.next_index, self.steps_done),
            self.timeouts.first_step().watchdog_s,
            exit_on_stall(self.rank, out_dir),
            # a note of the last progress seen: the local launcher tells a live but slow rank from a hung one
            on_progress=lambda progress: note_progress(out_dir, self.rank, progress),
        ).start()
        try:
            self.backend.run(self.until, self.on_step, start)
        finally:
            self.watchdog.stop()
            self.wall_time_s = self.wall_now()

    def wall_now(self) -> float:
        """Training time so far: on the virtual clock, rank 0's modelled seconds (a checkpoint
        carries the clock itself); on the real clock the seconds since the start, without
        evaluations and checkpoint saves, plus those before a resume."""
        clock = self.backend.clock
        if clock is not None:
            return clock.now(0)
        return time.perf_counter() - self.start - self.eval_s + self.wall_offset

    def clock_report(self) -> dict:
        """summary.json's `clock` block: the mode, and on the virtual clock the costs it used."""
        clock = self.backend.clock
        report = self.clock_settings.report(clock.sync_costs if clock is not None else {}, self.world_size)
        if clock is not None and clock.step_model is not None:  # a DDP step overlapping its backward
            report["ddp_step"] = clock.step_model
        return report

    def on_step(self, t: int, res: SyncResult) -> None:
        if t == self.start_step:  # the first step of this process is committed: the step timeouts
            self.use_step_timeouts()
        self.steps_done = t + 1
        self.tracer.at_step(t + 2)  # step t+1 is committed: what is recorded next leads to t+2
        self.fault.inject(t + 1, self.rank)
        self.samples += res.micro_batches * self.task.samples_per_micro_batch
        wall = self.wall_now()
        every = self.eval_every
        eval_loss = None
        if self.task.val_batches and every > 0 and ((t + 1) % every == 0 or self.until.done(t + 1)):
            eval_loss = self.evaluate()
        if self.metrics is not None:
            row = {
                "step": t + 1,
                "samples": self.samples,
                "tokens": self.samples * self.task.tokens_per_sample if self.task.tokens_per_sample else None,
                "wall_time_s": round(wall, 4),
                "train_loss": res.loss_mean,
                "lr": res.lr,
                "micro_batches": res.micro_batches,
                "eval_loss": eval_loss,
                "grad_norm": res.grad_norm,
            }
            self.metrics.write(row)
            assert self.progress is not None  # rank 0 (it writes metrics) shows progress
            self.progress.update(t + 1, res.loss_mean, self.samples, wall, res.lr, res.micro_batches, eval_loss)
            if self.logger is not None:
                self.logger.log(row)
        self.at_step_boundary(t + 1, res)

    # -- the step boundary: agreement on signals and non-finite values, checkpoints -------------
    def at_step_boundary(self, step: int, res: SyncResult) -> None:
        """Every rank, after committed step `step`, nothing in flight. Whether any rank got a
        checkpoint signal or saw a non-finite gradient shard came with the step's own counts
        (Backend.take_agreed), so every rank decides alike here without waiting for the others: a
        fast rank goes straight on to its next round (a signal latched after the step's last sync
        counts at the next step)."""
        bad_grad, votes = self.backend.take_agreed()
        signum = SignalLatch.agreed(votes)
        if bad_grad or not math.isfinite(res.loss_mean):
            what = "gradient" if bad_grad else "training loss"
            kept = f"; the last good checkpoint is {self.last_checkpoint}" if self.last_checkpoint else ""
            raise NonFiniteError(f"non-finite {what} at step {step} (loss {res.loss_mean}){kept}")
        if self.until.done(step):
            return  # the run is complete: nothing to resume
        due = signum or (self.checkpoint_every and step % self.checkpoint_every == 0)
        if due and self.pending_grads_nonfinite():
            print(
                f"acco: rank {self.rank}: no checkpoint at step {step}: the gradients carried into "
                f"the next step are not finite",
                file=sys.stderr,
                flush=True,
            )
        elif due:
            self.save_checkpoint(step)
        if signum:
            raise Preempted(step, signum, self.last_checkpoint)

    def pending_grads_nonfinite(self) -> bool:
        """dpu/wp/acco carry gradients into the next step: a checkpoint holding non-finite ones
        would not be a good one to go back to. Checked (a scan of the model-sized buffer and one
        more small all-reduce, so every rank decides alike) only when a checkpoint is due."""
        if not self.backend.carries_gradients:
            return False
        flag = torch.tensor([float(self.backend.pending_grads_nonfinite())], dtype=torch.float64)
        dist.all_reduce(flag, op=dist.ReduceOp.MAX, group=self.control_group)
        return bool(flag[0])

    def _drain(self) -> None:
        """On a GPU, wait for the training work still queued, so a timer of non-training time
        (evaluation, a checkpoint) started next does not absorb it: it is training time."""
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def save_checkpoint(self, step: int) -> str:
        shared, own = self.state_dicts(step)
        self._drain()
        start = time.perf_counter()
        with self.watchdog.paused():
            saved = checkpoint.save(
                self.cfg.out_dir,
                step,
                self.rank,
                self.world_size,
                shared,  # every rank writes its share of the parameters
                own,
                self.cfg,
                keep=self.keep_checkpoints,
                group=self.checkpoint_group,
                disk_advice=self.disk_advice,
            )
        del shared, own
        self.last_checkpoint = saved.path
        self.checkpoint_io["saves"] += 1
        self.checkpoint_io["last_save"] = {"step": step, **dataclasses.asdict(saved.stats)}
        self.eval_s += time.perf_counter() - start  # like evaluation: not training time
        return saved.path

    def state_dicts(self, step: int) -> tuple[dict, dict]:
        """(the state every rank shares: the parameters; this rank's own state: the trainer's
        TrainState and the backend's) after `step`."""
        own = self.train_state(step).state_dict()  # first: the backend may wait for a sync in flight
        shared, backend_own = self.backend.state_dicts()
        own.update(backend_own)
        return shared, own

    def train_state(self, step: int) -> TrainState:
        """The trainer's own state after committed step `step`. The counters it reads are kept on
        the trainer itself between checkpoints (the per-step code updates plain attributes)."""
        return TrainState(step, self.samples, self.wall_now(), self.last_eval, checkpoint.rng_state())

    def resume_train_state(self, state: TrainState) -> None:
        self.start_step = self.steps_done = state.step
        self.samples = state.samples
        self.wall_offset = state.wall_s
        self.last_eval = state.last_eval
        checkpoint.set_rng_state(state.rng)

    def load_checkpoint(self, path: str, fallbacks: Sequence[str] = ()) -> int:
        """Continue from a complete checkpoint folder (checkpoint.verify), or, when a rank finds its
        file corrupt while reading it, from the next of `fallbacks` (older ones, newest first);
        returns the step. Every rank tries the same folders in the same order (a corrupt file fails
        the load on every rank alike)."""
        for i, candidate in enumerate([path, *fallbacks]):
            live_shared, live_own = self.backend.state_dicts()
            try:
                shared, own, stats = checkpoint.load(
                    candidate, self.rank, self.world_size, live_shared, live_own, group=self.checkpoint_group
                )
                break
            except checkpoint.CheckpointError as exc:
                if i == len(fallbacks):
                    raise checkpoint.CheckpointError(
                        f"{exc}; no older usable checkpoint: start over with resume=null overwrite=true"
                    ) from None
                if self.rank == 0:
                    print(f"acco: {exc}; trying the previous one", file=sys.stderr, flush=True)
            finally:
                del live_shared, live_own
        self.backend.load_state_dicts(shared, own)
        self.resume_train_state(TrainState.from_state_dict(own))
        self.last_checkpoint = candidate
        self.checkpoint_io["load"] = {"path": candidate, **dataclasses.asdict(stats)}
        if self.progress is not None:
            self.progress.resume_at(self.start_step, self.samples)
        return self.start_step

    # -- committed parameters, evaluation -------------------------------------------------------
    def committed_vector(self) -> torch.Tensor:
        """θ_t as an fp32 vector of the trainable parameters (same on every rank)."""
        return self.backend.committed_vector()

    def load_committed_into_model(self, vector: torch.Tensor | None = None) -> None:
        """Put θ_t into the model (collective unless `vector`, a committed_vector(), is given).
        Without `vector` no fp32 model-sized vector is made: the masters are gathered, rounded to
        the buffers' dtype, through the communication buffer (free at a step boundary)."""
        self.backend.load_committed_into_model(vector)

    @torch.no_grad()
    def evaluate(self) -> float:
        """Mean validation loss at the committed parameters, over all ranks' validation batches."""
        watchdog = getattr(self, "watchdog", None)
        if watchdog is None:
            return self._evaluate()
        with watchdog.paused():  # not training progress, and may take a while
            return self._evaluate()

    def _evaluate(self) -> float:
        self._drain()
        start = time.perf_counter()
        model = self.task.model
        was_training = model.training
        model.eval()
        total = torch.zeros(2, dtype=torch.float64, device=self.device)
        with self.committed_parameters(), self.evaluation_precision():
            for batch in self.task.val_batches:
                total[0] += float(self.task.loss_fn(model, batch))
                total[1] += 1
        model.train(was_training)
        total = total.cpu()
        dist.all_reduce(total, group=self.control_group)
        self.last_eval = float(total[0] / total[1])
        self.eval_s += time.perf_counter() - start
        return self.last_eval

    @contextmanager
    def committed_parameters(self):
        """For the block, the model holds θ_t rounded to the flat buffers' dtype (collective on the
        flat path: the masters are gathered into the communication buffer, free at a step boundary,
        and the parameters viewed from it: no model-sized copy). The torch DDP model holds θ_t."""
        with self.backend.committed_parameters():
            yield

    @contextmanager
    def evaluation_precision(self):
        """Every method evaluates alike: under autocast in the compute dtype, with parameters stored
        in it. In bf16 the torch DDP baseline's fp32 parameters are rounded to bf16 for the block
        (the flat methods' parameters already are), so equal committed parameters give equal
        evaluations whatever the method; fp32: nothing changes."""
        dtype = self.compute_dtype
        storage = (
            parameters_in(self.task.model, dtype)
            if not self.backend.parameters_in_compute_dtype and dtype != torch.float32
            else nullcontext()
        )
        with storage, autocast(self.device.type, dtype):
            yield

    def memory_report(self) -> dict:
        return self.backend.memory_report()

    def round_micro_batches(self) -> list[int]:
        return self.backend.round_micro_batches()

    def finish_logging(self, summary: RunSummary | None) -> None:
        if self.progress is not None:
            self.progress.close()
        if self.logger is not None:
            self.logger.finish(summary)
            self.logger = None

    def close(self, wait: bool = True) -> None:
        self.backend.close(wait)

    def release(self) -> None:
        """Drop the references to process-group users (PyTorch DDP, ZeRO, the sync)."""
        self.backend.release()
