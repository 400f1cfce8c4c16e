"""One rank's training run: builds the chosen method on the shared machinery, runs its schedule of
rounds, and records one metrics row per committed step."""
from __future__ import annotations

import os
import signal
import sys
import time

import torch
import torch.distributed as dist

from .engine.comm_worker import CommWorker
from .engine.compute import MicroBatchRunner
from .engine.flat import FlatModel
from .engine.rounds import RoundEngine, run_acco, run_delayed, run_sequential
from .engine.schedule import make_lr_schedule
from .engine.sharded_adamw import ShardedAdamW
from .engine.sync import SyncResult, Syncer
from .engine.torch_ddp import TorchDDPZero1
from .engine.trace import TraceRecorder
from .run_io import MetricsWriter
from .tasks import Task

METHODS = ("ddp", "dpu", "wp", "acco")


class Trainer:
    def __init__(self, cfg: dict, task: Task, rank: int, world_size: int, device: torch.device,
                 tracer: TraceRecorder, metrics: MetricsWriter | None):
        self.cfg = cfg
        self.task = task
        self.rank, self.world_size = rank, world_size
        self.device = device
        self.tracer = tracer
        self.metrics = metrics
        train, optim, method = cfg["train"], cfg["optim"], cfg["method"]
        self.method = method["name"]
        self.steps = int(train["steps"])
        self.accum = int(train["accum"])
        hetero = cfg.get("hetero") or {}
        slowdown = float(hetero.get("factor", 1.0)) if hetero.get("slow_rank") == rank else 1.0
        self.lr_at = make_lr_schedule(optim["lr"], optim["schedule"], optim["warmup_steps"],
                                      self.steps, optim.get("min_lr_ratio", 0.0))
        self.samples = 0
        self.eval_s = 0.0
        self.last_eval: float | None = None
        self.torch_ddp: TorchDDPZero1 | None = None
        self.engine: RoundEngine | None = None
        if self.method == "ddp" and method.get("impl", "torch") == "torch":
            self.torch_ddp = TorchDDPZero1(
                task.model, task.loss_fn, task.train_stream, tracer, self.accum, self.lr_at,
                optim["betas"], optim["eps"], optim["weight_decay"], optim["decay_bias_and_norm"],
                optim["clip_norm"], slowdown, device,
                bf16=device.type == "cuda" and train.get("bf16", True))
            self.runner = self.torch_ddp.runner
            return
        dtype = torch.bfloat16 if device.type == "cuda" and train.get("bf16", True) else torch.float32
        self.flat = FlatModel(task.model, world_size, dtype=dtype,
                              decay_bias_and_norm=optim["decay_bias_and_norm"])
        lo, hi = self.flat.layout.bounds(rank)
        self.opt = ShardedAdamW(self.flat.take_fp32_init()[lo:hi], self.flat.decay_mask[lo:hi],
                                self.lr_at, optim["betas"], optim["eps"], optim["weight_decay"])
        self.buffer = torch.zeros_like(self.flat.params)  # the one communication buffer
        # the communication thread gets a process group of its own, so its collectives never
        # interleave with the main thread's (evaluation, metrics) on the default group
        self.comm_group = dist.new_group(list(range(world_size)))
        self.comm = CommWorker(device)
        self.syncer = Syncer(self.buffer, self.opt, rank, world_size, self.comm_group, tracer,
                             optim["clip_norm"])
        self.runner = MicroBatchRunner(task.model, task.loss_fn, task.train_stream, tracer, slowdown)
        adaptive = not train["deterministic"]
        self.engine = RoundEngine(self.flat, self.syncer, self.comm, self.runner, self.accum,
                                  adaptive, tracer, train.get("max_accum_factor", 64))

    # -- running --------------------------------------------------------------------------------
    def train(self) -> None:
        dist.barrier()
        self.start = time.perf_counter()
        if self.torch_ddp is not None:
            for t in range(self.steps):
                self.on_step(t, self.torch_ddp.step())
        elif self.method == "ddp":
            run_sequential(self.engine, self.steps, self.on_step)
        elif self.method in ("dpu", "wp"):
            run_delayed(self.engine, self.steps, self.on_step,
                        warmup_steps=int(self.cfg["method"].get("warmup_steps", 0)),
                        predict=self.method == "wp")
        elif self.method == "acco":
            run_acco(self.engine, self.steps, self.on_step)
        else:
            raise ValueError(f"unknown method {self.method!r}")
        self.wall_time_s = time.perf_counter() - self.start - self.eval_s

    def on_step(self, t: int, res: SyncResult) -> None:
        fault = self.cfg.get("fault") or {}
        if fault.get("kill_rank") == self.rank and fault.get("at_step") == t + 1:
            os.kill(os.getpid(), signal.SIGKILL)  # a worker dying mid-run (failure tests)
        self.samples += res.micro_batches * self.task.samples_per_micro_batch
        wall = time.perf_counter() - self.start - self.eval_s
        every = int(self.cfg["train"].get("eval_every") or 0)
        eval_loss = None
        if self.task.val_batches and every > 0 and ((t + 1) % every == 0 or t + 1 == self.steps):
            eval_loss = self.evaluate()
        if self.metrics is not None:
            row = {"step": t + 1, "samples": self.samples,
                   "tokens": self.samples * self.task.tokens_per_sample if self.task.tokens_per_sample else None,
                   "wall_time_s": round(wall, 4), "train_loss": res.loss_mean, "lr": res.lr,
                   "micro_batches": res.micro_batches, "eval_loss": eval_loss,
                   "grad_norm": res.grad_norm}
            self.metrics.write(row)
            log_every = int(self.cfg["train"].get("log_every") or 0)
            if log_every and ((t + 1) % log_every == 0 or t + 1 == self.steps):
                rate = self.samples / max(wall, 1e-9)
                eta = wall / (t + 1) * (self.steps - t - 1)
                extra = f" eval {eval_loss:.4f}" if eval_loss is not None else ""
                print(f"[{self.method}] step {t + 1}/{self.steps} loss {res.loss_mean:.4f}{extra} "
                      f"lr {res.lr:.2e} mb {res.micro_batches} {rate:.1f} samples/s "
                      f"eta {eta:.0f}s", file=sys.stderr, flush=True)

    # -- committed parameters, evaluation -------------------------------------------------------
    def committed_vector(self) -> torch.Tensor:
        """θ_t as an fp32 vector of the trainable parameters (same on every rank)."""
        if self.torch_ddp is not None:
            return self.torch_ddp.committed_vector()
        out = torch.empty(self.flat.layout.padded, dtype=torch.float32, device=self.device)
        return self.engine.gather_committed(out)[: self.flat.numel]

    def load_committed_into_model(self, vector: torch.Tensor | None = None) -> None:
        """Put θ_t into the model (collective unless `vector`, a committed_vector(), is given)."""
        if self.torch_ddp is None:
            self.flat.trainable().copy_(self.committed_vector() if vector is None else vector)

    @torch.no_grad()
    def evaluate(self) -> float:
        """Mean validation loss at the committed parameters, over all ranks' validation batches."""
        start = time.perf_counter()
        saved = None
        if self.torch_ddp is None:
            saved = self.flat.params.clone()
            self.load_committed_into_model()
        model = self.task.model
        was_training = model.training
        model.eval()
        total = torch.zeros(2, dtype=torch.float64, device=self.device)
        for batch in self.task.val_batches:
            total[0] += float(self.task.loss_fn(model, batch))
            total[1] += 1
        model.train(was_training)
        if saved is not None:
            self.flat.params.copy_(saved)
        dist.all_reduce(total)
        self.last_eval = float(total[0] / total[1])
        self.eval_s += time.perf_counter() - start
        return self.last_eval

    def memory_report(self) -> dict:
        if self.torch_ddp is not None:
            params = sum(p.numel() * p.element_size() for p in self.torch_ddp.params)
            return {"optimizer_state_bytes": self.torch_ddp.optimizer_state_bytes(),
                    "param_bytes": params, "grad_bytes": params, "comm_buffer_bytes": 0}
        item = self.flat.params.element_size()
        return {"optimizer_state_bytes": self.opt.state_bytes(),
                "param_bytes": self.flat.params.numel() * item,
                "grad_bytes": self.flat.grads.numel() * item,
                "comm_buffer_bytes": self.buffer.numel() * item}

    def round_micro_batches(self) -> list[int]:
        if self.engine is not None:
            return list(self.engine.rounds_micro_batches)
        return [self.accum] * self.torch_ddp.step_count

    def close(self) -> None:
        if self.engine is not None:
            self.comm.close()

    def release(self) -> None:
        """Drop the references to process-group users (PyTorch DDP, ZeRO, the sync)."""
        self.torch_ddp = self.engine = self.runner = None
        self.__dict__.pop("syncer", None)
