"""What rank 0 shows and logs while training: a progress bar (step, loss, samples/s, ETA) on a
terminal, a plain log line every `train.log_every` steps otherwise (Slurm logs, CI, pipes), and the
optional Weights & Biases run (`logger=wandb`, offline by default: nothing leaves the machine)."""

from __future__ import annotations

import os
import sys
import uuid

from ..config.plain import plain
from ..config.schema import RunView
from .summary import RunSummary, read_summary


def wants_bar(stream) -> bool:
    """A bar only where someone watches a terminal (ACCO_PROGRESS=off: never)."""
    return stream.isatty() and os.environ.get("ACCO_PROGRESS", "auto") != "off"


class Progress:
    """One committed step at a time. A bar only where someone watches a terminal: in a log file a
    bar's carriage returns turn into one unreadable line. A run with a budget (`budget` samples or
    tokens, `per_sample` of them per sample) shows its progress as the budget's fraction. `modelled`:
    the run is on the virtual clock (clock.mode=virtual), so its wall seconds, rate and ETA are the
    clock's modelled time, and say so ("modelled"); the bar's own elapsed time and ETA stay real."""

    def __init__(
        self,
        method: str,
        steps: int | None,
        log_every: int,
        stream=None,
        bar: bool | None = None,
        budget: int | None = None,
        unit: str = "samples",
        per_sample: int = 1,
        modelled: bool = False,
    ):
        self.method, self.steps, self.log_every = method, steps, log_every
        self.modelled = modelled
        self.budget, self.unit, self.per_sample = budget, unit, per_sample
        self.stream = stream if stream is not None else sys.stderr
        if bar is None:
            bar = wants_bar(self.stream)
        self.bar = None
        if bar:
            from tqdm import tqdm

            from ..data.cache import untracked_tqdm_lock

            untracked_tqdm_lock()  # no "leaked semaphore" warning after a spawned worker's bar

            if budget is not None:
                self.bar = tqdm(
                    total=budget,
                    desc=method,
                    unit=unit[:-1] if unit.endswith("s") else unit,
                    unit_scale=True,
                    file=self.stream,
                    dynamic_ncols=True,
                    smoothing=0.1,
                )
            else:
                self.bar = tqdm(
                    total=steps, desc=method, unit="step", file=self.stream, dynamic_ncols=True, smoothing=0.1
                )

    def resume_at(self, step: int, samples: int = 0) -> None:
        """A resumed run: the bar starts at the checkpoint's step or, with a budget, its samples
        (the rate counts new progress only)."""
        if self.bar is not None:
            start = step if self.budget is None else min(samples * self.per_sample, self.budget)
            self.bar.n = self.bar.last_print_n = self.bar.initial = start
            self.bar.refresh()

    def fraction(self, step: int, samples: int) -> float:
        """How much of the run is done: the larger of the step and budget fractions (the run ends
        at whichever limit comes first)."""
        parts = [step / self.steps] if self.steps else []
        if self.budget:
            parts.append(samples * self.per_sample / self.budget)
        return min(1.0, max(parts)) if parts else 0.0

    def update(
        self,
        step: int,
        loss: float,
        samples: int,
        wall_s: float,
        lr: float,
        micro_batches: int,
        eval_loss: float | None,
    ) -> None:
        rate = samples / max(wall_s, 1e-9)
        if self.bar is not None:  # tqdm computes the ETA from its own step (or budget) rate
            post = {"loss": f"{loss:.4f}", "modelled samples/s" if self.modelled else "samples/s": f"{rate:.1f}"}
            if eval_loss is not None:
                post["eval"] = f"{eval_loss:.4f}"
            self.bar.set_postfix(post, refresh=False)
            if self.budget is None:
                self.bar.update(1)
            else:
                self.bar.update(min(samples * self.per_sample, self.budget) - self.bar.n)
            return
        if self.budget is None:
            assert self.steps is not None  # no budget: the run has a number of steps
            last = step == self.steps
            eta = wall_s / step * (self.steps - step)
            where = f"step {step}/{self.steps}"
        else:
            done = self.fraction(step, samples)
            last = done >= 1.0
            eta = wall_s * (1.0 - done) / max(done, 1e-12)
            where = f"step {step} {samples * self.per_sample}/{self.budget} {self.unit}"
        if self.log_every and (step % self.log_every == 0 or last):
            extra = f" eval {eval_loss:.4f}" if eval_loss is not None else ""
            modelled = " (modelled)" if self.modelled else ""
            print(
                f"[{self.method}] {where} loss {loss:.4f}{extra} lr {lr:.2e} "
                f"mb {micro_batches} {rate:.1f} samples/s eta {eta:.0f}s{modelled}",
                file=self.stream,
                flush=True,
            )

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


