"""Generated sbatch scripts (acco/harness/slurm/sbatch.py, experiments/make_sbatch.py): the rendering of a
run's resources, quoting and profile; the generator's run list and bad input; and, on the local Slurm
cluster of slurm/local-cluster/, every generated CPU-scale script accepted by `sbatch --test-only`
and one run (fig5, ACCO, 2 nodes x 1 task) trained by `sbatch --wait <script>` unchanged."""

from __future__ import annotations

import csv
import json
import os
import re
import shlex
import subprocess
import sys

import pytest

from acco.config.experiments import compose
from acco.harness.slurm.sbatch import DEFAULT_PROFILE, hydra_quote, sbatch_script, shell_quote
from tests.helpers.paths import ROOT
from tests.helpers.sbatch import MAKE_SBATCH, directives, make_sbatch_here
from tests.helpers.slurm_cluster import output, run, sacct_fields

# the tests on the local Slurm cluster share one pytest-xdist worker (tests/conftest.py)
pytestmark = pytest.mark.xdist_group("slurm")

PYTHON = "/opt/venv/bin/python"
NO_PROFILE = {**DEFAULT_PROFILE, "time_min": None, "signal_delay_s": 90}


def render(overrides, profile=None, environ=None) -> str:
    return sbatch_script(
        overrides,
        compose(overrides),
        NO_PROFILE if profile is None else profile,
        ROOT,
        PYTHON,
        environ={} if environ is None else environ,
    )


def srun_argv(text: str) -> list[str]:
    joined = text.replace("\\\n", " ")
    (line,) = [ln for ln in joined.splitlines() if ln.startswith("srun ")]
    argv = shlex.split(line)
    assert argv[-2:] == ["||", "code=$?"]  # the script keeps srun's exit code (3: requeue)
    options = [a for a in argv[1:] if a.startswith("--")][:2]  # srun's own, before the command
    assert options[0] == "--kill-on-bad-exit=1" and options[1].startswith("--cpus-per-task="), argv
    return ["srun", *argv[3:-2]]


def make_sbatch(*args, env=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, MAKE_SBATCH, *map(str, args)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env=env or os.environ.copy(),
    )


# --- rendering --------------------------------------------------------------------------------------


def test_fig8_paper_two_nodes_of_four_gpus():
    text = render(["experiment=fig8/paper", "method=acco", "layout=2x4"])
    assert text.startswith("#!/bin/bash\n")
    d = directives(text)
    assert d["--nodes"] == "2" and d["--ntasks-per-node"] == "4" and d["--gpus-per-node"] == "4"
    assert d["--job-name"] == "acco-fig8-acco_layout=2x4"
    assert d["--cpus-per-task"] == "1"
    assert d["--signal"] == "USR1@90" and "--requeue" in d and d["--open-mode"] == "append"
    # USR1 makes the ranks checkpoint and exit 3; the script then requeues itself (resume=auto), at
    # most max_requeues (3) times
    assert 'if [ "${SLURM_RESTART_COUNT:-0}" -lt 3 ]; then scontrol requeue "$SLURM_JOB_ID"; exit 0; fi' in text
    logs = os.path.join(ROOT, "results", ".slurm")
    assert d["--output"] == f"{logs}/acco-fig8-acco_layout=2x4-%j.out"
    assert d["--error"] == f"{logs}/acco-fig8-acco_layout=2x4-%j.err"
    assert "experiment fig8" in text and "scale paper" in text and "make_sbatch.py fig8 --scale paper" in text
    assert "\nset -euo pipefail\n" in text and f"\ncd {ROOT}\n" in text
    argv = srun_argv(text)
    assert argv[:3] == ["srun", PYTHON, "experiments/train.py"]
    assert argv[3:6] == ["experiment=fig8/paper", "method=acco", "layout=2x4"]
    # a GPU job asks for whole nodes (launcher.whole_nodes): all of a node's memory unless mem_gb says
    assert "--exclusive" in d and d["--mem"] == "0"
    d = directives(render(["experiment=fig8/paper", "method=acco", "layout=2x4"], {**NO_PROFILE, "mem_gb": 900}))
    assert "--exclusive" in d and d["--mem"] == "900G"
    d = directives(render(["experiment=fig8/paper", "method=acco", "layout=2x4"], {**NO_PROFILE, "whole_nodes": False}))
    assert "--exclusive" not in d and "--mem" not in d
    profile = {**NO_PROFILE, "sbatch_options": ["--exclusive=user"]}
    d = directives(render(["experiment=fig8/paper", "method=acco", "layout=2x4"], profile))
    assert d["--exclusive"] == "user" and d["--mem"] == "0"  # the profile's own kept, not doubled


