"""The flat ZeRO-1 sequential sync gives the same parameters as PyTorch's DDP +
ZeroRedundancyOptimizer, and as single-process AdamW on the concatenated batch."""

from __future__ import annotations

import os

import pytest
import torch

from acco.engine.schedule import make_lr_schedule
from acco.engine.torch_ddp import adamw_param_groups
from acco.tasks import load_task_factory

from .conftest import SMALL_LM, load_run, run_train

pytestmark = pytest.mark.integration  # every test here starts processes


def test_flat_zero1_equals_torch_ddp_zero_and_single_process_adamw(tmp_path):
    world, steps, accum = 2, 10, 2
    finals = {}
    for impl in ("torch", "flat"):
        out = str(tmp_path / impl)
        run_train(
            [
                "method=ddp",
                f"method.impl={impl}",
                *SMALL_LM,
                f"world_size={world}",
                f"train.steps={steps}",
                f"train.accum={accum}",
                "train.deterministic=true",
                "train.save_final_params=true",
                f"out_dir={out}",
            ]
        )
        finals[impl] = torch.load(os.path.join(out, "final_params.pt"))
        cfg = load_run(out)["cfg"]
    torch.testing.assert_close(finals["flat"], finals["torch"], rtol=1e-5, atol=1e-6)

    # single process, one forward per step on the concatenation of every worker's micro-batches
    factory = load_task_factory(cfg["task"])
    tasks = [factory(cfg, r, world, torch.device("cpu")) for r in range(world)]
    model, loss_fn = tasks[0].model, tasks[0].loss_fn
    optim = cfg["optim"]
    lr_at = make_lr_schedule(optim["lr"], optim["schedule"], optim["warmup_steps"], steps)
    opt = torch.optim.AdamW(
        adamw_param_groups(model, optim["weight_decay"], optim["decay_bias_and_norm"]),
        lr=lr_at(0),
        betas=tuple(optim["betas"]),
        eps=optim["eps"],
    )
    for t in range(steps):
        batch = torch.cat([tasks[r].train_stream.batch(t * accum + i) for r in range(world) for i in range(accum)])
        opt.zero_grad()
        loss_fn(model, batch).backward()
        for group in opt.param_groups:
            group["lr"] = lr_at(t)
        opt.step()
    single = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    torch.testing.assert_close(finals["torch"], single, rtol=1e-4, atol=2e-6)