# the W&B run id of the training run in <out_dir>, for the attempts that continue it (wandb_run_id)
WANDB_RUN_ID = os.path.join("wandb", "acco-run-id")


def wandb_run_id(out_dir: str, new_id) -> tuple[str, bool]:
    """(the W&B run id, whether it continues an earlier one). A run that continues from a checkpoint
    (metrics.csv already holds its steps up to the checkpoint: MetricsWriter,
    created before the logger) keeps the id of its first attempt, so a requeued or resubmitted job
    logs into the same W&B run; any other start gets a new id (`new_id()`)."""
    from .files import read_metrics

    path = os.path.join(out_dir, WANDB_RUN_ID)
    if os.path.exists(path) and read_metrics(os.path.join(out_dir, "metrics.csv")):
        with open(path) as f:
            run_id = f.read().strip()
        if run_id:
            return run_id, True
    from ..atomic import atomic_write

    run_id = new_id()
    os.makedirs(os.path.dirname(path), exist_ok=True)
    atomic_write(path, run_id + "\n")
    return run_id, False


class WandbLogger:
    """Every metrics row as a W&B step; the run's config and final summary alongside. Offline mode
    writes under <out_dir>/wandb (upload later with `wandb sync <out_dir>/wandb/offline-run-*`).
    A run resumed from a checkpoint (a requeue, a resubmission) continues its W&B run (same id; each
    attempt's offline files carry it: `wandb sync --id $(cat <out_dir>/wandb/acco-run-id)
    <out_dir>/wandb/offline-run-*` uploads them into one run, in order of start time)."""

    def __init__(self, cfg: RunView, out_dir: str):
        import wandb

        opts = cfg.get("logger") or {}
        experiment = (cfg.get("experiment") or {}).get("id")
        self.wandb = wandb
        # a new id as W&B makes them: 8 characters of [a-z0-9]
        self.run_id, self.resumed = wandb_run_id(out_dir, lambda: uuid.uuid4().hex[:8])
        self.run = wandb.init(
            id=self.run_id,
            resume="allow",  # online: continue the run of that id (offline: its files carry the id)
            project=opts.get("project") or "acco",
            entity=opts.get("entity"),
            name=os.path.basename(os.path.normpath(out_dir)),
            dir=out_dir,
            mode=opts.get("mode") or "offline",
            # the runs of one experiment side by side in W&B's grouping; the method as the job type
            group=f"{experiment}/{cfg.get('scale')}" if experiment else None,
            job_type=cfg["method"]["name"],
            config=plain(cfg),  # the run's final config (what config.yaml holds): W&B takes plain data
            tags=[cfg["method"]["name"], *([str(cfg.get("scale"))] if cfg.get("scale") else [])],
            reinit="finish_previous",
        )

    def log(self, row: dict) -> None:
        self.run.log({k: v for k, v in row.items() if v is not None and k != "step"}, step=int(row["step"]))

    def finish(self, summary: RunSummary | None = None) -> None:
        self.run.summary.update(summary_scalars(summary.to_json() if summary is not None else {}))
        self.run.finish(exit_code=0 if summary is None or summary.completed else 1)


