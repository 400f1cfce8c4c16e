"""Every config value checked up front: a table of bad configs, each with the one-line message that
names the problem and the fix. The table runs through the same compose + validate as the entry
point (in process: fast); a few go through experiments/train.py to check exit code 2, one line,
nothing written (tests/integration/test_bad_input.py does the same for its cases).

Here the tests in-process; those that start processes (marked integration) are in
tests/integration/test_validation.py."""

from __future__ import annotations

import os

import pytest

from acco.config.experiments import CONF_DIR, compose
from acco.config.validate import ConfigError, check_overrides
from acco.harness.run.validate import validate
from tests.helpers.paths import ROOT

CASES = [
    # types
    (["train.steps=5.5"], "train.steps must be an integer"),
    (["train.precision=fp16"], "train.precision must be one of auto, bf16, fp32"),
    (["train.activation_checkpointing=2"], "train.activation_checkpointing must be true or false"),
    (["train.samples=1.5e3"], "train.samples must be an integer"),
    (["overwrite=yes"], "overwrite must be true or false"),
    (["train.trace=maybe"], "train.trace must be true or false"),
    (["optim.betas=[0.9]"], "optim.betas must be a pair"),
    (["resume=3"], "resume must be auto or a checkpoint/run folder"),
    # ranges
    (["train.threads=0"], "train.threads must be >= 1"),
    (["train.log_every=-1"], "train.log_every must be >= 0"),
    (["train.checkpoint_every=-1"], "train.checkpoint_every must be >= 0"),
    (["train.keep_checkpoints=0"], "train.keep_checkpoints must be >= 1"),
    (["train.max_accum_factor=0"], "train.max_accum_factor must be >= 1"),
    (["data.val_fraction=1.5"], "data.val_fraction must be below 1"),
    (["data.micro_batch_size=0"], "data.micro_batch_size must be >= 1"),
    (["data.source.num_stories=0"], "data.source.num_stories must be >= 1"),
    (["optim.min_lr_ratio=2"], "optim.min_lr_ratio must be <= 1"),
    (["optim.eps=0"], "optim.eps must be > 0"),
    (["optim.betas=[0.9,1.5]"], "optim.betas[1] must be <= 0.999999"),
    (["dist.timeout_s=0"], "dist.timeout_s must be > 0"),
    (["dist.step_timeout_s=-5"], "dist.step_timeout_s must be > 0"),
    (["dist.start_method=thread"], "dist.start_method must be one of auto, fork, spawn, forkserver"),
    (["model.config.num_layers=0"], "model.config.num_layers must be >= 1"),
    # cross-field
    (["layout=2x2", "world_size=3"], "layout=2x2 makes 4 workers but world_size=3"),
    (["layout=2by2"], "layout must look like NODESxGPUS"),
    (["world_size=2", "hetero.slow_rank=3", "hetero.factor=2"], "hetero.slow_rank=3 but there are only 2 ranks"),
    (["model.config.hidden_size=65"], "hidden_size=65 is not divisible by model.config.num_heads=4"),
    (["model=llama_tiny", "model.config.hidden_size=130"], "not divisible by model.config.num_attention_heads=4"),
    (["data.seq_len=4096"], "exceeds the model's max_position_embeddings"),
    (["world_size=2", "fault.kill_rank=2", "fault.at_step=1"], "fault.kill_rank=2 but there are only 2 ranks"),
    (["fault.hang_rank=0"], "fault.hang_rank needs fault.at_step between 1 and train.steps=100"),
    (["fault.kill_rank=0", "fault.at_step=101"], "fault.kill_rank needs fault.at_step between 1 and train.steps=100"),
    (
        ["fault.signal_rank=0", "fault.at_step=2", "fault.signal=SIGHUP"],
        "fault.signal must be SIGUSR1, SIGUSR2 or SIGTERM",
    ),
    (["fault.nan_at_step=200"], "fault.nan_at_step=200 is past train.steps=100"),
    (["method=dpu", "method.warmup_steps=-1"], "method.warmup_steps must be >= 0"),
    (["method=ddp", "method.impl=jax"], "method.impl must be torch or flat"),
    (["method=ddp", "method.bucket_mb=0"], "method.bucket_mb must be > 0"),
    (["method=ddp", "method.overlap_backward=2"], "method.overlap_backward must be true or false"),
    (["clock.backward_share=1.5"], "clock.backward_share must be <= 1"),
    # budgets
    (["train.samples=0"], "train.samples must be >= 1"),
    (["train.tokens=1000", "train.samples=10"], "train.tokens=1000 and train.samples=10 are both set"),
    (["train.steps=null"], "train.steps is null and there is no budget"),
    (["data=synthetic_instruct", "train.tokens=1000"], "train.tokens=1000 needs packed pretraining data"),
]

