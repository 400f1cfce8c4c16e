"""Rank 0's progress display and the optional Weights & Biases logging (offline).

Here the tests in-process; those that start processes (marked integration) are in
tests/integration/test_progress.py."""

from __future__ import annotations

import io

from acco.runtime.progress import Progress, check_logger


def feed(progress: Progress, steps: int) -> None:
    for step in range(1, steps + 1):
        progress.update(
            step,
            loss=5.0 - 0.1 * step,
            samples=16 * step,
            wall_s=0.5 * step,
            lr=1e-3,
            micro_batches=4,
            eval_loss=4.5 if step == steps else None,
        )
    progress.close()


def test_log_lines_every_k_steps_and_at_the_end_when_not_on_a_terminal():
    out = io.StringIO()
    feed(Progress("acco", 7, log_every=3, stream=out), 7)
    lines = out.getvalue().splitlines()
    assert [line.split()[2] for line in lines] == ["3/7", "6/7", "7/7"]
    assert lines[0].startswith("[acco] step 3/7 loss 4.7000")
    assert "32.0 samples/s" in lines[0] and "eta 2s" in lines[0]  # 48 samples in 1.5 s; 4 steps left
    assert "eval 4.5000" in lines[-1] and lines[-1].endswith("eta 0s")


def test_progress_bar_shows_step_loss_rate_and_eta():
    out = io.StringIO()
    feed(Progress("ddp", 5, log_every=1, stream=out, bar=True), 5)
    text = out.getvalue()
    final = text.replace("\r", "\n").strip().splitlines()[-1]
    assert "5/5" in final and "loss=4.5000" in final and "samples/s=32.0" in final, final
    assert "eval=4.5000" in final
    assert "<" in final  # tqdm's elapsed<remaining
    assert "[ddp] step" not in text  # the bar replaces the log lines


def test_a_resumed_run_continues_the_bar_from_its_checkpoint_step():
    out = io.StringIO()
    progress = Progress("acco", 10, log_every=1, stream=out, bar=True)
    progress.resume_at(6)
    for step in range(7, 11):
        progress.update(step, loss=3.0, samples=16 * step, wall_s=step, lr=1e-3, micro_batches=4, eval_loss=None)
    progress.close()
    shown = [line for line in out.getvalue().replace("\r", "\n").splitlines() if "/10" in line]
    first = next(i for i, line in enumerate(shown) if "6/10" in line)  # drawn at the resume
    assert "10/10" in shown[-1] and not any(" 0/10" in line for line in shown[first:])
    assert [n for n in range(1, 6) if any(f" {n}/10" in line for line in shown)] == []


def test_logger_choices_are_checked_before_anything_starts():
    assert check_logger({"logger": {"name": "none"}}) is None
    assert check_logger({"logger": {"name": "wandb", "mode": "offline"}}) is None
    assert "logger.mode=cloud" in check_logger({"logger": {"name": "wandb", "mode": "cloud"}})
    assert "logger=tensorboard" in check_logger({"logger": {"name": "tensorboard"}})


def ending(summary: dict, **kw) -> str:
    """closing_line of the run whose summary.json holds `summary`, in folder results/x."""
    from acco.runtime.progress import closing_line
    from acco.runtime.summary import RunSummary

    return closing_line(RunSummary.from_json(summary), "results/x", **kw)


def test_every_run_ends_with_one_closing_line():

    done = {
        "status": "completed",
        "steps_completed": 300,
        "steps": 300,
        "final_train_loss": 3.21,
        "final_eval_loss": 3.456789,
        "total_wall_time_s": 62.4,
    }
    assert ending(done) == (
        "acco: completed: 300/300 steps, train loss 3.2100, eval loss 3.4568, wall 1m02s -> results/x"
    )
    unevaluated = dict(done, final_eval_loss=None, final_eval_error="rank 1: OSError: no LAMBADA")
    assert ending(unevaluated) == (
        "acco: completed: 300/300 steps, train loss 3.2100, wall 1m02s; the final evaluation failed "
        "(rank 1: OSError: no LAMBADA): redo it with python experiments/evaluate.py results/x -> results/x"
    )
    stopped = dict(done, status="preempted", steps_completed=40, final_eval_loss=None, last_checkpoint="ck/step_40")
    line = ending(stopped)
    assert line.startswith("acco: preempted: 40/300 steps, train loss 3.2100, wall 1m02s, checkpoint ck/step_40")
    assert "resume=auto" in line
    failed = {"status": "failed", "error": "rank 1 was killed by SIGKILL", "steps_completed": 3, "steps": None}
    line = ending(failed, wall_s=5.2)  # no wall time from rank 0: the launcher's
    assert line == "error: training failed (rank 1 was killed by SIGKILL); 3 steps, wall 5s; see results/x/summary.json"


def test_virtual_clock_runs_say_their_times_are_modelled():
    """clock.mode=virtual: rank 0's seconds are the clock's model, and the log lines, the bar's rate and
    the closing line say so; the launcher's own (real) count and real-clock runs stay unlabelled."""

    out = io.StringIO()
    feed(Progress("acco", 7, log_every=3, stream=out, modelled=True), 7)
    lines = out.getvalue().splitlines()
    assert len(lines) == 3 and all(line.endswith("(modelled)") for line in lines), lines
    assert "32.0 samples/s eta 2s (modelled)" in lines[0]
    bar = io.StringIO()
    feed(Progress("acco", 5, log_every=1, stream=bar, bar=True, modelled=True), 5)
    assert "modelled samples/s=32.0" in bar.getvalue().replace("\r", "\n").strip().splitlines()[-1]
    virtual = {"status": "completed", "steps_completed": 3, "steps": 3, "total_wall_time_s": 62.4}
    virtual["clock"] = {"mode": "virtual", "micro_batch_s": 0.1}
    assert ending(virtual) == "acco: completed: 3/3 steps, wall 1m02s (modelled) -> results/x"
    real = dict(virtual, clock={"mode": "real"})
    assert ending(real) == "acco: completed: 3/3 steps, wall 1m02s -> results/x"
    launcher_count = dict(virtual, total_wall_time_s=None)
    assert ending(launcher_count, wall_s=5.2).endswith("wall 5s -> results/x")


def test_a_resumed_run_keeps_its_wandb_run_id_a_run_started_over_gets_a_new_one(tmp_path):
    from acco.runtime.progress import wandb_run_id

    ids = iter(["first", "second", "third"])
    out = str(tmp_path)
    metrics = tmp_path / "metrics.csv"
    metrics.write_text("step,train_loss\n")  # a fresh start: MetricsWriter has written the header alone
    assert wandb_run_id(out, lambda: next(ids)) == ("first", False)
    metrics.write_text("step,train_loss\n1,5.0\n2,4.9\n")  # resumed: the rows up to its checkpoint
    assert wandb_run_id(out, lambda: next(ids)) == ("first", True)  # a requeue, a resubmission
    metrics.write_text("step,train_loss\n")  # overwrite=true, or a requeue before any checkpoint
    assert wandb_run_id(out, lambda: next(ids)) == ("second", False)
    metrics.write_text("step,train_loss\n1,5.0\n")
    assert wandb_run_id(out, lambda: next(ids)) == ("second", True)