def summary_scalars(summary: dict, prefix: str = "") -> dict:
    """summary.json's numbers and words, nested keys joined by '/' (final_eval/lambada/accuracy,
    per_rank/0/peak_rss_bytes), as a W&B summary holds them; lists of numbers (a rank's micro-batches
    per round: one per round) stay in summary.json."""
    out: dict = {}
    items = summary.items() if isinstance(summary, dict) else enumerate(summary)
    for key, value in items:
        name = f"{prefix}{key}"
        if isinstance(value, dict) or (isinstance(value, list) and all(isinstance(v, dict) for v in value)):
            out.update(summary_scalars(value, f"{name}/"))  # type: ignore[arg-type]
        elif isinstance(value, (bool, int, float, str)):
            out[name] = value
    return out


def make_logger(cfg: RunView, out_dir: str) -> WandbLogger | None:
    name = (cfg.get("logger") or {}).get("name", "none")
    return WandbLogger(cfg, out_dir) if name == "wandb" else None


def check_logger(cfg: RunView) -> str | None:
    """The problem with the chosen logger, as one line, or None (checked before any worker starts)."""
    opts = cfg.get("logger") or {}
    name = opts.get("name", "none")
    if name not in ("none", "wandb"):
        return f"logger={name} is not known; use logger=none or logger=wandb"
    if name == "wandb":
        try:
            import wandb  # noqa: F401
        except ImportError:
            return "logger=wandb needs the wandb package: pip install wandb (or pip install -e '.[wandb]')"
        if opts.get("mode", "offline") not in ("offline", "online", "disabled"):
            return f"logger.mode={opts.get('mode')} is not known; use offline, online or disabled"
    return None


def duration(seconds: float | None) -> str:
    """1h02m, 3m05s, 7s."""
    if seconds is None:
        return "-"
    s = int(round(seconds))
    if s >= 3600:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    if s >= 60:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s}s"


def closing_line(summary: RunSummary, out_dir: str, wall_s: float | None = None) -> str:
    """The one line a run ends with: status, steps, final train/eval loss, wall time, results folder
    (summary.json's numbers; `wall_s`: the launcher's own count, where rank 0 could not say)."""
    status = summary.status or "unknown"
    done, planned = summary.steps_completed, summary.steps
    parts = [f"{done if done is not None else '?'}{f'/{planned}' if planned else ''} steps"]
    for loss, name in ((summary.final_train_loss, "train loss"), (summary.final_eval_loss, "eval loss")):
        if loss is not None:
            parts.append(f"{name} {loss:.4f}")
    wall = summary.total_wall_time_s
    # on the virtual clock rank 0's wall time is the clock's modelled seconds (the launcher's own
    # count, used where rank 0 could not say, is real)
    modelled = wall is not None and summary.modelled_time
    parts.append(f"wall {duration(wall if wall is not None else wall_s)}{' (modelled)' if modelled else ''}")
    facts = ", ".join(parts)
    if status == "completed" and summary.final_eval_error:  # trained and saved; the evaluation can be redone
        return (
            f"acco: completed: {facts}; the final evaluation failed ({summary.final_eval_error}): "
            f"redo it with python experiments/evaluate.py {out_dir} -> {out_dir}"
        )
    if status == "completed":
        return f"acco: completed: {facts} -> {out_dir}"
    if status == "preempted":
        return f"acco: preempted: {facts}, checkpoint {summary.last_checkpoint}; continue with resume=auto -> {out_dir}"
    if status == "failed":
        return f"error: training failed ({summary.error or '?'}); {facts}; see {out_dir}/summary.json"
    return f"acco: {status}: {facts} -> {out_dir}"


def say_how_it_ended(out_dir: str, wall_s: float | None = None, summary: RunSummary | None = None) -> None:
    """Print the run's closing line, from its summary.json."""
    summary = summary if summary is not None else read_summary(out_dir)
    if summary is None:  # rank 0 ended before it could write one: nothing more to say than the error above
        print(f"acco: the run left no summary.json in {out_dir}", file=sys.stderr, flush=True)
        return
    print(closing_line(summary, out_dir, wall_s), file=sys.stderr, flush=True)
