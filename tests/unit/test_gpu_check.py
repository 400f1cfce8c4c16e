"""experiments/gpu_check.py's machinery on CPU: the plan of parts and their budgets, a part killed
as a whole process group at its time box, the summary written whatever a part does."""

from __future__ import annotations

import glob
import importlib.util
import os
import re
import sys
import time

import pytest

from acco.methods.variants import UnknownVariant
from tests.helpers.paths import ROOT


def load_check():
    spec = importlib.util.spec_from_file_location("gpu_check", os.path.join(ROOT, "experiments", "gpu_check.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


check = load_check()


def test_the_plan_fits_the_budget_and_every_part_names_what_it_runs(tmp_path):
    parts = check.plan(str(tmp_path))
    names = [p.name for p in parts]
    assert len(set(names)) == len(names) and names[0] == "prepare"  # caches before anything is timed
    assert {"correctness", "sync_debug", "overlap"} <= set(names)
    assert names[1] == "correctness"  # the decisive checks first: a shorter lease still answers them
    assert all(p.budget_s > 0 and p.what and p.commands for p in parts)
    assert sum(p.budget_s for p in parts) + check.RESERVE_S <= check.BUDGET_S
    # every test file with tests marked gpu is run by some part
    files = glob.glob(os.path.join(ROOT, "tests", "**", "test_*.py"), recursive=True)
    mark = "pytest.mark." + "gpu"  # not this file's own text
    # run_if's mark (tests/helpers/run_if.py: gpu = pytest.mark.gpu), as test_gpu_races takes it
    run_if_gpu = re.compile(r"^from tests\.helpers\.run_if import .*\bgpu\b", re.M)

    def is_marked(path: str) -> bool:
        text = open(path).read()
        return mark in text or run_if_gpu.search(text) is not None

    marked = {os.path.relpath(p, ROOT) for p in files if is_marked(p)}
    marked = {p for p in marked if os.path.basename(p) != "test_gpu_check.py"}  # this file names the marks
    run = {a for p in parts for argv in p.commands for a in argv if a.startswith("tests/")}
    assert marked <= run, marked - run
    for part in parts:
        for argv in part.commands:
            scripts = [a for a in argv if a.endswith(".py")]
            assert scripts and all(os.path.exists(os.path.join(ROOT, a)) for a in scripts), argv


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1][0] != "Z"  # a zombie has exited
    except OSError:
        return False


HANGS = """
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
with open(sys.argv[1], "w") as f:
    f.write(str(child.pid))
time.sleep(600)
"""


def test_a_part_that_runs_out_of_time_is_killed_with_its_children(tmp_path):
    pid_file = tmp_path / "child.pid"
    part = check.Part("hangs", 3, "a stand-in that hangs", ((sys.executable, "-c", HANGS, str(pid_file)),))
    result = check.run_part(part, 3, str(tmp_path / "hangs.log"))
    assert result["status"].startswith("timed out")
    child = int(pid_file.read_text())
    deadline = time.time() + 10  # the kill is sent; the kernel may take a moment to reap
    while alive(child) and time.time() < deadline:
        time.sleep(0.1)
    assert not alive(child)


def test_every_part_is_in_the_summary_even_when_one_fails(tmp_path):
    ok = (sys.executable, "-c", "print('fine')")
    parts = [
        check.Part("fails", 10, "exits 1", ((sys.executable, "-c", "raise SystemExit(1)"), ok)),
        check.Part("passes", 10, "exits 0", (ok,)),
    ]
    machine = {"name": "stand-in", "memory_gb": 1.0, "gpus": 1, "torch": "x", "cuda": "y", "date": "today"}
    results = check.run_plan(parts, str(tmp_path), machine, time.time() + 60)
    assert results["fails"]["status"] == "failed (exit 1)" and results["passes"]["status"] == "passed"
    readme = (tmp_path / "README.md").read_text()
    assert "| fails | exits 1 | 10 | failed (exit 1)" in readme and "| passes | exits 0 | 10 | passed" in readme
    assert "one GPU: world 1" in readme
    assert "fine" in (tmp_path / "passes.log").read_text()
    assert "fine" not in (tmp_path / "fails.log").read_text()  # a part stops at its first failing command


def test_a_missing_package_is_named_before_anything_runs(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(check, "NEEDED", [*check.NEEDED, "no_such_package_acco"])
    assert check.main(["--out", str(tmp_path / "gpu")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: cannot import no_such_package_acco") and "make wheels" in err
    assert not (tmp_path / "gpu").exists()


WAITS_FOR = """
import os, sys, time
mine, other = sys.argv[1], sys.argv[2]
open(mine, "w").close()
end = time.time() + 20
while not os.path.exists(other):
    if time.time() > end:
        raise SystemExit(1)
    time.sleep(0.05)
"""


def test_a_parallel_parts_commands_run_side_by_side(tmp_path):
    """Each command waits for the other's file: they pass only if they run at the same time."""
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    both = ((sys.executable, "-c", WAITS_FOR, a, b), (sys.executable, "-c", WAITS_FOR, b, a))
    result = check.run_part(check.Part("pair", 60, "two at once", both, parallel=True), 60, str(tmp_path / "p.log"))
    assert result["status"] == "passed"
    a, b = str(tmp_path / "c"), str(tmp_path / "d")
    both = ((sys.executable, "-c", WAITS_FOR, a, b), (sys.executable, "-c", WAITS_FOR, b, a))
    one_by_one = check.run_part(check.Part("pair", 60, "in turn", both), 60, str(tmp_path / "q.log"))
    assert one_by_one["status"] == "failed (exit 1)"  # in turn, the first waits for ever (20 s)


def test_the_paper_shapes_plan_fits_its_budget_and_its_shapes_compose(tmp_path):
    from acco.config.experiments import compose
    from acco.train.memory import model_shape

    parts = check.paper_shapes_plan(str(tmp_path))
    assert sum(p.budget_s for p in parts) + check.RESERVE_S <= check.PAPER_BUDGET_S
    assert [p.name for p in parts if p.name.startswith("throughput_")] == [
        f"throughput_2p7b_{n}layers" for n in check.DEPTHS
    ]
    full = model_shape(compose(["model=gptneo_2p7b", "model.pretrained_path=null"]))
    for layers in check.DEPTHS:  # the 2.7B width at a few layers: the same layer, fewer of them
        cut = model_shape(compose(["model=gptneo_2p7b", *check.depth_overrides(layers)]))
        assert cut.layers == layers and cut.hidden == full.hidden == 2560
        assert cut.params < full.params


def test_the_depth_extrapolation_is_exact_for_a_linear_cost():
    fixed, per_layer, tokens = 0.03, 0.011, 512 * 4
    rows = [
        {"layers": n, "seq_len": 512, "micro_batch_size": 4, "tokens_per_s": tokens / (fixed + per_layer * n)}
        for n in (4, 2)
    ]
    out = check.extrapolate_depth(rows, 32, 2_651_307_520, 989.4)
    assert abs(out["full_seconds_per_micro_batch"] - (fixed + 32 * per_layer)) < 1e-12
    assert abs(out["per_layer_s"] - per_layer) < 1e-12 and abs(out["fixed_s"] - fixed) < 1e-12
    mfu = 6 * 2_651_307_520 * tokens / (fixed + 32 * per_layer) / 989.4e12
    assert abs(out["mfu"] - mfu) < 1e-12


def test_the_overlap_parts_method_is_a_trainer_spelling_or_a_key():
    for method, head in (
        ("ddp_flat", ["method=ddp", "method.impl=flat"]),  # the key its results are filed under
        ("ddp:impl=flat", ["method=ddp", "method.impl=flat"]),
        ("ddp", ["method=ddp"]),  # storage only: the defaults
        ("acco", ["method=acco"]),
        ("dpu:warmup_steps=0", ["method=dpu", "method.warmup_steps=0"]),
    ):
        args = check.overlap_overrides(method)
        assert args[: len(head)] == head and args[len(head)] == "model=gptneo_36m"
        folder = next(a for a in args if a.startswith("out_dir="))
        assert ":" not in folder and folder.count("=") == 1  # a Hydra value unquoted
    with pytest.raises(UnknownVariant):
        check.overlap_overrides("sgd")