def test_the_ranks_read_the_profile_the_script_was_made_with():
    """The launcher profile goes to the ranks with the other overrides: a rank sizes its step timeout
    from the profile's bandwidth between nodes, as the dry run did."""
    from acco.harness.run.preflight import with_step_timeout

    overrides = ["experiment=fig8/paper", "method=acco", "layout=2x4", "launcher=slurm", "launcher.inter_gbps=5"]
    text = sbatch_script(overrides, compose(overrides), compose(overrides)["launcher"], ROOT, PYTHON, environ={})
    passed = [a for a in srun_argv(text)[3:] if not a.startswith(("out_dir=", "resume="))]
    assert passed == overrides
    rank_cfg, problem = with_step_timeout(compose(passed))  # what a rank composes from its arguments
    assert problem is None and rank_cfg["launcher"]["inter_gbps"] == 5
    sized = rank_cfg["dist"]["step_timeout_s"]
    assert sized == with_step_timeout(compose(overrides))[0]["dist"]["step_timeout_s"]
    local = with_step_timeout(compose(overrides[:3]))[0]["dist"]["step_timeout_s"]  # launcher=local's preset
    assert sized > local


def test_fig5_cpu_one_node_two_tasks_no_gpus():
    text = render(["experiment=fig5/cpu", "method=ddp"])
    d = directives(text)
    assert d["--nodes"] == "1" and d["--ntasks-per-node"] == "2"
    assert "--gpus-per-node" not in d and "--gpus" not in text
    assert d["--job-name"] == "acco-fig5-ddp"


def test_no_layout_no_experiment_is_one_node_of_world_size():
    d = directives(render(["method=acco", "world_size=3", "train.steps=2"]))
    assert d["--nodes"] == "1" and d["--ntasks-per-node"] == "3" and "--gpus-per-node" not in d
    assert d["--job-name"] == "acco-acco_train.steps=2_world_size=3"


def test_out_dir_quoted_for_shell_and_hydra(tmp_path):
    from hydra.core.override_parser.overrides_parser import OverridesParser

    root = tmp_path / "res ults$x"  # a space and a '$' for the shell
    overrides = ["experiment=fig5/cpu", "method=dpu", "method.warmup_steps=4", "seed=1", f"results_root={root}"]
    text = render(overrides)
    argv = srun_argv(text)
    out_dir = str(root / "cpu" / "fig5" / "dpu_method.warmup_steps=4_seed=1")
    assert argv[3:-2] == overrides  # every override comes back as it was
    assert argv[-2] == "resume=auto"  # a requeued job continues from the run's checkpoint
    assert argv[-1] == f"out_dir='{out_dir}'"
    (parsed,) = OverridesParser.create().parse_overrides([argv[-1]])
    assert parsed.key_or_group == "out_dir" and parsed.value() == out_dir
    assert directives(text)["--output"] == f"{root}/.slurm/acco-fig5-dpu_method.warmup_steps=4_seed=1-%j.out"
    # a user's out_dir is not passed twice; relative ones become absolute
    argv = srun_argv(render(["method=acco", "world_size=2", "out_dir=some/where"]))
    assert [a for a in argv if a.startswith("out_dir")] == [f"out_dir='{ROOT}/some/where'"]


def test_quoting_helpers():
    for arg in ["a=b", "out_dir='/x/a=b'", "x='it''s'", 'k=$HOME `x` "q"', "p=a b", "e="]:
        assert shlex.split(shell_quote(arg)) == [arg]
    assert shell_quote("out_dir='/x/a=b'") == "\"out_dir='/x/a=b'\""
    assert hydra_quote("/x/a=b") == "'/x/a=b'" and hydra_quote("/it's") == '"/it\'s"'
    with pytest.raises(ValueError):
        hydra_quote("/a'b\"c")