KEY_CASES = [  # caught before Hydra composes anything
    (["train.stepz=5"], "unknown key 'train.stepz'"),
    (["+train.stepz=5"], "unknown key 'train.stepz'"),
    (["+optim.momentum=0.9"], "unknown key 'optim.momentum'"),
    (["+fault.kill=1"], "unknown key 'fault.kill'"),
    (["+foo=1"], "unknown key 'foo'"),
    (["train.bf16=true"], "train.bf16 was replaced by train.precision"),
    (["method=foo"], "unknown method 'foo'"),
    # the plugin route to Slurm that is gone (acco's sweep launcher takes launcher=slurm instead)
    (["-m", "hydra/launcher=submitit_slurm"], "a sweep goes to Slurm with launcher=slurm"),
]


@pytest.mark.parametrize("args,message", CASES, ids=[" ".join(a) for a, _ in CASES])
def test_bad_value(args, message, tmp_path):
    """As the entry point: the command line against the schema, then compose, then validate."""
    with pytest.raises(ConfigError) as err:
        check_overrides(args, CONF_DIR)
        cfg = compose(args)
        cfg["out_dir"] = str(tmp_path / "run")
        validate(cfg)
    text = str(err.value)
    assert message in text and "\n" not in text, text
    assert ";" in text or "e.g." in text  # names the problem, then what to set instead


@pytest.mark.parametrize("args,message", KEY_CASES, ids=[" ".join(a) for a, _ in KEY_CASES])
def test_unknown_key(args, message):
    with pytest.raises(ConfigError) as err:
        check_overrides(args, CONF_DIR)
    text = str(err.value)
    assert message in text and (
        "check the spelling" in text or "choose one of" in text or "use train.precision=" in text
    ), text


def test_good_config_passes(tmp_path):
    cfg = compose(
        [
            "world_size=2",
            "fault.kill_rank=1",
            "fault.at_step=3",
            "train.checkpoint_every=5",
            "model=llama_tiny",
            "experiment=fig5/cpu",
        ]
    )
    cfg["out_dir"] = str(tmp_path / "run")
    assert validate(cfg) == 2
    # model.config is a Hugging Face config: open-ended
    check_overrides(
        ["experiment=fig5/cpu", "train.steps=3", "hydra.job.chdir=false", "+model.config.rope_theta=1"], CONF_DIR
    )
    # a task of one's own may read a config section of its own
    check_overrides(["task=tests.helpers.oracle:build_oracle_task", "+oracle.busy_ms=20"], CONF_DIR)


def test_paper_run_submitted_to_slurm_from_a_machine_without_gpus(tmp_path):
    """A login node has no GPU: a device=cuda run submitted to Slurm passes (its GPUs are on the
    compute nodes); started here with the local launcher it is refused."""
    cfg = compose(["experiment=fig7/paper", "launcher=slurm"])
    cfg["out_dir"] = str(tmp_path / "run")
    assert cfg["device"] == "cuda" and validate(cfg, cuda_available=False) == 32
    with pytest.raises(ConfigError, match="trains on 32 GPUs and no GPU is visible here"):
        validate(dict(cfg, launcher={"name": "local"}), cuda_available=False)
    # inside the job (srun: the launcher's ranks) the GPU must be there
    with pytest.raises(ConfigError, match="device=cuda but no CUDA GPU is visible here"):
        validate(cfg, launcher_world_size=32, cuda_available=False)


