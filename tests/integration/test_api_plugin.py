"""A method defined outside acco trains through the library API, acco.Overlapped (acco/api.py), as
through the trainer: each plugin of tests/plugins/ at world size 2 over gloo, deterministic, ends on
the parameters of its own reference update (acco.train.reference, the rule its spec names) and logs
its losses, and another rule on the same model and data misses them. The trainer's runs of the same
plugins: tests/integration/test_method_plugin.py."""

from __future__ import annotations

import importlib

import pytest
import torch
from torch import nn

from acco import methods
from tests.helpers.rounding import rounding_mismatch

pytestmark = pytest.mark.integration  # the ranks are processes

STEPS, ACCUM, LR, WORLD = 6, 2, 2e-3, 2
# plugin module: (the options Overlapped gets, another update rule the run must miss, that rule's options)
PLUGINS = {
    # sync_every=4: an average after step 4 and after the last; every step's ddp update differs
    "tests.plugins.local_sgd": ({"sync_every": 4}, "sequential", {}),
    # 3 sequential steps, then delayed ones; the same schedule after 1 sequential step differs
    "tests.plugins.ddp_then_dpu": ({"ddp_steps": 3}, "tests.plugins.ddp_then_dpu:ddp_then_delayed", {"ddp_steps": 1}),
}


def small_model() -> nn.Module:
    torch.manual_seed(0)  # 8*16 + 16 + 16 + 1 = 161 entries: the shards are padded on 2 ranks
    return nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1))


class Stream:
    """One worker's micro-batches: the k-th a pure function of (worker, k), for the run and the reference."""

    def __init__(self, worker: int):
        self.worker = worker

    def batch(self, k: int):
        x = torch.randn(4, 8, generator=torch.Generator().manual_seed(1000 * self.worker + k))
        return x, x.sum(dim=1, keepdim=True).sin()


def mse(model: nn.Module, batch) -> torch.Tensor:
    x, y = batch
    return nn.functional.mse_loss(model(x), y)


def _rank(rank: int, port: int, out: str) -> None:
    import torch.distributed as dist

    import acco

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=WORLD)
    runs = {}
    for module, (options, _, _) in PLUGINS.items():
        name = methods.register(importlib.import_module(module).SPEC).name  # a spawned process: its own registry
        kw = {"steps": STEPS, "accum": ACCUM, "deterministic": True, "optimizer": {"lr": LR}, **options}
        with acco.Overlapped(small_model(), mse, Stream(rank), method=name, **kw) as trainer:
            losses = [trainer.step().loss_mean for _ in range(STEPS)]
            runs[module] = (losses, trainer.committed_vector())
    if rank == 0:
        torch.save(runs, out)
    dist.destroy_process_group()


@pytest.fixture(scope="module")
def api_runs(tmp_path_factory) -> dict:
    import torch.multiprocessing as mp

    from acco.harness.launch import free_port

    out = str(tmp_path_factory.mktemp("api_plugin") / "runs.pt")
    mp.start_processes(_rank, args=(free_port(), out), nprocs=WORLD, start_method="spawn")
    return torch.load(out, weights_only=False)


def reference(rule: str, options: dict):
    """The single-process reference of `rule` on the API run's model, data and optimizer."""
    from acco.api import optimizer_defaults
    from acco.engine.schedule import make_lr_schedule, per_step
    from acco.engine.sharded_adamw import AdamWSettings
    from acco.train.reference import Reference

    opt = {**optimizer_defaults(), "lr": LR}
    lr_at = per_step(make_lr_schedule(LR, opt["schedule"], opt["warmup_steps"], STEPS, opt["min_lr_ratio"]))
    a = AdamWSettings.of(opt)
    streams = [Stream(w) for w in range(WORLD)]
    ref = Reference(
        small_model(), mse, streams, ACCUM, lr_at, a.betas, a.eps, a.weight_decay, a.decay_bias_and_norm, a.clip_norm
    )
    ref.run(rule, STEPS, options)
    return ref


@pytest.mark.parametrize("module", list(PLUGINS))
def test_a_plugin_method_through_the_api_equals_its_reference(api_runs, module):
    from acco.api import method_defaults

    spec = importlib.import_module(module).SPEC
    options, other_rule, other_options = PLUGINS[module]
    methods.register(spec)
    try:
        settings = {**method_defaults(spec.name), **options}  # as the run's Overlapped took them
    finally:
        methods.METHODS.pop(spec.name, None)
    losses, final = api_runs[module]
    ref = reference(spec.reference, settings)
    assert len(ref.history) == STEPS + 1
    mismatch = rounding_mismatch(final, ref.history[-1])
    assert mismatch is None, mismatch
    assert losses == pytest.approx(ref.losses, rel=1e-4)
    # agreeing with its own rule means something: another update on the same run misses it
    assert rounding_mismatch(final, reference(other_rule, {**settings, **other_options}).history[-1]) is not None
