"""Engine memory and precision (issue 11, defects 4 and 5).

Memory: the flat buffers are built one parameter at a time and nothing model-sized in fp32 outlives
(or, beyond the model itself, accompanies) their construction: the optimizer holds only this
rank's fp32 shard, weight decay is index ranges, and peak memory is measured from the start of
training, not start-up.

Precision: with train.precision=bf16 (testable on CPU) every method runs its forward under bf16
autocast and evaluates alike, so the torch DDP baseline (fp32 parameters) and the flat path (bf16
parameters, fp32 master shard) see the same initial evaluation exactly and train along the same
curve up to bf16 storage round-off. train.activation_checkpointing recomputes activations and
changes nothing numerically in fp32."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from acco.engine.flat import FlatModel
from acco.engine.sharded_adamw import ShardedAdamW
from tests.helpers.paths import ROOT
from tests.helpers.runs import SMALL_LM, load_run, run_train

MB = 2**20


def _vm_hwm() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM:"))


def _can_reset_hwm() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        _vm_hwm()
        return True
    except (OSError, StopIteration):
        return False


needs_hwm = pytest.mark.skipif(not _can_reset_hwm(), reason="needs Linux /proc/self/clear_refs and VmHWM")


# -- memory ---------------------------------------------------------------------------------------
def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(40, 30), torch.nn.LayerNorm(30), torch.nn.Linear(30, 50), torch.nn.Linear(50, 7)
    )


def test_only_this_ranks_shard_is_kept_in_fp32_and_decay_is_ranges():
    """No full-size fp32 buffer survives construction: the optimizer's master and moments own
    shard-sized storage, the decay rule is index ranges, and the parameters are bf16 views."""
    world, rank = 4, 1
    reference = _model()
    expected = torch.cat([p.detach().reshape(-1) for p in reference.parameters()])
    model = _model()
    flat = FlatModel(model, world, dtype=torch.bfloat16, decay_bias_and_norm=False, rank=rank)
    shard, padded = flat.layout.shard_size, flat.layout.padded
    lo, hi = flat.layout.bounds(rank)
    opt = ShardedAdamW(flat.take_master_shard(), flat.decay_ranges, lambda step, mb: 1e-3, weight_decay=0.1)
    # the master starts from the fp32 initial values of exactly this rank's shard
    assert torch.equal(opt.master, expected[lo:hi])
    for t in (opt.master, opt.exp_avg, opt.exp_avg_sq):
        assert t.dtype == torch.float32 and t.untyped_storage().nbytes() == 4 * shard
    # every tensor the flat model and the optimizer hold: fp32 ones are at most shard-sized
    held = [v for obj in (flat, opt) for v in vars(obj).values() if torch.is_tensor(v)]
    held += [
        v
        for obj in (flat, opt)
        for lst in vars(obj).values()
        if isinstance(lst, list)
        for v in lst
        if torch.is_tensor(v)
    ]
    for t in held:
        if t.dtype == torch.float32:
            assert t.untyped_storage().nbytes() <= 4 * shard, (t.shape, t.untyped_storage().nbytes())
    # the parameters are views into the one bf16 buffer (the fp32 originals are gone)
    for p in model.parameters():
        assert p.dtype == torch.bfloat16 and p.untyped_storage().data_ptr() == flat.params.untyped_storage().data_ptr()
    assert flat.params.untyped_storage().nbytes() == 2 * padded
    # decay: the three weight matrices' entries in [lo, hi), as ranges (no mask anywhere)
    decayed = torch.zeros(padded, dtype=torch.bool)
    for (a, b), (_name, p) in zip(flat.slices, model.named_parameters()):
        decayed[a:b] = p.ndim == 2
    covered = torch.zeros(shard, dtype=torch.bool)
    for a, b in flat.decay_ranges:
        covered[a:b] = True
    assert torch.equal(covered, decayed[lo:hi])


CONSTRUCTION = r"""
import json, os, sys, torch
torch.set_num_threads(1)
from acco.engine.flat import FlatModel
from acco.engine.sharded_adamw import ShardedAdamW

def rss(key):
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) * 1024 for l in f if l.startswith(key + ":"))

