"""acco.Overlapped, the suite's methods in one's own training loop (acco/api.py), and its examples:

* the example (examples/train_acco.py, examples/train_diloco.py) runs as written under torchrun
  (world 2), and in deterministic mode its losses and final parameters are bit-identical to the
  suite's own run (experiments/train.py) of the same model, data order and settings;
* state_dict / load_state_dict: a run stopped, saved (through torch.save) and resumed into a fresh
  model gives exactly the uninterrupted run's losses and parameters, for every method;
* bad arguments are refused before any collective with one TypeError/ValueError line naming the
  problem and the fix."""

from __future__ import annotations

import csv
import io
import itertools
import json
import os
import subprocess
import sys

import pytest
import torch
from torch import nn

import acco
from tests.helpers.paths import ROOT
from tests.helpers.runs import SMALL_LM, run_train

EXAMPLES = os.path.join(ROOT, "examples")


# -- the examples under torchrun, against the suite's own runs -------------------------------------
def run_example(script: str, out_dir, *args: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2"]
    proc = subprocess.run(
        [*cmd, os.path.join(EXAMPLES, script), "--out", str(out_dir), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, f"{script} exited {proc.returncode}\n{proc.stderr[-6000:]}"
    return proc


def suite_losses(out_dir) -> list[float]:
    with open(os.path.join(out_dir, "metrics.csv"), newline="") as f:
        return [float(row["train_loss"]) for row in csv.DictReader(f)]


# the example's settings in the suite's terms: SMALL_LM is the example's model and data; its seeds
# (model 0, stories 1234) are the suite's defaults; one intra-op thread per rank as torchrun's
EXAMPLE_AS_SUITE = [*SMALL_LM, "world_size=2", "train.threads=1", "train.trace=false"]


@pytest.mark.integration
@pytest.mark.parametrize(
    "script, args, suite",
    [
        ("train_acco.py", ["--steps", "6", "--deterministic"], ["method=acco", "optim.lr=2e-3", "train.steps=6"]),
        # 10 inner steps: an outer step after step 8 and the final one after step 10
        (
            "train_diloco.py",
            ["--steps", "10"],
            ["method=diloco", "method.sync_every=8", "optim.lr=1e-3", "train.steps=10"],
        ),
    ],
)
def test_example_equals_the_suites_run(tmp_path, script, args, suite):
    proc = run_example(script, tmp_path / "example", *args)
    assert "loss" in proc.stdout  # it reports its progress
    run_train(
        [*EXAMPLE_AS_SUITE, *suite, "train.accum=2", "train.deterministic=true", "train.save_final_params=true"]
        + [f"out_dir={tmp_path / 'suite'}"]
    )
    with open(tmp_path / "example" / "losses.json") as f:
        losses = json.load(f)
    assert losses == suite_losses(tmp_path / "suite")  # exact floats
    example = torch.load(tmp_path / "example" / "final_params.pt")
    reference = torch.load(tmp_path / "suite" / "final_params.pt")
    assert example.dtype == torch.float32 and torch.equal(example, reference)


# -- checkpoint and resume through the API, every method ----------------------------------------------
STEPS = 6
# name: (method, its options, the step after which the first run stops and saves)
RESUMES = {
    "ddp": ("ddp", {}, 3),
    "ddp torch": ("ddp", {"impl": "torch"}, 3),  # PyTorch's DDP + ZeroRedundancyOptimizer
    "dpu": ("dpu", {"warmup_steps": 2}, 1),  # saved in the warmup, resumed across its end
    "wp": ("wp", {"warmup_steps": 1}, 3),  # saved with gradients carried into the next step
    "acco": ("acco", {}, 3),
    # the reduce-scatter in 4 buckets of ~52 entries (bucket_mb: 200 bytes) during the last backward
    "ddp overlap": ("ddp", {"overlap_backward": True, "bucket_mb": 200 / 2**20}, 3),
    "acco bf16": ("acco", {"precision": "bf16", "grad_dtype": "fp32"}, 3),  # the GPU's storage, on CPU
    "diloco": ("diloco", {"sync_every": 2}, 3),  # between two outer steps
    "streaming_diloco": ("streaming_diloco", {"sync_every": 4, "fragments": 2, "overlap_steps": 1}, 2),  # in flight
}


def small_model(seed: int) -> nn.Module:
    torch.manual_seed(seed)  # 8*16 + 16 + 16 + 1 = 161 entries: the shards are padded on 2 ranks
    return nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1))


def micro_batches(rank: int):
    """This rank's micro-batches, an endless iterable: the k-th a pure function of (rank, k)."""
    k = 0
    while True:
        g = torch.Generator().manual_seed(1000 * rank + k)
        x = torch.randn(4, 8, generator=g)
        yield x, x.sum(dim=1, keepdim=True).sin()
        k += 1


def mse(model: nn.Module, batch) -> torch.Tensor:
    x, y = batch
    return nn.functional.mse_loss(model(x), y)


def squared_errors(model: nn.Module, batch) -> torch.Tensor:  # not a mean: refused
    x, y = batch
    return (model(x) - y) ** 2


def train(method: str, options: dict, steps: int, rank: int, seed: int = 0, state=None, loss_fn=mse):
    """(losses, θ_T or None, state_dict after `steps` steps or None) of an Overlapped run of STEPS."""
    model = small_model(seed)
    kw = {"deterministic": True, "accum": 2, "optimizer": {"lr": 1e-2}, **options}
    with acco.Overlapped(model, loss_fn, micro_batches(rank), method=method, steps=STEPS, **kw) as trainer:
        if state is not None:
            trainer.load_state_dict(state)
        losses = [trainer.step().loss_mean for _ in range(trainer.step_count, steps)]
        done = trainer.step_count == STEPS
        final = trainer.committed_vector() if done else None
        saved = None if done else trainer.state_dict()
    if final is not None:  # after the last step the model holds θ_T, stored in the compute dtype
        dtype = torch.bfloat16 if options.get("precision") == "bf16" else torch.float32
        flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
        assert flat.dtype == dtype and torch.equal(flat, final.to(dtype))
    return losses, final, saved


def _resume_worker(rank: int, world: int, port: int, out: str) -> None:
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    results: dict = {}
    for name, (method, options, stop) in RESUMES.items():
        whole, final, _ = train(method, options, STEPS, rank)
        first, _, state = train(method, options, stop, rank)
        buf = io.BytesIO()  # through a file's bytes, as a checkpoint goes
        torch.save(state, buf)
        buf.seek(0)
        state = torch.load(buf, weights_only=False)
        # a fresh model of other initial values: everything comes from the state
        second, resumed, _ = train(method, options, STEPS, rank, seed=1, state=state)
        results[name] = {"whole": whole, "resumed": first + second, "final": final, "final_resumed": resumed}
    # a state refused by a run of another method; a loss that is not a scalar
    _, _, state = train("acco", {}, 1, rank)
    for name, build in (
        ("wrong_method", lambda: train("dpu", {}, STEPS, rank, state=state)),
        ("vector_loss", lambda: train("acco", {}, 1, rank, loss_fn=squared_errors)),
    ):
        try:
            build()
            results[name] = None
        except (TypeError, ValueError) as exc:
            results[name] = f"{type(exc).__name__}: {exc}"
    # adaptive ACCO: at least accum micro-batches per round and rank, two rounds per step
    model = small_model(0)
    with acco.Overlapped(model, mse, micro_batches(rank), steps=3, accum=2, optimizer={"lr": 1e-2}) as trainer:
        results["adaptive"] = [trainer.step().micro_batches for _ in range(3)]
    if rank == 0:
        torch.save(results, out)
    dist.destroy_process_group()


@pytest.fixture(scope="module")
def resumed(tmp_path_factory):
    import torch.multiprocessing as mp

    from acco.harness.launch import free_port

    out = str(tmp_path_factory.mktemp("api") / "results.pt")
    mp.start_processes(_resume_worker, args=(2, free_port(), out), nprocs=2, start_method="spawn")
    return torch.load(out, weights_only=False)


@pytest.mark.integration
@pytest.mark.parametrize("name", list(RESUMES))
def test_resume_through_the_api_is_exact(resumed, name):
    run = resumed[name]
    assert len(run["whole"]) == STEPS
    assert run["resumed"] == run["whole"]
    assert torch.equal(run["final_resumed"], run["final"])


@pytest.mark.integration
def test_api_refuses_a_state_of_another_run_and_a_loss_that_is_no_scalar(resumed):
    assert resumed["wrong_method"].startswith("ValueError: the checkpoint's method is 'acco', this run's 'dpu'")
    assert resumed["vector_loss"].startswith("TypeError: loss_fn returned a tensor of shape (4, 1)")
    for message in (resumed["wrong_method"], resumed["vector_loss"]):
        assert "\n" not in message


@pytest.mark.integration
def test_adaptive_acco_runs_at_least_its_minimum(resumed):
    # 2 ranks x 2 rounds x at least accum=2 micro-batches per committed step
    assert len(resumed["adaptive"]) == 3 and all(n >= 8 for n in resumed["adaptive"])


# -- every rank starts from rank 0's weights, or the run stops ------------------------------------------
SAME_START = {
    "ddp": ("ddp", {}),
    "ddp torch": ("ddp", {"impl": "torch"}),
    "ddp overlap": ("ddp", {"overlap_backward": True, "bucket_mb": 200 / 2**20}),
    "acco": ("acco", {}),
    "diloco": ("diloco", {"sync_every": 2}),
    "streaming_diloco": ("streaming_diloco", {"sync_every": 4, "fragments": 2, "overlap_steps": 1}),
}


def _same_start_worker(rank: int, world: int, port: int, out: str) -> None:
    """Each rank builds its model from its own seed (rank): refused for every method, one line, with
    no collective issued after the check; broadcast_initial=True: every rank trains from rank 0's."""
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    results: dict = {}
    kw = {"steps": 2, "accum": 2, "deterministic": True, "optimizer": {"lr": 1e-2}}
    for name, (method, options) in SAME_START.items():
        try:
            acco.Overlapped(small_model(rank), mse, micro_batches(rank), method=method, **kw, **options)
            results[name] = None
        except ValueError as exc:
            results[name] = str(exc)
        model = small_model(rank)
        with acco.Overlapped(
            model, mse, micro_batches(rank), method=method, broadcast_initial=True, **kw, **options
        ) as t:
            start = torch.cat([p.detach().reshape(-1) for p in model.parameters()]).clone()
            losses = [t.step().loss_mean for _ in range(2)]
            final = t.committed_vector()
        results[name + " broadcast"] = (start, losses, final)
    torch.save(results, f"{out}.{rank}")
    dist.destroy_process_group()


@pytest.mark.integration
def test_ranks_with_different_initial_weights_are_refused_or_start_from_rank_0s(tmp_path):
    import torch.multiprocessing as mp

    from acco.harness.launch import free_port

    out = str(tmp_path / "same_start")
    mp.start_processes(_same_start_worker, args=(2, free_port(), out), nprocs=2, start_method="spawn")
    ranks = [torch.load(f"{out}.{r}", weights_only=False) for r in range(2)]
    rank0 = torch.cat([p.detach().reshape(-1) for p in small_model(0).parameters()])
    for name in SAME_START:
        for r in range(2):
            message = ranks[r][name]
            assert message is not None, f"{name}: rank {r} trained from weights that differ from rank 0's"
            assert message.startswith("the ranks' initial parameters differ (4 of 4 tensors, first 0.weight)")
            assert "broadcast_initial=True" in message and "\n" not in message
        (start0, losses0, final0), (start1, losses1, final1) = (ranks[r][name + " broadcast"] for r in range(2))
        assert torch.equal(start0, rank0) and torch.equal(start1, rank0), name
        assert losses0 == losses1 and torch.equal(final0, final1), name


class IndexedBatches:
    """The micro-batches of micro_batches(rank) as a stream with .batch(k) (acco.data's kind)."""

    def __init__(self, rank: int):
        self.rank = rank

    def batch(self, k: int):
        return next(itertools.islice(micro_batches(self.rank), k, None))


def _subgroup_worker(rank: int, world: int, port: int, out: str) -> None:
    """Ranks 0 and 1 train in a group of their own, their data given as .batch(k); rank 2 builds nothing."""
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    pair = dist.new_group([0, 1])
    if rank < 2:
        model = small_model(0)
        kw = {"steps": STEPS, "accum": 2, "deterministic": True, "optimizer": {"lr": 1e-2}, "process_group": pair}
        with acco.Overlapped(model, mse, IndexedBatches(rank), **kw) as trainer:
            losses = [trainer.step().loss_mean for _ in range(STEPS)]
        if rank == 0:
            torch.save(losses, out)
    dist.barrier()
    dist.destroy_process_group()


@pytest.mark.integration
def test_a_group_of_part_of_the_world_trains_as_a_world_of_its_ranks(resumed, tmp_path):
    import torch.multiprocessing as mp

    from acco.harness.launch import free_port

    out = str(tmp_path / "losses.pt")
    mp.start_processes(_subgroup_worker, args=(3, free_port(), out), nprocs=3, start_method="spawn")
    assert torch.load(out) == resumed["acco"]["whole"]


# -- bad arguments -------------------------------------------------------------------------------------
def _good() -> dict:
    return {"model": small_model(0), "loss_fn": mse, "data": micro_batches(0), "steps": 2}


BAD = [
    ({"model": "gpt"}, TypeError, "model must be a torch.nn.Module"),
    ({"loss_fn": None}, TypeError, "loss_fn must be callable"),
    ({"data": 5}, TypeError, "data must be an iterable"),
    ({"method": "adam"}, ValueError, "unknown method 'adam': choose one of ddp, dpu, wp, acco, diloco"),
    ({"steps": 0}, ValueError, "steps must be a whole number >= 1"),
    ({"accum": 1.5}, ValueError, "accum must be a whole number >= 1"),
    ({"deterministic": "yes"}, TypeError, "deterministic must be True or False"),
    ({"optimizer": {"lrr": 1e-3}}, ValueError, "unknown optimizer option 'lrr': the options are lr, betas"),
    ({"optimizer": {"lr": -1}}, ValueError, "optimizer lr must be a number > 0"),
    ({"optimizer": {"betas": (0.9,)}}, ValueError, "optimizer betas must be two numbers in [0, 1)"),
    ({"optimizer": {"schedule": "step"}}, ValueError, "optimizer schedule must be one of constant, cosine, linear"),
    ({"optimizer": 1e-3}, TypeError, "optimizer must be a dict"),
    ({"precision": "fp16"}, ValueError, "precision must be one of auto, bf16, fp32"),
    ({"grad_dtype": "fp8"}, ValueError, "grad_dtype must be one of auto, bf16, fp32"),
    ({"process_group": "world"}, TypeError, "process_group must be a torch.distributed.ProcessGroup"),
    ({"warmup_steps": 3}, ValueError, "unknown acco option 'warmup_steps': the options are max_accum_factor"),
    ({"method": "ddp", "impl": "fsdp"}, ValueError, "ddp option impl must be flat (the flat engine) or torch"),
    ({"method": "dpu", "warmup_steps": -1}, ValueError, "dpu option warmup_steps must be a whole number >= 0"),
    ({"method": "ddp", "overlap_backward": "yes"}, TypeError, "ddp option overlap_backward must be True or False"),
    ({"method": "ddp", "bucket_mb": 0}, ValueError, "ddp option bucket_mb must be a number > 0 (MiB) or None"),
    ({"method": "diloco", "max_accum_factor": 2}, ValueError, "unknown diloco option 'max_accum_factor'"),
    (
        {"method": "streaming_diloco", "sync_every": 6},
        ValueError,
        "streaming_diloco: sync_every (6) must be a multiple of fragments (4)",
    ),
]


@pytest.mark.parametrize("change, error, message", BAD, ids=[str(c) for c, _, _ in BAD])
def test_bad_arguments_are_refused_with_one_line(change, error, message):
    args = {**_good(), **change}
    with pytest.raises(error) as info:
        acco.Overlapped(args.pop("model"), args.pop("loss_fn"), args.pop("data"), **args)
    assert str(info.value).startswith(message) and "\n" not in str(info.value)


def test_a_frozen_model_and_a_missing_process_group_are_refused():
    frozen = small_model(0).requires_grad_(False)
    with pytest.raises(ValueError, match="^the model has no trainable parameters: leave requires_grad=True"):
        acco.Overlapped(frozen, mse, micro_batches(0), steps=2)
    import torch.distributed as dist

    if not dist.is_initialized():
        with pytest.raises(RuntimeError, match="^torch.distributed is not initialized: call .*init_process_group"):
            acco.Overlapped(small_model(0), mse, micro_batches(0), steps=2)
