"""The flat ZeRO-1 sequential sync gives the same parameters as PyTorch's DDP +
ZeroRedundancyOptimizer, and as single-process AdamW on the concatenated batch."""

from __future__ import annotations

import csv
import json
import os

import pytest
import torch

from acco.config.schema import typed
from acco.engine.schedule import make_lr_schedule
from acco.engine.torch_ddp import adamw_param_groups
from acco.engine.trace import load_spans
from acco.tasks import load_task_factory
from tests.helpers.rounding import rounding_mismatch
from tests.helpers.runs import SMALL_LM, load_run, run_train

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
    tasks = [factory(typed(cfg), r, world, torch.device("cpu")) for r in range(world)]  # as a worker reads it
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


def _ddp_run(out, world: int, hook: str, extra=()):
    run_train(
        [
            "method=ddp",
            "method.impl=torch",
            f"method.comm_hook={hook}",
            *SMALL_LM,
            f"world_size={world}",
            "train.steps=4",
            "train.accum=2",
            "train.deterministic=true",
            "train.save_final_params=true",
            "train.trace=true",
            f"out_dir={out}",
            *extra,
        ]
    )
    with open(os.path.join(out, "metrics.csv")) as f:
        metrics = list(csv.DictReader(f))
    return metrics, torch.load(os.path.join(out, "final_params.pt"))


def test_reduce_scatter_comm_hook_gives_pytorchs_average(tmp_path):
    """The baseline's minimal-bytes hook (reduce-scatter + all-gather of each bucket) averages the
    gradient as PyTorch's all-reduce does: bit-identical on 2 ranks (the same additions, divided by
    the world size first), equal up to rounding on 3 (a different summation order, see
    rounding_mismatch; the bucket does not divide by 3, so the padding is exercised). On a delay-mode
    link both of its collectives are charged (the all-reduce of the bucket would be charged once, for
    twice the bytes)."""
    for world, exact in ((2, True), (3, False)):
        base_m, base_p = _ddp_run(str(tmp_path / f"allreduce{world}"), world, "allreduce")
        rs_m, rs_p = _ddp_run(
            str(tmp_path / f"rs{world}"), world, "reduce_scatter", ["link.mode=delay", "link.rate_mbit=200"]
        )
        assert [r["step"] for r in rs_m] == [r["step"] for r in base_m]
        losses = [float(r["train_loss"]) for r in base_m], [float(r["train_loss"]) for r in rs_m]
        if exact:
            assert losses[0] == losses[1]
            assert torch.equal(base_p, rs_p)
        else:
            torch.testing.assert_close(losses[1], losses[0], rtol=1e-6, atol=0)
            mismatch = rounding_mismatch(rs_p, base_p, rtol=1e-5, atol=1e-7)
            assert mismatch is None, mismatch
        with open(tmp_path / f"rs{world}" / "summary.json") as f:
            summary = json.load(f)
        param_bytes = summary["per_rank"][0]["param_bytes"]
        hooked = load_spans(str(tmp_path / f"rs{world}" / "trace.json"), cat="communication")
        synced = [e["dur"] / 1e6 for e in hooked if e["name"].startswith("bwd + all_reduce")]
        assert synced, "the hooked backward is in the trace"
        # reduce-scatter and all-gather each charged (N-1)/N of the bucket at 200 Mbit/s
        assert min(synced) >= 0.9 * 2 * (world - 1) / world * param_bytes / (200e6 / 8)


class _Bucket:
    """What a DDP comm hook reads of a gradient bucket."""

    def __init__(self, buf: torch.Tensor):
        self._buf = buf

    def buffer(self) -> torch.Tensor:
        return self._buf

    def index(self) -> int:
        return 0


def _bf16_hook_worker(rank: int, world: int, port: int, results) -> None:
    import torch.distributed as dist

    from acco.engine.torch_ddp import reduce_scatter_hook

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    grads = [torch.randn(7, generator=torch.Generator().manual_seed(r)) for r in range(world)]
    buf = grads[rank].clone()
    reduce_scatter_hook(world, torch.bfloat16)(dist.group.WORLD, _Bucket(buf))
    # each bucket cast to bf16, divided by the world size and summed in bf16, as PyTorch's
    # bf16_compress_hook does (2 ranks: one bf16 addition, the same in either order)
    expected = (grads[0].bfloat16() / world + grads[1].bfloat16() / world).float()
    results[rank] = torch.equal(buf, expected) and not torch.equal(buf, sum(grads) / world)
    dist.destroy_process_group()


@pytest.mark.integration
def test_bf16_reduce_scatter_hook_sends_bf16():
    """method.comm_hook=reduce_scatter_bf16 (the bench's baseline: the gradient bytes ACCO sends) sums
    the bucket in bf16, padding included (7 entries on 2 ranks)."""
    import torch.multiprocessing as mp

    from acco.harness.launch import free_port

    results = mp.get_context("spawn").Manager().dict()
    mp.start_processes(_bf16_hook_worker, args=(2, free_port(), results), nprocs=2, start_method="spawn")
    assert dict(results) == {0: True, 1: True}


def test_unknown_comm_hook_is_refused_before_workers_start(tmp_path):
    proc = run_train(
        ["method=ddp", "method.impl=torch", "method.comm_hook=ring", *SMALL_LM, f"out_dir={tmp_path / 'r'}"],
        expect=2,
    )
    assert "method.comm_hook must be one of allreduce, reduce_scatter, reduce_scatter_bf16" in proc.stderr


def test_pytorch_ddps_buckets_and_its_last_backward_are_traced(tmp_path):
    """PyTorch's DDP with buckets of 0.05 MiB (method.bucket_mb, its bucket_cap_mb), traced: from its
    second step (DDP rebuilds its buckets after the first) several bucket all-reduces per step, from
    DDP's call of the hook to the future's completion, and the backward up to its last gradient;
    acco.engine.trace.backward_overlap reads how much of the reduction that backward hid."""
    from acco.engine.trace import backward_overlap

    out = str(tmp_path / "run")
    run_train(
        ["method=ddp", "method.impl=torch", "method.bucket_mb=0.05", *SMALL_LM, "world_size=2"]
        + ["train.steps=4", "train.accum=2", "train.deterministic=true", f"out_dir={out}"]
    )
    path = os.path.join(out, "trace.json")
    buckets = [e for e in load_spans(path) if e.get("cat") == "ddp_bucket"]
    backward = [e for e in load_spans(path) if e.get("cat") == "ddp_backward"]
    assert len(backward) == 2 * 4  # every rank's last backward of every step
    for rank in range(2):
        for step in range(2, 5):
            mine = [e for e in buckets if e["pid"] == rank and e["args"]["step"] == step]
            assert len(mine) > 2 and all(e["name"].startswith("all_reduce (bucket") for e in mine), (rank, step)
    rows = [r for r in backward_overlap(path) if r["step"] > 1]
    assert len(rows) == 2 * 3 and all(r["reduce_s"] > 0 and 0.0 <= r["hidden_fraction"] <= 1.0 for r in rows)