def test_profile_fields_only_when_set():
    overrides = ["experiment=fig5/cpu", "method=acco"]
    d = directives(render(overrides))
    for key in ("--partition", "--account", "--qos", "--constraint", "--mem", "--time"):
        assert key not in d, key
    profile = {
        **NO_PROFILE,
        "partition": "gpu",
        "account": "proj42",
        "qos": "high",
        "constraint": "h100",
        "mem_gb": 64,
        "time_min": 90,
        "cpus_per_task": 8,
        "signal_delay_s": 120,
    }
    d = directives(render(overrides, profile))
    assert (d["--partition"], d["--account"], d["--qos"], d["--constraint"]) == ("gpu", "proj42", "high", "h100")
    assert (d["--mem"], d["--time"], d["--cpus-per-task"], d["--signal"]) == ("64G", "01:30:00", "8", "USR1@120")
    assert directives(render(overrides, {**profile, "time_min": 2 * 24 * 60 + 5}))["--time"] == "2-00:05:00"


def test_environment_passthrough():
    overrides = ["experiment=fig5/cpu", "method=acco"]
    bare = render(overrides, environ={})  # the hub is off in every job, whatever the shell says
    assert [ln for ln in bare.splitlines() if ln.startswith("export")] == [
        "export HF_HUB_OFFLINE=1",
        "export HF_DATASETS_OFFLINE=1",
        "export NCCL_DEBUG=WARN",  # what a failed job's log should hold
        "export PYTHONFAULTHANDLER=1",
    ]
    verbose = render(overrides, {**NO_PROFILE, "env": ["NCCL_DEBUG=INFO"]}, environ={})
    assert "export NCCL_DEBUG=INFO\n" in verbose and "NCCL_DEBUG=WARN" not in verbose
    text = render(overrides, environ={"ACCO_CACHE": "/c/acco cache", "HF_HUB_OFFLINE": "0", "OTHER": "x"})
    assert "export ACCO_CACHE='/c/acco cache'\n" in text
    assert "export HF_HUB_OFFLINE=1\n" in text and "export HF_DATASETS_OFFLINE=1\n" in text
    assert "OTHER" not in text


@pytest.mark.integration
def test_scripts_are_valid_bash(tmp_path):
    for i, overrides in enumerate(
        [
            ["experiment=fig8/paper", "method=dpu", "layout=1x8"],
            ["experiment=fig5/cpu", "method=acco", f"results_root={tmp_path}/a b"],
        ]
    ):
        path = tmp_path / f"{i}.sbatch"
        path.write_text(render(overrides, environ={"ACCO_CACHE": "/tmp/c"}))
        proc = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr


# --- the generator ------------------------------------------------------------------------------------


@pytest.mark.integration
def test_make_sbatch_writes_one_script_per_run(tmp_path):
    proc = make_sbatch("fig5", "--scale", "cpu", f"results_root={tmp_path / 'res'}", "--out", tmp_path / "gen")
    assert proc.returncode == 0, output(proc)
    folder = tmp_path / "gen" / "fig5" / "cpu"
    printed = proc.stdout.split()
    scripts = sorted(p for p in folder.iterdir() if p.suffix == ".sbatch")
    assert len(scripts) == 35  # ddp, acco, dpu 3 warmups: 5 seeds each; ddp and acco at 2x the budget, 5 seeds
    assert sorted(map(str, scripts)) == sorted(printed[:-1]) and printed[-1] == str(folder / "submit_all.sh")
    assert {
        "ddp_seed=0.sbatch",
        "acco_seed=2.sbatch",
        "dpu_method.warmup_steps=30_seed=2.sbatch",
        "acco_seed=4_train.steps=300.sbatch",
    } <= {p.name for p in scripts}
    for path in [*scripts, folder / "submit_all.sh"]:
        assert os.access(path, os.X_OK), path
    submit = (folder / "submit_all.sh").read_text()
    assert submit.count("\nsbatch ") == 35 and f"mkdir -p {tmp_path / 'res' / '.slurm'}" in submit
    assert (tmp_path / "res" / ".slurm").is_dir()  # Slurm does not create --output's folder


