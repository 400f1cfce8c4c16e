"""The typed configuration (acco/config/schema.py): every config file fits the schema, Hydra rejects
a misspelt key in a config file at composition, the command line gets one-line messages for
unknown keys and wrong types (where OmegaConf alone would convert `yes` to true), and a run's
config can be read with attribute access.

Here the tests in-process; those that start processes (marked integration) are in
tests/integration/test_schema.py."""

from __future__ import annotations

import shutil

import pytest
from hydra import compose as hydra_compose
from hydra import initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.errors import ConfigCompositionException
from omegaconf.errors import ConfigKeyError, ReadonlyConfigError, ValidationError

from acco.config.experiments import CONF_DIR, compose, experiment_ids, scales_of
from acco.config.schema import GROUP_SCHEMAS, check_config, option_kind, register, typed
from acco.config.validate import ConfigError, check_overrides, group_options


def test_every_group_option_declares_its_kind():
    for group, kinds in GROUP_SCHEMAS.items():
        for option in group_options(CONF_DIR, group):
            assert option_kind(group, option) in kinds.values(), f"conf/{group}/{option}.yaml"


@pytest.mark.parametrize("group", sorted(GROUP_SCHEMAS))
def test_every_group_option_composes_and_fits(group):
    for option in group_options(CONF_DIR, group):
        cfg = compose([f"{group}={option}"])
        check_config(cfg)
        assert set(cfg[group]) == {k for k in cfg[group]}  # nothing but its own keys (no None fill-ins)
        assert set(cfg[group]) <= set(option_kind(group, option).__dataclass_fields__)


def test_every_experiment_composes_and_fits():
    seen = 0
    for exp in experiment_ids():
        for scale in scales_of(exp):
            for method in ("ddp", "dpu", "acco"):
                cfg = compose([f"experiment={exp}/{scale}", f"method={method}"])
                check_config(cfg)
                assert cfg["experiment"]["id"] == exp and cfg["scale"] == scale
                seen += 1
    assert seen >= 30


def test_a_group_option_adds_no_keys_of_other_options():
    """One schema per kind of option: acco gets no `impl` or `warmup_steps`, synthetic data no
    `max_len` (code reads `.get(key, default)` and `key in section`)."""
    cfg = compose(["method=acco"])
    assert cfg["method"] == {"name": "acco"}
    assert "max_len" not in cfg["data"] and "response_only_loss" not in cfg["data"]
    assert "partition" not in cfg["launcher"]


def test_misspelt_key_in_a_config_file_is_caught_at_composition(tmp_path):
    conf = tmp_path / "conf"
    shutil.copytree(CONF_DIR, conf)
    with open(conf / "method" / "dpu.yaml", "a") as f:
        f.write("warmup_stepz: 3\n")
    with open(conf / "experiment" / "fig5" / "cpu.yaml", "a") as f:
        f.write("dist: {step_timeout_z: 5}\n")
    register()
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(conf), version_base="1.3"):
            hydra_compose(config_name="config", overrides=["method=acco"])  # untouched files: fine
            with pytest.raises((ConfigCompositionException, ConfigKeyError), match="warmup_stepz"):
                hydra_compose(config_name="config", overrides=["method=dpu"])
            with pytest.raises((ConfigCompositionException, ConfigKeyError), match="step_timeout_z"):
                hydra_compose(config_name="config", overrides=["experiment=fig5/cpu"])
    finally:
        GlobalHydra.instance().clear()


def test_wrong_type_in_a_config_file_is_caught_at_composition(tmp_path):
    conf = tmp_path / "conf"
    shutil.copytree(CONF_DIR, conf)
    with open(conf / "model" / "gptneo_tiny.yaml", "a") as f:
        f.write("pretrained_from: {experiment: fig7, scale: cpu, overrides: method=ddp, extra: 1}\n")
    register()
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(conf), version_base="1.3"):
            with pytest.raises((ConfigCompositionException, ConfigKeyError, ValidationError)):
                hydra_compose(config_name="config", overrides=[])
    finally:
        GlobalHydra.instance().clear()


