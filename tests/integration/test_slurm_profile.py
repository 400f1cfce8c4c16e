"""What a launcher profile says beyond a job's shape (acco/config/slurm_profile.py) reaches both ways of
submitting: the generated sbatch scripts and submitit's parameters; bad entries are one-line errors;
the scripts requeue at most launcher.max_requeues times; the signal delay is sized from the
estimated checkpoint save at the paper scale; the dry run and `run_plan.time_limit_warnings` warn
when a run cannot finish within time_min x (max_requeues + 1); make_sbatch writes no script that
the up-front checks refuse, and `make sbatch-fig8 SCALE=paper` takes a profile with setup lines and
extra options."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys

import pytest

from acco.config.experiments import compose
from acco.config.validate import ConfigError
from acco.harness.run.validate import validate
from acco.harness.slurm.sbatch import sbatch_script
from tests.helpers.paths import ROOT
from tests.helpers.sbatch import directives, make_sbatch_here

PYTHON = "/opt/venv/bin/python"
CLUSTER = [
    "launcher=slurm",
    "launcher.setup=['module load cuda/12.1','source /opt/venv/bin/activate']",
    "launcher.sbatch_options=['--exclusive','--gres=nvme:1','--mem=0','--constraint=a100&ib']",
    "launcher.env=['NCCL_SOCKET_IFNAME=ib0','GLOO_SOCKET_IFNAME','MY_TOKEN_FILE']",
]
ENVIRON = {"GLOO_SOCKET_IFNAME": "eth1", "ACCO_MODELS": "models", "UNLISTED": "x"}


def script(overrides: list[str], environ: dict | None = None) -> str:
    cfg = compose(overrides)
    return sbatch_script(overrides, cfg, cfg["launcher"], ROOT, PYTHON, environ=ENVIRON if environ is None else environ)


def test_profile_setup_options_and_env_in_the_script(tmp_path):
    text = script(["experiment=fig8/paper", "method=acco", "layout=2x4", *CLUSTER])
    d = directives(text)
    assert "--exclusive" in d and d["--gres"] == "nvme:1" and d["--mem"] == "0" and d["--constraint"] == "a100&ib"
    assert d["--nodes"] == "2" and d["--open-mode"] == "append"
    body = text.split("\ncd ", 1)[1]
    assert "\nexport NCCL_SOCKET_IFNAME=ib0\n" in body and "\nexport GLOO_SOCKET_IFNAME=eth1\n" in body
    assert f"\nexport ACCO_MODELS={os.path.join(ROOT, 'models')}\n" in body  # a path: absolute for the job
    assert "export MY_TOKEN_FILE" not in body and "UNLISTED" not in body  # not set here / not asked for
    setup = body.index("module load cuda/12.1\nsource /opt/venv/bin/activate\n")
    assert body.index("export NCCL") < setup < body.index("\nsrun ")  # before the ranks start
    path = tmp_path / "job.sbatch"
    path.write_text(text)
    assert subprocess.run(["bash", "-n", str(path)], capture_output=True).returncode == 0


def test_profile_reaches_submitit(monkeypatch):
    from acco.harness.slurm.dispatch import executor_parameters, make_executor

    monkeypatch.setenv("GLOO_SOCKET_IFNAME", "eth1")
    cfg = compose(["experiment=fig5/cpu", "method=acco", *CLUSTER, "launcher.max_requeues=5"])
    shape = {"nodes": 1, "tasks_per_node": 2, "gpus_per_node": 0}
    params = executor_parameters(cfg, shape, "acco-x")
    assert params["slurm_additional_parameters"] == {
        "exclusive": True,
        "gres": "nvme:1",  # a generic resource besides the GPUs (a second GPU request is refused)
        "mem": "0",
        "constraint": "a100&ib",
    }
    setup = params["slurm_setup"]
    assert "export NCCL_SOCKET_IFNAME=ib0" in setup and "export GLOO_SOCKET_IFNAME=eth1" in setup
    assert setup[-2:] == ["module load cuda/12.1", "source /opt/venv/bin/activate"]
    executor = make_executor(cfg, shape, "acco-x")
    assert executor._executor.max_num_timeout == 5  # not submitit's default 3
    text = executor._executor._make_submission_file_text("python -c pass", "uid")
    assert "#SBATCH --exclusive" in text and "#SBATCH --gres=nvme:1" in text and "module load cuda/12.1" in text


def test_jobs_run_with_the_hub_off_unless_the_profile_says_otherwise():
    from acco.config.slurm_profile import job_env

    env = dict(job_env({"env": []}, environ={"HF_HUB_CACHE": "hub", "HF_HUB_OFFLINE": "0"}, repo_root="/r"))
    assert env == {
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "NCCL_DEBUG": "WARN",
        "PYTHONFAULTHANDLER": "1",
        "HF_HUB_CACHE": "/r/hub",
    }
    online = dict(job_env({"env": ["HF_HUB_OFFLINE=0", "HF_DATASETS_OFFLINE=0"]}, environ={}))
    assert online["HF_HUB_OFFLINE"] == online["HF_DATASETS_OFFLINE"] == "0"  # compute nodes that reach the hub


def test_checks_before_submission_see_the_hub_as_the_job_does(tmp_path, monkeypatch):
    """A hub dataset the login node could download but nobody prepared passes a check made with the
    hub on, and is refused where the job will look for it: with the hub off, in the hub cache."""
    import socket

    from acco.config.slurm_profile import as_the_job_sees_the_hub
    from acco.data.sources import DataNotFoundError, hub_reachable
    from acco.harness.run.preflight import check_source

    for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE", "HTTPS_PROXY", "https_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", False)
    monkeypatch.setattr(socket, "create_connection", lambda *a, **k: socket.socket())  # "the hub answers"
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))  # empty: nothing prepared
    source = {"hub_id": "Skylion007/openwebtext"}
    assert hub_reachable()
    check_source(source, "data.source.path")  # the login node alone would let it through
    with as_the_job_sees_the_hub({"env": []}):
        with pytest.raises(DataNotFoundError, match="Skylion007/openwebtext"):
            check_source(source, "data.source.path")
    assert os.environ.get("HF_HUB_OFFLINE") is None  # restored


@pytest.mark.parametrize(
    "override, message",
    [
        ("launcher.sbatch_options=['--nodes=3']", "--nodes is set by acco; set layout or launcher.nodes"),
        ("launcher.sbatch_options=['--time=10']", "launcher.time_min"),
        ("launcher.sbatch_options=['-N 2']", "is not an sbatch option"),
        ("launcher.sbatch_options=['--exclusive','--exclusive']", "--exclusive twice"),
        ("launcher.env=['NOT A NAME']", "is not a variable name"),
        ("launcher.signal_delay_s=700", "not below the time limit"),
    ],
)
def test_bad_profile_entries_are_one_line_errors(override, message):
    cfg = compose(["experiment=fig5/cpu", "method=acco", "launcher=slurm_local", override])
    with pytest.raises(ConfigError, match=message.replace("[", r"\[")):
        validate(cfg)


def test_profile_key_and_option_both_saying_it(tmp_path):
    cfg = compose(["method=acco", "launcher=slurm", "launcher.mem_gb=64", "launcher.sbatch_options=['--mem=0']"])
    with pytest.raises(ConfigError, match="--mem and launcher.mem_gb=64"):
        validate(cfg)


@pytest.mark.parametrize("restarts, requeued", [(0, True), (1, True), (2, False)])
def test_script_requeues_at_most_max_requeues_times(tmp_path, restarts, requeued):
    """The generated script run by bash with stand-ins for srun (the ranks stopped by the checkpoint
    signal: exit 3) and scontrol: it requeues while SLURM_RESTART_COUNT < launcher.max_requeues."""
    text = script(["experiment=fig5/cpu", "method=acco", "launcher=slurm_local", "launcher.max_requeues=2"], {})
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "srun").write_text("#!/bin/bash\nexit 3\n")
    (bin_dir / "scontrol").write_text(f'#!/bin/bash\necho "$@" >> {shlex.quote(str(tmp_path / "calls"))}\n')
    for stub in bin_dir.iterdir():
        stub.chmod(0o755)
    path = tmp_path / "job.sbatch"
    path.write_text(text)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "SLURM_JOB_ID": "77", "SLURM_RESTART_COUNT": str(restarts)}
    proc = subprocess.run(["bash", str(path)], capture_output=True, text=True, env=env, timeout=60)
    calls = (tmp_path / "calls").read_text() if (tmp_path / "calls").exists() else ""
    if requeued:
        assert proc.returncode == 0 and calls == "requeue 77\n", proc.stderr
    else:  # the last requeue is spent: the job ends with the ranks' exit code and says why
        assert proc.returncode == 3 and calls == "" and "launcher.max_requeues=2" in proc.stderr


def test_no_requeue_at_max_requeues_zero():
    d = directives(script(["experiment=fig5/cpu", "method=acco", "launcher=slurm_local", "launcher.max_requeues=0"]))
    assert "--no-requeue" in d and "--requeue" not in d


def test_signal_delay_sized_from_the_checkpoint_at_paper_scale():
    from acco.harness.run.plan import DEFAULT_SIGNAL_DELAY_S, checkpoint_plan, signal_delay

    cfg = compose(["experiment=fig8/paper", "method=acco", "layout=2x4", "launcher=slurm"])
    ckpt = checkpoint_plan(cfg)
    # fig8's ~122 GB: 2.7B params in bf16, fp32 master/moment shards, every rank's pending gradients
    # in fp32 (train.grad_dtype=fp32, as the figure runs); ~80 GB with the paper's bf16 gradients
    assert 115e9 < ckpt.size.total_bytes < 130e9
    bf16 = checkpoint_plan(compose(["experiment=fig8/paper", "method=acco", "layout=2x4", "launcher=slurm",
                                    "train.grad_dtype=bf16"]))  # fmt: skip
    assert 70e9 < bf16.size.total_bytes < 90e9 and bf16.signal_delay_s < ckpt.signal_delay_s
    assert ckpt.size.largest_rank_bytes < ckpt.size.total_bytes / 4
    assert signal_delay(cfg) == ckpt.signal_delay_s > DEFAULT_SIGNAL_DELAY_S
    assert ckpt.signal_delay_s >= ckpt.save_s + ckpt.step_s
    assert (
        directives(script(["experiment=fig8/paper", "method=acco", "layout=2x4", "launcher=slurm"]))["--signal"]
        == f"USR1@{ckpt.signal_delay_s}"
    )
    # a slower filesystem: a longer save, an earlier signal
    slow = checkpoint_plan(compose(["experiment=fig8/paper", "method=acco", "layout=2x4", "launcher=slurm",
                                    "launcher.checkpoint_write_gb_s=0.25"]))  # fmt: skip
    assert slow.save_s > ckpt.save_s and slow.signal_delay_s > ckpt.signal_delay_s
    # set in the profile: used as it is; below the paper scale: the default
    assert signal_delay(compose([*cfg_args("fig8"), "launcher.signal_delay_s=600"])) == 600
    assert signal_delay(compose(["experiment=fig5/cpu", "method=acco", "launcher=slurm"])) == DEFAULT_SIGNAL_DELAY_S


def cfg_args(exp: str) -> list[str]:
    return [f"experiment={exp}/paper", "method=acco", "layout=2x4" if exp == "fig8" else "seed=0", "launcher=slurm"]


def test_time_limit_warnings():
    from acco.harness.run.plan import plan, time_limit_warnings

    fig7 = ["experiment=fig7/paper", "method=acco", "launcher=slurm"]
    hours = plan(compose(fig7))["wall_clock_h"]  # ~2.3 h on A100s
    assert time_limit_warnings(compose([*fig7, "launcher.time_min=240", "launcher.max_requeues=0"])) == []
    short = time_limit_warnings(compose([*fig7, "launcher.time_min=30", "launcher.max_requeues=1"]))
    (line,) = short
    assert (
        line.startswith("warning: fig7 run acco: ") and "launcher.time_min=30 x (launcher.max_requeues=1 + 1)" in line
    )
    need = int(-(-hours * 60 // 30)) - 1
    assert f"set launcher.max_requeues={need} or launcher.time_min={int(-(-hours * 60 // 2))}" in line
    # the signal delay set too short for fig8's ~80 GB checkpoint; a save longer than its timeout
    fig8 = compose([*cfg_args("fig8"), "launcher.signal_delay_s=90", "dist.checkpoint_timeout_s=10"])
    lines = time_limit_warnings(fig8)
    assert any("launcher.signal_delay_s=90 leaves too little time" in w for w in lines)
    assert any("exceeds dist.checkpoint_timeout_s=10" in w for w in lines)
    # nothing to warn about off Slurm or below the paper scale
    assert time_limit_warnings(compose([*fig7[:-1], "launcher=local"])) == []
    assert time_limit_warnings(compose(["experiment=fig5/cpu", "method=acco", "launcher=slurm_local"])) == []


def test_dry_run_says_checkpoints_signal_and_time_limit(capsys):
    from acco.harness.run.plan import dry_run

    lines: list[str] = []
    code = dry_run(
        ["fig7"], ["launcher=slurm", "launcher.time_min=30", "launcher.max_requeues=1"], "paper", lines.append
    )
    assert code == 0
    text = "\n".join(lines)
    header = next(line for line in lines if line.startswith("run "))
    assert {"ckpt-GB", "save-s", "signal-s"} <= set(header.split())
    assert "dist.checkpoint_timeout_s=1800" in text
    assert sum(line.startswith("warning: fig7 run ") for line in lines) == 2  # ddp and acco
    # an unknown launcher key: one line, exit 2 (was a Hydra traceback)
    assert dry_run(["fig8"], ["launcher.foo=1"], "paper", lines.append) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: unknown key 'launcher.foo'")


def test_make_sbatch_refuses_a_run_that_does_not_fit(tmp_path, capsys):
    code, out, err = make_sbatch_here(capsys, "fig8", "--scale", "paper", "launcher.gpu_mem_gb=38", "--out", tmp_path)
    assert code == 2 and not list(tmp_path.iterdir())
    (line,) = err.strip().splitlines()
    assert line.startswith("error: fig8 run ") and "exceeds the profile's gpu_mem_gb=38" in line


def test_make_sbatch_refuses_missing_data(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    code, out, err = make_sbatch_here(
        capsys, "fig8", "--scale", "paper", "data.source.path=/nonexistent/alpaca", "--out", tmp_path
    )
    assert code == 2 and not list(tmp_path.iterdir())
    (line,) = err.strip().splitlines()
    assert line.startswith("error: ") and "/nonexistent/alpaca" in line


@pytest.mark.integration
def test_make_sbatch_fig8_paper_with_a_cluster_profile(tmp_path, fig8_paper_data):
    """`make sbatch-fig8 SCALE=paper` with a profile's setup lines and extra options (the Makefile
    target passes ARGS on); the data stand-ins satisfy the data check."""
    args = [*CLUSTER, *fig8_paper_data["overrides"], "--out", str(tmp_path / "gen")]
    env = dict(os.environ, **fig8_paper_data["env"], ACCO_DISK_CHECK="0", GLOO_SOCKET_IFNAME="eth1")
    proc = subprocess.run(
        ["make", "-o", ".venv/.installed-stamp", "sbatch-fig8", "SCALE=paper", f"PYTHON={sys.executable}",
         f"ARGS={shlex.join(args)}"],  # fmt: skip
        cwd=ROOT, capture_output=True, text=True, timeout=600, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    scripts = sorted((tmp_path / "gen" / "fig8" / "paper").glob("*.sbatch"))
    assert len(scripts) == 6  # ddp, dpu, acco on 1x8 and 2x4
    for path in scripts:
        text = path.read_text()
        d = directives(text)
        assert "--exclusive" in d and d["--gres"] == "nvme:1" and int(d["--signal"].split("@")[1]) > 90
        assert "module load cuda/12.1" in text and "export NCCL_SOCKET_IFNAME=ib0" in text
