"""A user's everyday runs never touch a committed run (issue 41): fine-tuning gets its pretrained
starting point from a folder of the data cache's own, an interrupted launcher ends the run it
started, and a combination that cannot run is one line, exit 2."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from acco.config.experiments import run_name
from tests.helpers.paths import ROOT, TRAIN
from tests.helpers.runs import load_run, run_train

pytestmark = pytest.mark.integration  # every test here starts processes

COMMITTED_PRETRAINING = os.path.join(ROOT, "results", "cpu", "fig7", "ddp_method.impl=flat_seed=0")


def committed_copy(results_root, name: str) -> dict:
    """A stand-in for a committed pretraining run (its small files, no model/, as in results/cpu)
    under `results_root`/cpu/fig7/`name`; returns each file's bytes."""
    folder = results_root / "cpu" / "fig7" / name
    folder.mkdir(parents=True)
    for f in ("config.yaml", "metrics.csv", "summary.json", "eval.json"):
        shutil.copy(os.path.join(COMMITTED_PRETRAINING, f), folder / f)
    return snapshot(folder)


def snapshot(folder) -> dict:
    return {p.name: p.read_bytes() if p.is_file() else "a folder" for p in sorted(folder.iterdir())}


def test_finetuning_never_retrains_a_committed_pretraining_run(tmp_path):
    # a small pretraining of its own (unique to this test: it is trained here, not found in the cache)
    pre = ["method=ddp", "train.steps=2", "train.tokens=null", "data.source.num_stories=1500", "seed=41"]
    name = run_name({"method": {"name": "ddp"}}, pre)
    before = committed_copy(tmp_path, name)
    dep = "+model.pretrained_from.overrides=[" + ",".join(f"'{o}'" for o in pre) + "]"
    proc = run_train(
        ["experiment=fig8/cpu", "method=acco", "layout=1x2", "train.samples=null", "train.steps=2", dep]
        + [f"results_root={tmp_path}", "train.log_every=0"]
    )
    assert "training it first" in proc.stderr
    committed = tmp_path / "cpu" / "fig7" / name
    assert snapshot(committed) == before  # not one byte of the committed run changed, nothing added
    cache = os.path.join(os.environ["ACCO_CACHE"], "pretrained", "cpu", "fig7", name)
    assert load_run(cache)["summary"]["status"] == "completed" and os.path.isdir(os.path.join(cache, "model"))
    (fine,) = [p.parent for p in tmp_path.rglob("summary.json") if p.parent != committed]
    assert fine.parent.parent == tmp_path / "sweeps"  # 2 steps: not one of fig8's runs, a folder of its own
    assert not (tmp_path / "cpu" / "fig8").exists()
    assert load_run(str(fine))["cfg"]["model"]["pretrained_path"] == os.path.join(cache, "model")