CLI_CASES = [
    (["train.stepz=5"], "unknown key 'train.stepz' (train.stepz=5): did you mean train.steps?"),
    (["data.seq_lenn=64"], "did you mean data.seq_len?"),
    (["launcher.partion=gpu", "launcher=slurm"], "did you mean launcher.partition?"),
    (["logger=wandb", "logger.projet=x"], "did you mean logger.project?"),
    (["+model.pretrained_from.x=1"], "model.pretrained_from has experiment, scale, overrides"),
    # a key of another option's kind
    (["method.warmup_steps=3"], "method.warmup_steps is not a setting of method=acco"),
    (["method=ddp", "method.warmup_steps=3"], "it belongs to method=dpu and method=wp"),
    (["data=alpaca", "data.seq_len=64"], "data.seq_len is not a setting of data=alpaca"),
    # OmegaConf would convert these silently
    (["overwrite=yes"], "overwrite must be true or false, got 'yes'"),
    (["train.save_model=1"], "train.save_model must be true or false, got 1"),
    (["resume=3"], "resume must be auto or a checkpoint/run folder, got 3"),
    (["data.tokenizer=bpe"], "data.tokenizer must be a section"),
    (["train.accum=null"], "train.accum must be an integer, got None"),
    (["-m", "method=dpu", "method.warmup_steps=0,4,x"], "method.warmup_steps must be an integer, got 'x'"),
    (["optim.betas=[0.9,high]"], "optim.betas[1] must be a number, got 'high'"),
]


@pytest.mark.parametrize("args,message", CLI_CASES, ids=[" ".join(a) for a, _ in CLI_CASES])
def test_command_line_against_the_schema(args, message):
    with pytest.raises(ConfigError) as err:
        check_overrides(args, CONF_DIR)
    text = str(err.value)
    assert message in text and "\n" not in text, text


def test_good_command_lines_pass():
    for args in (
        ["method=dpu", "method.warmup_steps=4"],
        ["method=ddp", "method.impl=flat"],
        ["-m", "method=dpu", "method.warmup_steps=0,4,30"],
        ["train.steps=null", "train.samples=100"],
        ["optim.lr=1"],
        ["train.threads=4"],
        ["train.threads=auto"],
        ["+model.config.rope_theta=10000"],
        ["data.source.num_stories=100"],
        ["experiment=fig5/cpu", "data.seq_len=64"],
        ["task=tests.helpers.oracle:build_oracle_task", "+oracle.busy_ms=20"],
        ["train.trace_steps=[1,2]"],
    ):
        check_overrides(args, CONF_DIR)


def test_whole_config_against_the_schema():
    cfg = compose(["method=dpu"])
    check_config(cfg)
    bad = dict(cfg, train=dict(cfg["train"], acum=2))
    with pytest.raises(ConfigError, match=r"unknown key 'train.acum'.*did you mean train.accum\?"):
        check_config(bad)
    with pytest.raises(ConfigError, match="method.impl"):
        check_config(dict(cfg, method=dict(cfg["method"], impl="flat")))  # dpu has no impl
    with pytest.raises(ConfigError, match="train.deterministic must be true or false"):
        check_config(dict(cfg, train=dict(cfg["train"], deterministic="no")))
    with pytest.raises(ConfigError, match="seed has no value"):
        check_config(dict(cfg, seed="???"))
    with pytest.raises(ConfigError, match="unknown key 'oracle'"):
        check_config(dict(cfg, oracle={"busy_ms": 1}))
    check_config(dict(cfg, oracle={"busy_ms": 1}), allow_extra_top_level=True)  # a task of one's own


def test_typed_view_reads_by_attribute_and_by_item():
    cfg = compose(["method=dpu", "train.accum=3"])
    view = typed(cfg)
    assert view.train.accum == 3 and view["train"]["accum"] == 3
    assert view.method.warmup_steps == 0 and view.model.config.hidden_size == cfg["model"]["config"]["hidden_size"]
    with pytest.raises(ReadonlyConfigError):
        view.train.accum = 4
    assert cfg["train"]["accum"] == 3  # the plain dict is the config