torch.manual_seed(0)
model = torch.nn.Sequential(*[torch.nn.Linear(2048, 2048) for _ in range(8)])  # 33.6M parameters
model_bytes = sum(p.numel() * 4 for p in model.parameters())
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")
base = rss("VmRSS")
flat = FlatModel(model, world_size=4, dtype=torch.bfloat16, rank=0)
opt = ShardedAdamW(flat.take_master_shard(), flat.decay_ranges, lambda s, m: 1e-3)
print(json.dumps({"model": model_bytes, "peak": rss("VmHWM") - base, "after": rss("VmRSS") - base}))
"""


@pytest.mark.integration
@needs_hwm
def test_construction_peak_stays_near_the_low_precision_buffers():
    """A 134 MB fp32 model flattened into bf16 buffers for 4 ranks: params + grads (2 x 67 MB) and
    the rank's fp32 master shard (34 MB) are what construction adds, ~1.25x the fp32 model; the
    old construction (a full fp32 copy and a full fp32 decay mask beside the buffers) added ~3x.
    Afterwards, with the originals released and the optimizer built, less than the model remains
    (old: the mask stayed, ~1.75x)."""
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536", PYTHONPATH=ROOT)  # big blocks: mmap, freed at once
    proc = subprocess.run(
        [sys.executable, "-c", CONSTRUCTION], capture_output=True, text=True, env=env, cwd=ROOT, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    m = json.loads(proc.stdout.strip().splitlines()[-1])
    assert m["peak"] < 2.0 * m["model"], m
    assert m["after"] < 1.0 * m["model"], m


def startup_spike_task(cfg, rank, world_size, device):
    """The oracle task, built after a 512 MB host temporary (a start-up such as a model built in
    fp32 on the host): records the high-water mark the temporary left, for the test to compare."""
    from tests.helpers.oracle import build_oracle_task

    spike = torch.ones(int(cfg["spike"]["mb"]) * MB // 4)  # written: resident
    hwm = _vm_hwm()
    del spike
    task = build_oracle_task(cfg, rank, world_size, device)
    oracle_finish = task.on_finish

    def on_finish(out_dir):
        oracle_finish(out_dir)
        with open(os.path.join(out_dir, f"spike_rank{rank}.json"), "w") as f:
            json.dump({"hwm": hwm}, f)

    task.on_finish = on_finish
    return task


@pytest.mark.integration
@needs_hwm
def test_peak_rss_reports_training_not_startup(tmp_path):
    out = str(tmp_path / "run")
    run_train(
        [
            "method=ddp",
            "method.impl=flat",
            "task=tests.integration.test_memory_precision:startup_spike_task",
            "+spike.mb=512",
            "world_size=1",
            "train.steps=3",
            "train.deterministic=true",
            "train.log_every=0",
            "train.trace=false",
            f"out_dir={out}",
        ]
    )
    summary = load_run(out)["summary"]
    assert summary["status"] == "completed"
    with open(os.path.join(out, "spike_rank0.json")) as f:
        spike_hwm = json.load(f)["hwm"]
    rank0 = summary["per_rank"][0]
    assert rank0["peak_rss_scope"] == "training"
    # the start-up temporary is not in the reported peak (the process's lifetime peak would be)
    assert rank0["peak_rss_bytes"] < spike_hwm - 256 * MB, (rank0["peak_rss_bytes"], spike_hwm)


# -- precision ------------------------------------------------------------------------------------
BF16 = [
    *SMALL_LM,
    "world_size=2",
    "train.accum=2",
    "train.deterministic=true",
    "train.precision=bf16",
    "train.trace=false",
    "optim.lr=2e-3",
    "optim.schedule=cosine",
    "optim.warmup_steps=2",
]
STEPS = 8


def _rows(out: str) -> list[dict]:
    with open(os.path.join(out, "metrics.csv")) as f:
        return list(csv.DictReader(f))


def _in_group(rank, world, port, fn, args, results):
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    try:
        results[rank] = fn(rank, world, *args)
    except BaseException as exc:  # reported to the test, which fails on it
        results[rank] = f"error: {type(exc).__name__}: {exc}"
    sys.stdout.flush()
    os._exit(0)  # no interpreter teardown of gloo threads (see acco.harness.run.worker.exit_now)


def run_in_group(fn, world: int, *args) -> list:
    """fn(rank, world, *args) in `world` spawned processes joined in a gloo group; their results."""
    from acco.harness.launch import free_port

    manager = mp.get_context("spawn").Manager()
    results = manager.dict()
    mp.start_processes(_in_group, args=(world, free_port(), fn, args, results), nprocs=world, start_method="spawn")
    out = [results.get(r) for r in range(world)]
    for value in out:
        assert not (isinstance(value, str) and value.startswith("error")), value
    return out


def _trainer(cfg, rank, world):
    from acco.config.schema import typed
    from acco.engine.trace import TraceRecorder
    from acco.tasks import load_task_factory
    from acco.train.trainer import Trainer

    device = torch.device("cpu")
    cfg = typed(cfg)  # as acco.harness.run.worker.run_rank gives it
    task = load_task_factory(cfg.task)(cfg, rank, world, device)
    return Trainer(cfg, task, rank, world, device, TraceRecorder(rank, enabled=False), None), task


def _initial_evaluations(rank, world, cfg):
    """Every implementation's validation loss at θ_0, before any step."""
    losses = {}
    for impl in ("torch", "flat"):
        run_cfg = dict(cfg, method=dict(cfg["method"], impl=impl))
        trainer, _ = _trainer(run_cfg, rank, world)
        losses[impl] = trainer.evaluate()
        trainer.close()
        trainer.release()
    return losses