def test_make_sbatch_overrides_pick_runs(tmp_path, capsys, monkeypatch, fig8_paper_data):
    monkeypatch.setenv("ACCO_DISK_CHECK", "0")  # a paper run's ~240 GB of checkpoints: more than is free here
    for key, value in fig8_paper_data["env"].items():
        monkeypatch.setenv(key, value)
    code, out, err = make_sbatch_here(
        capsys,
        "fig8",
        *fig8_paper_data["overrides"],
        "--scale",
        "paper",
        "method=acco",
        "layout=2x4",
        "train.steps=10",
        "launcher.partition=gpu",
        f"results_root={tmp_path}",
        "--out",
        tmp_path / "gen",
    )
    assert code == 0, err
    (script,) = (tmp_path / "gen" / "fig8" / "paper").glob("*.sbatch")
    assert script.name == "acco_layout=2x4_train.steps=10.sbatch"  # data paths name no run (issue 41)
    text = script.read_text()
    d = directives(text)
    assert (d["--nodes"], d["--ntasks-per-node"], d["--gpus-per-node"], d["--partition"]) == ("2", "4", "4", "gpu")
    assert "launcher.partition=gpu" in srun_argv(text)  # the ranks read the profile too


@pytest.mark.parametrize(
    "args, message",
    [
        (["nope"], "unknown experiment 'nope'"),
        (["table1"], "no training runs"),
        (["table3", "--scale", "paper"], "no training runs"),
        (["fig5", "--scale", "huge"], "scale must be one of cpu, paper, rehearsal, got 'huge'"),
        (["fig5", "scale=cpu"], "the scale is an option now: --scale cpu"),
        (["fig5", "method=foo"], "unknown method 'foo'"),
        (["fig5", "seed=7"], "no run of fig5"),
        (["fig5", "method=acco", "layout=3x1"], "layout=3x1"),
        (["fig5", "launcher=nope"], "unknown launcher 'nope'"),
        (["fig5", "launcher.partiton=gpu"], "unknown key 'launcher.partiton'"),  # not dropped silently
        (["fig8", "--scale", "paper", "launcher=local"], "not a Slurm profile"),
        (["fig5", "launcher.sbatch_options=['--nodes=3']"], "--nodes is set by acco"),
    ],
)
def test_make_sbatch_bad_input_one_line_exit_2(tmp_path, capsys, args, message):
    code, out, err = make_sbatch_here(capsys, *args, "--out", tmp_path)
    assert code == 2, out + err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], err
    assert not list(tmp_path.iterdir())


def test_scripts_can_be_read_before_the_data_is_here(tmp_path, capsys, monkeypatch):
    """make_sbatch --no-data-checks writes the paper's scripts on a machine without the dataset, the
    2.7B tokenizer or the disk space, and says so in each script's header; without it: one line
    naming the flag (issue 41)."""
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-hub"))
    code, out, err = make_sbatch_here(capsys, "fig8", "--scale", "paper", "--out", tmp_path / "gen")
    assert code == 2 and "--no-data-checks" in err, err
    code, out, err = make_sbatch_here(capsys, "fig8", "--scale", "paper", "--no-data-checks", "--out", tmp_path / "gen")
    assert code == 0, err
    scripts = sorted((tmp_path / "gen" / "fig8" / "paper").glob("*.sbatch"))
    assert len(scripts) == 6 and "acco_layout=2x4.sbatch" in {p.name for p in scripts}
    for script in scripts:
        text = script.read_text()
        assert "# NOT CHECKED: the data, tokenizer, model and disk" in text
        assert "python experiments/prepare_data.py experiment=fig8/paper" in text


def test_srun_ends_the_step_on_a_dead_task_and_gets_its_cpus():
    profile = {**NO_PROFILE, "cpus_per_task": 6}
    text = render(["experiment=fig8/paper", "method=acco", "layout=2x4"], profile=profile)
    srun = " ".join(text.replace("\\\n", " ").split("srun ", 1)[1].split()[:2])
    assert srun == "--kill-on-bad-exit=1 --cpus-per-task=6", text


def test_the_job_runs_the_python_the_setup_lines_activate():
    from acco.harness.slurm.sbatch import job_python

    overrides = ["experiment=fig5/cpu", "method=acco"]
    cfg = compose(overrides)
    activated = {**NO_PROFILE, "setup": ["source /shared/acco/.venv/bin/activate"]}
    text = sbatch_script(overrides, cfg, activated, ROOT, None, environ={})
    assert srun_argv(text)[1] == "python" and "# python:     python (the one launcher.setup puts on PATH)" in text
    assert job_python(NO_PROFILE, None)[0] == os.path.abspath(sys.executable)  # no setup lines: this one
    assert job_python(activated, "/opt/py/bin/python")[0] == "/opt/py/bin/python"  # asked for


