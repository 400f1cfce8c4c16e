"""A tiny multi-run reproduction through experiments/reproduce.py's own machinery (runs composed
from fig5's run list, each train.py a subprocess logged to <run>/train.log): "run k of N" lines,
one failure (an injected non-finite loss) that does not stop the others, the closing table with
the failure's log and last error line, exit code 1, no "leaked semaphore" warning; then the same
runs again: the complete ones skipped. And a spawned worker's progress bar leaks no semaphore."""

import os
import re
import subprocess
import sys

import pytest

from tests.helpers.paths import ROOT
from tests.helpers.runs import SMALL_LM

pytestmark = pytest.mark.integration


DRIVER = """
import importlib.util, os, sys
spec = importlib.util.spec_from_file_location("reproduce", os.path.join({root!r}, "experiments", "reproduce.py"))
reproduce = importlib.util.module_from_spec(spec)
spec.loader.exec_module(reproduce)
runs = reproduce.local_runs(["fig5"], "cpu", {base!r})
by = {{(r["info"]["method"], r["info"]["seed"], r["info"]["steps"]): r for r in runs}}
picked = [by[("ddp", 0, 2)], by[("acco", 0, 2)], by[("ddp", 1, 2)]][: {count}]
from acco.runtime.summary import run_completed
for i, run in enumerate(picked):  # short folders (the composed names of tiny runs pass 255 characters)
    run["out_dir"] = os.path.join({tmp!r}, f"run{{i}}")
    run["args"].append("out_dir=" + run["out_dir"])
    run["name"] = f"fig5/run{{i}}"
    run["complete"] = run_completed(run["out_dir"])
if {fail}:
    picked[2]["args"].append("fault.nan_at_step=1")  # the third run diverges at its first step
sys.exit(reproduce.run_here("reproduce test", picked).close())
"""


def drive(tmp_path, count: int, fail: bool) -> subprocess.CompletedProcess:
    base = [f"results_root={tmp_path}", *SMALL_LM, "train.steps=2", "train.eval_every=0", "world_size=2"]
    code = DRIVER.format(root=ROOT, base=base, count=count, fail=fail, tmp=str(tmp_path))
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=600, env=dict(os.environ)
    )


@pytest.mark.slow
def test_a_tiny_reproduction_shows_progress_and_sums_up(tmp_path):
    proc = drive(tmp_path, 3, fail=True)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    names = re.findall(r"^run (\d) of 3: (fig5/\S+) \(ETA", proc.stdout, re.M)
    assert [k for k, _ in names] == ["1", "2", "3"], out
    assert "(ETA after the first run)" in proc.stdout  # nothing measured before the first run ends
    assert re.search(r"^run 2 of 3: \S+ \(ETA \d+(s|m\d\ds)\)", proc.stdout, re.M), out
    table = proc.stdout[proc.stdout.index("reproduce test: 3 runs") :]
    assert "2 completed, 0 skipped (already complete), 1 failed" in table, table
    rows = [ln.split() for ln in table.splitlines() if ln.startswith("  fig5/")]
    assert [(r[0], r[1]) for r in rows] == [
        (names[0][1], "completed"),
        (names[1][1], "completed"),
        (names[2][1], "failed"),
    ]
    assert all(re.fullmatch(r"\d+s|\d+m\d\ds", r[-1]) for r in rows), rows  # a wall time each
    failed_dir = os.path.join(tmp_path, "run2")
    log = os.path.join(failed_dir, "train.log")
    assert f"log: {log}" in table, table
    error = re.search(r"^\s+last error: (.+)$", table, re.M).group(1)
    assert "non-finite gradient at step 1" in error, error
    with open(log) as f:
        assert error.strip() in f.read()  # the last error line is the log's own
    for ok in ("run0", "run1"):  # the completed runs' logs are there too
        assert os.path.isfile(os.path.join(tmp_path, ok, "train.log"))
    assert "leaked semaphore" not in out and "resource_tracker" not in out, out

    again = drive(tmp_path, 2, fail=False)  # the two completed runs: nothing to do
    assert again.returncode == 0, again.stdout + again.stderr
    assert again.stdout.count(": skipped: already complete") == 2
    assert "0 completed, 2 skipped (already complete), 0 failed" in again.stdout


CHILD = """
import multiprocessing as mp, os, sys

def worker():
    from acco.runtime.progress import Progress
    p = Progress("acco", 2, 0, stream=sys.stderr, bar=True)
    p.update(1, 3.0, 4, 1.0, 1e-3, 1, None)
    p.close()
    os._exit(0)  # as our workers end

if __name__ == "__main__":
    ctx = mp.get_context("spawn")  # as torch.multiprocessing.start_processes (GPU, dist.start_method=spawn)
    proc = ctx.Process(target=worker)
    proc.start()
    proc.join()
    sys.exit(proc.exitcode)
"""


def test_a_spawned_workers_progress_bar_leaks_no_semaphore(tmp_path):
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    proc = subprocess.run([sys.executable, str(script)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "leaked semaphore" not in proc.stderr, proc.stderr
