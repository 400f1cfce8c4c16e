"""A run's settings are typed once in the entry point (issues 33, 52): acco.harness.entry.precheck makes
the view once, past the checks of the values as written, and every later step reads and notes it
(the step timeout, _resume); a rank in the launching process (torchrun, srun, a submitit job) reads
that view with its link setting noted (link.runtime). That view is what typing the final plain
config would give, node for node (what a spawned worker makes on its side)."""

from __future__ import annotations

import copy

import pytest
from omegaconf import DictConfig, ListConfig, OmegaConf

from acco.config.experiments import compose
from acco.config.plain import plain
from acco.config.schema import noted, typed
from acco.engine.virtual_clock import is_virtual, unemulated_link
from acco.harness.entry import checked_run, named_and_checked, rank_view
from acco.harness.testbed.emulate import for_external_launcher

EXTERNAL = {"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "2"}
CASES = [
    ["method=acco", "world_size=2", "train.steps=3"],
    ["method=ddp", "world_size=2", "train.steps=3", "link.rate_mbit=100"],  # link.runtime: delays
    [
        "method=acco",
        "world_size=2",
        "train.steps=3",
        "clock.mode=virtual",
        "clock.micro_batch_s=0.1",
        "link.rate_mbit=100",
    ],
    ["method=dpu", "world_size=2", "train.steps=3", "resume=auto"],
]


def same_nodes(a, b, path: str = "") -> None:
    assert type(a) is type(b), (path, type(a), type(b))
    if isinstance(a, DictConfig):
        assert list(a.keys()) == list(b.keys()), path
        assert OmegaConf.get_type(a) == OmegaConf.get_type(b), path
        for key in a.keys():
            assert type(a._get_node(key)) is type(b._get_node(key)), f"{path}.{key}"
            same_nodes(a[key], b[key], f"{path}.{key}")
    elif isinstance(a, ListConfig):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            same_nodes(x, y, f"{path}[{i}]")
    else:
        assert a == b, (path, a, b)


@pytest.mark.parametrize("overrides", CASES, ids=lambda o: " ".join(o))
@pytest.mark.parametrize("resume", [None, {"dir": "/elsewhere/checkpoints/step_00000005", "step": 5}])
def test_a_rank_in_the_launching_process_reads_the_one_view(tmp_path, monkeypatch, overrides, resume):
    for key, value in {**EXTERNAL, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}.items():
        monkeypatch.setenv(key, value)
    overrides = [*overrides, f"out_dir={tmp_path / 'run'}", f"results_root={tmp_path}"]
    cfg = named_and_checked(compose(overrides), overrides)
    view, world = checked_run(cfg, external=True)
    assert world == 2 and OmegaConf.is_readonly(view)
    if resume is not None:  # as resolve_resume gives it for a run folder with a checkpoint
        noted(view, {"_resume": resume})
    cfg = plain(view)  # what the rank's link setup reads, as acco.harness.entry.run_this_rank
    cfg = unemulated_link(cfg) if is_virtual(cfg) else for_external_launcher(cfg)
    got = rank_view(view, cfg)
    assert got is view and OmegaConf.is_readonly(got)
    want = typed(copy.deepcopy(cfg))  # what the final plain config typed again would be
    assert OmegaConf.to_container(got, resolve=True) == OmegaConf.to_container(want, resolve=True)
    same_nodes(got, want)


@pytest.mark.parametrize(
    "budget",
    [["train.steps=7"], ["train.steps=null", "train.samples=320"], ["train.steps=9", "train.tokens=40960"]],
    ids=lambda o: " ".join(o),
)
def test_a_runs_length_is_read_alike_from_plain_data_and_from_the_view(budget):
    """acco.train.budget.run_length, the one reading of a run's length, gives the same from a plain
    train section (acco.Overlapped's, a config.yaml read back) and from the typed view."""
    from acco.train.budget import run_length

    plain_cfg = compose(["method=acco", "world_size=2", *budget])
    assert run_length(plain_cfg["train"], 128) == run_length(typed(plain_cfg).train, 128)
    assert run_length(plain_cfg["train"], 128).describe() != ""


def test_the_optimizer_and_fault_settings_are_read_once_from_the_view():
    """The backends and the reference take AdamW's numbers as one value read from the view (or
    acco.Overlapped's dict); the trainer reads cfg.fault once, not at every step."""
    import signal

    from acco.engine.sharded_adamw import AdamWSettings
    from acco.train.faults import FaultPlan

    overrides = ["method=acco", "world_size=2", "optim.betas=[0.8,0.9]", "optim.clip_norm=0.5"]
    view = typed(compose(overrides))
    adamw = AdamWSettings.of(view.optim)
    assert adamw == AdamWSettings.of(OmegaConf.to_container(view.optim))
    assert adamw.betas == (0.8, 0.9) and adamw.clip_norm == 0.5 and adamw.clips
    assert not AdamWSettings.of({**OmegaConf.to_container(view.optim), "clip_norm": 0.0}).clips

    view = typed(compose(["fault.signal_rank=1", "fault.at_step=3"]))
    plan = FaultPlan.of(view.fault)
    assert plan == FaultPlan(at_step=3, signal_rank=1, signal="SIGUSR1")
    got = []
    previous = signal.signal(signal.SIGUSR1, lambda signum, frame: got.append(signum))
    try:
        plan.inject(2, 1)  # another step: nothing
        plan.inject(3, 0)  # another rank: nothing
        assert got == []
        plan.inject(3, 1)
        assert got == [signal.SIGUSR1]
    finally:
        signal.signal(signal.SIGUSR1, previous)


def test_a_run_made_again_in_its_folder_keeps_none_of_the_old_runs_files(tmp_path):
    """A run made again with overwrite=true (or after a failure) starts from a folder without the
    earlier run's files, the slimmed trace's timing.json included: the report would read the old
    run's span times beside the new run's summary."""
    from acco.harness.entry import prepare_out_dir
    from acco.runtime.files import RUN_FILES

    out = tmp_path / "run"
    out.mkdir()
    for name in RUN_FILES:
        (out / name).write_text("{}")
    prepare_out_dir(str(out), {"out_dir": str(out), "method": {"name": "ddp"}})
    assert "timing.json" in RUN_FILES
    assert sorted(p.name for p in out.iterdir()) == ["config.yaml"]