def test_more_ranks_than_gpus_is_refused_up_front(tmp_path, monkeypatch):
    """Issue 30 point 5: two ranks on one GPU make NCCL fail or hang, so a node's ranks beyond its
    GPUs are refused by validation (before any worker starts), not folded onto GPU local_rank %
    count. The GPU count is passed in: this machine need not have any."""
    for name in (
        "RANK",
        "WORLD_SIZE",
        "MASTER_ADDR",
        "LOCAL_WORLD_SIZE",
        "SLURM_STEP_GPUS",
        "SLURM_JOB_GPUS",
        "SLURM_GPUS_PER_TASK",
    ):
        monkeypatch.delenv(name, raising=False)
    cfg = compose(["world_size=4", "device=cuda"])
    cfg["out_dir"] = str(tmp_path / "run")
    # the local launcher: all 4 ranks on this machine
    with pytest.raises(ConfigError, match="4 ranks on this node but 2 GPU"):
        validate(cfg, cuda_available=True, gpus_here=2)
    assert validate(cfg, cuda_available=True, gpus_here=4) == 4
    assert validate(dict(cfg, device="auto"), cuda_available=True, gpus_here=8) == 4
    with pytest.raises(ConfigError, match="run at most 2 ranks per node"):
        validate(dict(cfg, device="auto"), cuda_available=True, gpus_here=2)  # auto takes the GPUs
    assert validate(dict(cfg, device="cpu"), cuda_available=True, gpus_here=1) == 4  # no GPU used
    assert validate(cfg, cuda_available=True, gpus_here=0) == 4  # no count known: the caller sizes a GPU run
    # torchrun/srun: this node holds LOCAL_WORLD_SIZE of the 8 ranks
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "8")
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "4")
    ext = dict(cfg, world_size=None)
    assert validate(ext, launcher_world_size=8, cuda_available=True, gpus_here=4) == 8
    with pytest.raises(ConfigError, match="4 ranks on this node but 3 GPU"):
        validate(ext, launcher_world_size=8, cuda_available=True, gpus_here=3)
    # Slurm bound one of the node's 4 GPUs to each task (--gpus-per-task=1): each sees its own
    monkeypatch.setenv("SLURM_STEP_GPUS", "0,1,2,3")
    assert validate(ext, launcher_world_size=8, cuda_available=True, gpus_here=1) == 8
    monkeypatch.setenv("SLURM_STEP_GPUS", "0,1")  # only 2 GPUs for 4 tasks: still two per GPU
    with pytest.raises(ConfigError, match="4 ranks on this node but 1 GPU"):
        validate(ext, launcher_world_size=8, cuda_available=True, gpus_here=1)
    monkeypatch.setenv("SLURM_GPUS_PER_TASK", "1")  # srun --gpus-per-task=1: each task its own
    assert validate(ext, launcher_world_size=8, cuda_available=True, gpus_here=1) == 8


def test_pick_device_gives_each_rank_its_own_gpu(monkeypatch):
    """The worker's last guard (validation comes first): no rank folded onto another's GPU."""
    import torch

    from acco.harness.launch import pick_device

    for name in ("SLURM_STEP_GPUS", "SLURM_JOB_GPUS", "SLURM_GPUS_PER_TASK"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert pick_device("cuda", 1, 2) == torch.device("cuda", 1)
    with pytest.raises(RuntimeError, match="3 ranks on this node but 2 GPU"):
        pick_device("cuda", 2, 3)
    assert pick_device("cpu", 5, 8) == torch.device("cpu")
    monkeypatch.setenv("SLURM_GPUS_PER_TASK", "1")  # each task sees only the GPU bound to it
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert pick_device("cuda", 3, 4) == torch.device("cuda", 0)


def test_launch_reads_the_environment_as_it_is_when_called(monkeypatch):
    """datasets' map(num_proc=...) rebinds os.environ to a copy (seen: a CI run's pick_device then
    missed SLURM_GPUS_PER_TASK set after it): acco.harness.launch reads os.environ at the call."""
    import copy

    from acco.harness import launch

    monkeypatch.setattr(os, "environ", copy.deepcopy(os.environ))  # what datasets does
    monkeypatch.setenv("SLURM_GPUS_PER_TASK", "1")
    assert launch.gpu_shortage(4, 1) is None
    monkeypatch.setenv("SLURM_JOB_ID", "12769")
    assert launch.slurm_master_port() == 20001
    for name in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "LOCAL_RANK", "LOCAL_WORLD_SIZE"):
        monkeypatch.setenv(name, {"RANK": "1", "WORLD_SIZE": "2", "MASTER_ADDR": "n1"}.get(name, "1"))
    env = launch.external_env()
    assert env is not None and (env.rank, env.world_size) == (1, 2)


def test_an_unknown_key_in_an_option_file_is_one_line(tmp_path):
    """A cluster profile of one's own with a typo (conf/launcher/<name>.yaml, inheriting slurm.yaml)
    is one line naming the file and the key, not Hydra's composition error; every shipped option
    file passes."""
    import shutil

    from acco.config.schema import GROUP_SCHEMAS
    from acco.config.validate import check_option_file, check_overrides, group_options

    conf = tmp_path / "conf"
    shutil.copytree(os.path.join(ROOT, "conf"), conf)
    for group in GROUP_SCHEMAS:
        for option in group_options(str(conf), group):
            check_option_file(str(conf), group, option)
    (conf / "launcher" / "mycluster.yaml").write_text(
        "defaults:\n  - slurm\n  - _self_\nprofile: mycluster\npartition: gpu\ncolour: blue\n"
    )
    with pytest.raises(ConfigError, match=r"^conf/launcher/mycluster.yaml: unknown key 'colour'; .*partition"):
        check_overrides(["method=acco", "launcher=mycluster"], str(conf))