@pytest.mark.integration
def test_bf16_torch_ddp_and_flat_ddp_evaluate_alike_and_train_along_the_same_curve(tmp_path):
    runs = {}
    for impl in ("torch", "flat"):
        out = str(tmp_path / impl)
        run_train(
            ["method=ddp", f"method.impl={impl}", *BF16, f"train.steps={STEPS}", "train.eval_every=2", f"out_dir={out}"]
        )
        runs[impl] = _rows(out)
    sizes = {impl: load_run(str(tmp_path / impl))["summary"]["per_rank"][0] for impl in runs}
    # the baseline keeps fp32 parameters and gradients (PyTorch's mixed precision), the flat path
    # bf16 parameters, padded to the shard layout, and (train.grad_dtype=auto) an fp32 accumulator
    # beside a bf16 micro-batch gradient: 6 bytes a parameter against the baseline's 4
    assert sizes["flat"]["param_bytes"] < 0.51 * sizes["torch"]["param_bytes"]
    assert 1.49 * sizes["torch"]["grad_bytes"] < sizes["flat"]["grad_bytes"] < 1.51 * sizes["torch"]["grad_bytes"]
    cfg = load_run(str(tmp_path / "torch"))["cfg"]
    # θ_0 is the same model: under the same evaluation (bf16 autocast, parameters stored in bf16)
    # both implementations give the same number, bit for bit, on every rank
    initial = run_in_group(_initial_evaluations, 2, cfg)
    assert initial[0]["torch"] == initial[0]["flat"] and initial[0] == initial[1], initial
    # Training: the same bf16 matrix products; the paths differ only in storage (the flat path
    # rounds parameters to bf16, and accumulates and reduces gradients in fp32 as the baseline does
    # since issue 42 (in bf16 before, within the same bound); the baseline keeps fp32 parameters),
    # which moves the loss by ~1e-5 relative over these steps (measured: <= 3e-5). A bf16
    # ulp of the loss is 2^-8 = 3.9e-3 relative; 5e-4 allows ~15x the measured gap and is ~5x below
    # what a real difference produced (the eval losing DDP's gradient all-reduce: 2.5e-3 by step 10).
    for key in ("train_loss", "eval_loss"):
        torch_curve = [float(r[key]) for r in runs["torch"] if r[key]]
        flat_curve = [float(r[key]) for r in runs["flat"] if r[key]]
        assert len(torch_curve) == len(flat_curve) == (STEPS if key == "train_loss" else STEPS // 2)
        assert flat_curve == pytest.approx(torch_curve, rel=5e-4), key
    # and training moved: the curve is not flat
    assert float(runs["flat"][-1]["train_loss"]) < float(runs["flat"][0]["train_loss"]) - 0.05


def _block_forward_calls_with_and_without(rank, world, cfg):
    return [
        _block_forward_calls(rank, world, dict(cfg, train=dict(cfg["train"], activation_checkpointing=on)))
        for on in (True, False)
    ]


def _block_forward_calls(rank, world, cfg):
    """Calls of the first transformer block's attention during one micro-batch's fwd+bwd (the
    block's own hooks stay outside the checkpoint; its submodules run again in the recompute,
    which stops early once it has what the backward needs: a pre-hook sees the call)."""
    trainer, task = _trainer(cfg, rank, world)
    calls = []
    task.model.transformer.h[0].attn.register_forward_pre_hook(lambda *a: calls.append(1))
    trainer.runner.run_one()
    trainer.close()
    trainer.release()
    return len(calls)


@pytest.mark.integration
def test_activation_checkpointing_recomputes_and_changes_nothing_in_fp32(tmp_path):
    # One intra-op thread: with two, CPU kernels' sums split by thread count and AdamW turns an
    # ulp of a near-zero gradient into a visible step; CI once saw 22 of 126k weights differ
    # (max 1e-5) under load. One thread makes the two runs' kernels alike, and here equal.
    finals, losses, cfg = {}, {}, None
    for ckpt in ("false", "true"):
        out = str(tmp_path / ckpt)
        run_train(
            [
                "method=ddp",
                "method.impl=flat",
                *SMALL_LM,
                "world_size=1",
                "train.steps=3",
                "train.deterministic=true",
                "train.precision=fp32",
                "train.trace=false",
                "train.save_final_params=true",
                "train.threads=1",
                f"train.activation_checkpointing={ckpt}",
                f"out_dir={out}",
            ]
        )
        finals[ckpt] = torch.load(os.path.join(out, "final_params.pt"))
        losses[ckpt] = [float(r["train_loss"]) for r in _rows(out)]
        cfg = load_run(out)["cfg"]
    assert losses["true"] == pytest.approx(losses["false"], rel=1e-6)
    torch.testing.assert_close(finals["true"], finals["false"], rtol=1e-6, atol=1e-7)
    # and the blocks really are recomputed during the backward (a second call)
    assert run_in_group(_block_forward_calls_with_and_without, 1, cfg) == [[2, 1]]
