"""`reproduce.py --launcher slurm` with several experiments: every run planned and submitted before
any wait (--no-wait: none at all, and no figures); `make reproduce-<id>` passes ARGS through.
In-process, with experiments/submit.py's planning and submission stood in for: nothing is queued."""

import importlib.util
import os
import subprocess
from types import SimpleNamespace

from tests.helpers.paths import ROOT

_spec = importlib.util.spec_from_file_location("reproduce", os.path.join(ROOT, "experiments", "reproduce.py"))
assert _spec is not None and _spec.loader is not None
reproduce = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(reproduce)


class FakeSubmit:
    """experiments/submit.py's plan / submit_planned / wait_submitted, recording their order."""

    def __init__(self):
        self.calls: list[tuple[str, str]] = []

    def plan(self, overrides):
        exp = next(o for o in overrides if o.startswith("experiment=")).split("=")[1].split("/")[0]
        self.calls.append(("plan", exp))
        return exp, [SimpleNamespace(name=f"{exp}/run{i}", exp=exp) for i in range(2)]

    def submit_planned(self, planned, job):
        self.calls.append(("submit", planned[0].exp))
        return [(p.name, p.exp) for p in planned]

    def wait_submitted(self, job, submitted):
        for name, exp in submitted:
            self.calls.append(("wait", exp))
            job.begin(name)
            job.end(True)


def test_several_experiments_are_all_submitted_before_any_wait(monkeypatch):
    fake = FakeSubmit()
    monkeypatch.setattr(reproduce, "load_submit", lambda: fake)
    job = reproduce.run_slurm("t", ["fig5", "fig6"], "cpu", ["results_root=/tmp/x"])
    kinds = [kind for kind, _ in fake.calls]
    assert kinds == ["plan", "plan", "submit", "submit", "wait", "wait", "wait", "wait"], fake.calls
    assert job is not None and job.close() == 0


def test_no_wait_submits_everything_and_returns_with_where_to_look(monkeypatch, capsys):
    fake = FakeSubmit()
    monkeypatch.setattr(reproduce, "load_submit", lambda: fake)
    monkeypatch.setattr(reproduce.subprocess, "call", lambda *a, **k: (_ for _ in ()).throw(AssertionError("plotted")))
    code = reproduce.main(["fig5,fig6", "--launcher", "slurm", "--no-wait", "launcher.partition=gpu"])
    assert code == 0
    assert [kind for kind, _ in fake.calls] == ["plan", "plan", "submit", "submit"]
    out = capsys.readouterr().out
    assert "python experiments/status.py experiment=fig5/cpu" in out and "launcher.partition=gpu" in out
    assert reproduce.main(["fig5", "--no-wait"]) == 2  # the local launcher waits for its own runs
    assert capsys.readouterr().err.startswith("error: --no-wait is for --launcher slurm")


def test_make_reproduce_passes_args_through():
    proc = subprocess.run(
        ["make", "-n", "reproduce-fig5", "SCALE=paper", "LAUNCHER=slurm", "ARGS=launcher.partition=gpu --no-wait"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    line = next(line for line in proc.stdout.splitlines() if "experiments/reproduce.py" in line)
    assert line.endswith("reproduce.py fig5 --scale paper --launcher slurm launcher.partition=gpu --no-wait"), line