def test_a_second_gpu_request_is_refused():
    from acco.config.validate import ConfigError

    cfg = compose(["experiment=fig8/paper", "method=acco", "layout=2x4"])
    with pytest.raises(ConfigError, match="--gres=gpu:4 and acco asks for --gpus-per-node=4"):
        render(
            ["experiment=fig8/paper", "method=acco", "layout=2x4"],
            profile={**NO_PROFILE, "sbatch_options": ["--gres=gpu:4"]},
        )
    assert cfg["device"] == "cuda"
    render(
        ["experiment=fig5/cpu", "method=acco"], profile={**NO_PROFILE, "sbatch_options": ["--gres=gpu:4"]}
    )  # no GPUs asked


# --- on the local Slurm cluster ---------------------------------------------------------------------------


@pytest.mark.integration
def test_generated_scripts_pass_sbatch_test_only(cluster, tmp_path):
    for exp in ("fig5", "fig8"):
        proc = make_sbatch(exp, "--scale", "cpu", f"results_root={tmp_path / 'res'}", "--out", tmp_path / "gen")
        assert proc.returncode == 0, output(proc)
    scripts = sorted((tmp_path / "gen").glob("*/cpu/*.sbatch"))
    # fig8: ddp and acco on 2 layouts x 5 seeds, dpu once per layout, the overlapped ddp on 2 layouts x 5
    # seeds, PyTorch's DDP on 2 layouts x 5 seeds; 24 more on the virtual clock (8 groups x 3 seeds) and
    # the overlapped ddp's 9 (3 groups x 3)
    assert len(scripts) == 35 + 22 + 10 + 10 + 24 + 9
    for path in scripts:
        proc = run(["sbatch", "--test-only", str(path)], timeout=30)
        assert proc.returncode == 0 and "to start at" in proc.stderr, f"{path.name}: {output(proc)}"


@pytest.mark.slow
@pytest.mark.integration
def test_generated_script_trains_under_sbatch_wait(cluster, tmp_path, acco_cache):
    results = tmp_path / "results"
    # the job exports the session's ACCO_CACHE (conftest): data an earlier test prepared is reused
    proc = make_sbatch(
        "fig5",
        "--scale",
        "cpu",
        "method=acco",
        "seed=0",
        "train.steps=3",
        f"results_root={results}",
        "layout=2x1",
        "--out",
        tmp_path / "gen",
    )
    assert proc.returncode == 0, output(proc)
    script = tmp_path / "gen" / "fig5" / "cpu" / "acco_layout=2x1_seed=0_train.steps=3.sbatch"
    text = script.read_text()
    assert f"export ACCO_CACHE={shell_quote(acco_cache)}\n" in text  # the job reuses the session's data
    d = directives(text)
    assert (d["--nodes"], d["--ntasks-per-node"]) == ("2", "1") and "--gpus-per-node" not in d

    # layout=2x1 (not a key of fig5's run list) changes the runs: a results root of their own under sweeps/
    variant = results / "sweeps" / "fig5-cpu_layout=2x1"
    proc = run(["sbatch", "--wait", str(script)], timeout=300, cwd=str(tmp_path))
    job = re.search(r"Submitted batch job (\d+)", proc.stdout)
    logs = "".join(
        f"\n--- {p.name} ---\n{p.read_text()[-3000:]}" for p in sorted((variant / ".slurm").glob("*")) if p.is_file()
    )
    assert proc.returncode == 0 and job, output(proc) + logs

    out_dir = variant / "cpu" / "fig5" / "acco_layout=2x1_seed=0_train.steps=3"
    summary = json.loads((out_dir / "summary.json").read_text())
    assert summary["status"] == "completed", summary
    assert summary["world_size"] == 2 and summary["launcher"] == "slurm"
    with open(out_dir / "metrics.csv") as f:
        rows = list(csv.DictReader(f))
    assert [int(r["step"]) for r in rows] == [1, 2, 3]
    assert (variant / ".slurm" / f"acco-fig5-acco_layout=2x1_seed=0_train.steps=3-{job.group(1)}.out").is_file()
    name, state = sacct_fields(job.group(1), "JobName,State")
    assert (name, state) == ("acco-fig5-acco_layout=2x1_seed=0_train.steps=3", "COMPLETED")
