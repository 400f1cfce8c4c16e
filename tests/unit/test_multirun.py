"""The job-wide progress of acco/harness/multirun.py, in process: the ETA arithmetic, the error line a
failure is summed up by, the closing table and exit code."""

import io

import pytest

from acco.harness.multirun import FAILED, SKIPPED, MultiRun, duration, eta_s, last_error_line


def test_eta_is_unknown_before_a_run_has_finished():
    assert eta_s([], [1.0, 1.0]) is None
    assert eta_s([(10.0, 0.0)], [1.0]) is None  # a run of no cost measures nothing


def test_eta_weighs_the_runs_left_by_their_cost():
    # 2 finished runs: 30 s for cost 100, 90 s for cost 200 -> 0.4 s per unit of cost
    done = [(30.0, 100.0), (90.0, 200.0)]
    assert eta_s(done, [100.0, 200.0]) == pytest.approx(0.4 * 300)
    # the current run (first) has run for 10 s of its expected 40
    assert eta_s(done, [100.0, 200.0], elapsed_current=10.0) == pytest.approx(30 + 80)
    # a current run past its estimate counts as about to end, not as negative time
    assert eta_s(done, [100.0, 200.0], elapsed_current=500.0) == pytest.approx(80)
    assert eta_s(done, []) == 0.0


def test_eta_refines_as_runs_finish():
    job = MultiRun("job", [("a", 1.0), ("b", 1.0), ("c", 2.0)], stream=io.StringIO(), bar=False)
    job.begin("a")
    assert job.eta() is None
    job.end(True, wall_s=10.0)
    assert job.eta() == pytest.approx(30.0)  # b (1) + c (2) at 10 s per unit
    job.begin("b")
    job.end(False, wall_s=30.0, error="boom")
    assert job.eta() == pytest.approx(2 * 20.0)  # (10 + 30) / 2 per unit


def test_duration_text():
    assert [duration(s) for s in (None, 7.2, 185, 3725)] == ["-", "7s", "3m05s", "1h02m"]


def test_last_error_line_prefers_what_went_wrong():
    text = "step 1 loss 3.2\nTraceback (most recent call last):\n  File x\nValueError: bad shape\nbye\n"
    assert last_error_line(text) == "ValueError: bad shape"
    assert last_error_line("a\nerror: training failed (x); see y\nexit\n") == "error: training failed (x); see y"
    assert last_error_line("only this\n\n") == "only this"
    assert last_error_line("") is None


def test_table_and_exit_code():
    out = io.StringIO()
    job = MultiRun("reproduce x", [("x/a", 1.0), ("x/b", 1.0), ("x/c", 1.0)], stream=out, bar=False)
    job.skip("x/a")
    job.begin("x/b")
    job.end(True, wall_s=65.0)
    job.begin("x/c")
    job.end(False, log="/r/c/train.log", error="ValueError: bad", wall_s=3.0)
    assert job.close() == 1
    text = out.getvalue()
    assert "run 1 of 3: x/a: skipped: already complete" in text
    assert "run 2 of 3: x/b (ETA after the first run)" in text
    assert "run 3 of 3: x/c (ETA 1m05s)" in text
    table = text[text.index("reproduce x: 3 runs") :]
    assert "1 completed, 1 skipped (already complete), 1 failed" in table
    rows = {line.split()[0]: line for line in table.splitlines()[2:] if line.startswith("  x/")}
    assert SKIPPED in rows["x/a"] and "completed" in rows["x/b"] and "1m05s" in rows["x/b"]
    assert FAILED in rows["x/c"] and "3s" in rows["x/c"]
    assert "log: /r/c/train.log" in table and "last error: ValueError: bad" in table


def test_a_job_with_runs_left_over_fails():
    job = MultiRun("j", ["a", "b"], stream=io.StringIO(), bar=False)
    job.begin("a")
    job.end(True, wall_s=1.0)
    assert job.close() == 1  # b never ran
    done = MultiRun("j", ["a"], stream=io.StringIO(), bar=False)
    done.skip("a")
    assert done.close() == 0


def test_bar_on_a_terminal_keeps_lines_readable():
    class Tty(io.StringIO):
        def isatty(self):
            return True

    out = Tty()
    job = MultiRun("j", ["a"], stream=out)
    assert job.bar is not None
    job.begin("a")
    job.note("[acco] step 1/2 loss 3.0")
    job.end(True, wall_s=1.0)
    job.close()
    text = out.getvalue()
    assert "run 1 of 1: a" in text and "[acco] step 1/2 loss 3.0\n" in text and "1 completed" in text