def live_processes_naming(text: str) -> list[int]:
    """The pids of live processes whose command line contains `text` (ours: a unique tmp path)."""
    pids = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read().decode(errors="replace")
            with open(f"/proc/{pid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if text in cmdline and state != "Z":
            pids.append(int(pid))
    return pids


def test_an_interrupted_finetuning_run_ends_its_pretraining_child(tmp_path):
    cache = tmp_path / "cache"  # a cache of this test's own: the pretraining child names it
    env = dict(os.environ, ACCO_CACHE=str(cache), ACCO_PROGRESS="off")
    dep = "+model.pretrained_from.overrides=['method=ddp','train.steps=5000','train.tokens=null','link.rate_mbit=0']"
    args = ["experiment=fig8/cpu", "method=acco", "layout=1x2", dep, f"results_root={tmp_path}"]
    proc = subprocess.Popen(
        [sys.executable, TRAIN, *args], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        metrics = list(cache.glob("pretrained/cpu/fig7/*/metrics.csv"))
        deadline = time.monotonic() + 300
        while not metrics and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(1)  # the pretraining child has started training
            metrics = list(cache.glob("pretrained/cpu/fig7/*/metrics.csv"))
        assert metrics and proc.poll() is None, proc.stderr.read() if proc.poll() is not None else "no start"
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=240)
        assert proc.returncode == 128 + signal.SIGTERM, err
        assert "interrupted while pretraining" in err
        time.sleep(2)  # the workers' last moments
        assert live_processes_naming(str(cache)) == []  # no orphan: the child and its workers ended
        summary = load_run(str(metrics[0].parent))["summary"]
        assert summary["status"] == "preempted"  # it checkpointed: the same command continues it
    finally:
        if proc.poll() is None:
            proc.kill()
        for pid in live_processes_naming(str(cache)):  # what an old launcher left behind
            os.kill(pid, signal.SIGKILL)


def one_line_error(args, tmp_path) -> str:
    proc = run_train([*args, f"results_root={tmp_path}"], expect=2, timeout=120)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    assert not any(tmp_path.iterdir())  # nothing written
    return lines[0]


@pytest.mark.parametrize(
    "args, words",
    [
        (["model.pretrained_from=null"], "data.tokenizer.kind=from_model"),
        (["model.pretrained_from.experiment=fig99"], "is not an experiment"),
        (["model.pretrained_from.scale=huge"], "has the scales"),
    ],
)
def test_finetuning_without_a_starting_point_is_one_line(tmp_path, args, words):
    assert words in one_line_error(["experiment=fig8/cpu", "method=acco", "layout=1x2", *args], tmp_path)


def test_a_local_sweep_checks_every_job_before_the_first_starts(tmp_path):
    # the first job is good, the second is not: nothing trains (before, the first ran, then the second failed)
    args = ["-m", "experiment=fig5/cpu", "method=dpu", "method.warmup_steps=4,-1", "train.steps=2"]
    line = one_line_error(args, tmp_path)
    assert line.startswith("error: job 1 of the sweep (") and "method.warmup_steps=-1" in line
    assert "method.warmup_steps must be >= 0" in line


def reproduce_main():
    import importlib.util

    spec = importlib.util.spec_from_file_location("reproduce", os.path.join(ROOT, "experiments", "reproduce.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.main


def test_a_plan_at_the_cpu_scale_says_what_will_train(tmp_path, capsys):
    """`reproduce.py <id> --dry-run` (or --plan) at the CPU scale: which runs are complete, which will
    train and how long that takes; it trains nothing (before: 'use --scale paper', exit 2)."""
    main = reproduce_main()
    assert main(["fig8", "--dry-run"]) == 0  # the committed results: every run complete
    out = capsys.readouterr().out
    # fig8's run list up to its first planned look, the overlapped DDP's and PyTorch DDP's arms included
    assert "plan: 75 runs, 75 complete (skipped), 0 to train: nothing trains" in out
    assert max(len(line) for line in out.splitlines()) <= 120  # a terminal's width, whatever the folder names
    root = tmp_path / "results"
    assert main(["fig5", "--plan", "--results", str(root)]) == 0  # nothing there yet
    out = capsys.readouterr().out
    assert "plan: 35 runs, 0 complete (skipped), 35 to train, ETA ~" in out
    assert "from the committed runs' times in results/cpu/fig5" in out
    assert "fig5/ddp_seed=0 " in out and not root.exists()


# every script's --help: tests/integration/test_docs_commands.py


def test_what_cannot_be_meant_is_refused_or_said(tmp_path):
    """world_size=64 on a few cores is refused at once (a one-line override lets it run); a setting
    the run would record and ignore is refused; a layout of several nodes on the local launcher says
    that they are all this machine."""
    line = one_line_error(["world_size=64"], tmp_path)
    assert "world_size=64 would start 64 worker processes" in line and "dist.max_local_workers=64" in line
    line = one_line_error(["data.source.path=/nonexistent"], tmp_path)
    assert "data.source.path=/nonexistent: this source is generated" in line
    from tests.helpers.runs import SMALL_LM

    proc = run_train(["method=acco", "layout=2x1", "train.steps=1", *SMALL_LM, f"out_dir={tmp_path / 'run'}"])
    assert "layout=2x1: 2 nodes x 1 = 2 workers, all on this machine" in proc.stderr


def test_the_worker_limit_follows_the_cores():
    from acco.config.validate import ConfigError
    from acco.harness.launch import usable_cores
    from acco.harness.run.validate import check_local_workers

    cfg = {"launcher": {"name": "local"}, "device": "cpu", "dist": {"max_local_workers": "auto"}}
    limit = 4 * usable_cores()
    check_local_workers(cfg, limit, None, False)  # at the limit: fine
    with pytest.raises(ConfigError, match="dist.max_local_workers"):
        check_local_workers(cfg, limit + 1, None, False)
    check_local_workers({**cfg, "dist": {"max_local_workers": limit + 1}}, limit + 1, None, False)  # asked for
    check_local_workers(dict(cfg, launcher={"name": "slurm"}), 64, None, False)  # not this machine's
    check_local_workers(cfg, 64, 64, False)  # torchrun/srun started them


def test_a_run_list_label_names_the_folder_short(tmp_path):
    """fig7's virtual-clock entries carry `label:` (acco_virtual, ddp_virtual): their folders are
    `acco_virtual_seed=1`, not the 138-character list of every override (cut to 120 with a hash),
    config.yaml keeps every value; a run made before the label keeps its folder."""
    from acco.config.experiments import compose, expanded_runs, in_run_list, run_name

    runs = expanded_runs(compose(["experiment=fig7/cpu"])["experiment"])
    overrides, folder = next(
        (o, f) for o, f in runs if "seed=1" in o and "method=acco" in o and "clock.mode=virtual" in o
    )
    assert folder == "acco_virtual_seed=1"
    cfg = compose(["experiment=fig7/cpu", f"results_root={tmp_path}", *overrides])
    assert cfg["out_dir"] == str(tmp_path / "cpu" / "fig7" / "acco_virtual_seed=1")
    assert cfg["clock"]["mode"] == "virtual" and cfg["clock"]["sync_s"] == 0.0465 and cfg["seed"] == 1
    long = run_name(cfg, overrides)
    assert len(long) > 100 and long.startswith("acco_clock.micro_batch_s=0.15")
    (tmp_path / "cpu" / "fig7" / long).mkdir(parents=True)  # the committed runs' names
    assert compose(["experiment=fig7/cpu", f"results_root={tmp_path}", *overrides])["out_dir"].endswith(long)
    block = compose(["experiment=fig7/cpu"])["experiment"]
    assert in_run_list("acco_virtual_seed=1", block) and in_run_list(long, block)
    assert in_run_list("acco_virtual_seed=7", block)  # a seed added to an undecided claim


def test_every_run_folder_of_every_experiment_is_short_and_its_own():
    """No run list names a folder longer than a terminal shows (120 characters: a long entry gets a
    `label`), no two runs of an experiment share one, and every committed run folder is one of its
    experiment's run list (the committed runs were moved to their labels in one commit)."""
    import os

    from acco.config.experiments import (
        MAX_NAME,
        expanded_runs,
        experiment_block,
        experiment_ids,
        in_run_list,
        scales_of,
    )

    for exp in experiment_ids():
        for scale in scales_of(exp):
            block = experiment_block(exp, scale)
            folders = [folder for _, folder in expanded_runs(block)]
            assert all(len(f) <= MAX_NAME for f in folders), (exp, scale, max(folders, key=len))
            assert len(set(folders)) == len(folders), (exp, scale)
            committed = os.path.join(os.path.dirname(__file__), "..", "..", "results", scale, exp)
            if os.path.isdir(committed):
                runs = [n for n in os.listdir(committed) if os.path.exists(os.path.join(committed, n, "config.yaml"))]
                assert all(len(n) <= MAX_NAME for n in runs), (exp, max(runs, key=len))
                assert all(in_run_list(n, block) for n in runs), (exp, [n for n in runs if not in_run_list(n, block)])


@pytest.mark.parametrize("exp", ["fig8/cpu", "fig5/rehearsal"])
def test_a_plan_composes_each_run_as_hydra_does(exp):
    """reproduce.py's plan composes Hydra once per choice of config groups and applies each run's
    value overrides with Hydra's own code (compose_runs): the same configs as one compose per run."""
    from acco.config.experiments import compose, compose_runs, expand_runs

    common = [f"experiment={exp}", "results_root=/tmp/acco-plan"]
    runs = expand_runs(compose(common)["experiment"])
    assert compose_runs(common, runs, in_experiment=True) == [compose([*common, *r], in_experiment=True) for r in runs]
