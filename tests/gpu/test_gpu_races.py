"""`make gpu-check`'s decisive checks (marked `gpu`; skipped without CUDA): deterministic runs whose
final parameters are bitwise equal between the communication thread as it runs, the same with
delays injected on the compute and communication streams (ACCO_COMM_DELAY_CYCLES: a missing wait
on either side reads data not yet written), and the inline worker (dist.comm_thread=false: no
thread, no stream); evaluation inside the run, a checkpoint and exact resume with CUDA tensors.
(The no-hidden-host-sync check is gpu-check's `sync_debug` part: acco/harness/gpu_check.py.)

World 1 short-circuits reduce-scatter and all-gather (acco/engine/collectives.py), and one GPU
cannot host two NCCL ranks: with one GPU the world-2 runs take gloo (dist.backend=gloo: CUDA compute
and streams, the collectives on host copies), with 2 GPUs NCCL as well; what ran is recorded in
races.json."""

from __future__ import annotations

import os
import shutil

import pytest
import torch

from tests.helpers.gpu import METHODS, record
from tests.helpers.run_if import GPUS, gpu, needs_cuda
from tests.helpers.runs import SMALL_LM, load_run, run_train

pytestmark = [pytest.mark.integration, gpu, needs_cuda]

# (world, overrides, which collectives run)
WORLDS = {
    "1": (["world_size=1"], "world 1: reduce-scatter and all-gather are copies"),
    "2 gloo": (["world_size=2", "dist.backend=gloo"], "world 2, gloo on host copies (ring reduce-scatter, all-gather)"),
}
if GPUS >= 2:
    WORLDS["2 nccl"] = (["world_size=2"], "world 2 over NCCL (reduce_scatter_tensor, all_gather)")
LAST = "2 nccl" if GPUS >= 2 else "2 gloo"  # the resume check's
# adaptive rounds (the compute side keeps going while the sync runs) whose counts the virtual clock
# decides, so runs can be compared bit for bit: a modelled sync of 5 micro-batches' time beside
# rounds of 2, while the real thread, stream and events run as in any adaptive run (issue 42 point 12)
ADAPTIVE = [
    "train.deterministic=false",
    "clock.mode=virtual",
    "clock.micro_batch_s=0.01",
    "clock.sync_s=0.05",
]
WORLDS["1 adaptive"] = (["world_size=1", *ADAPTIVE], "world 1, adaptive rounds counted by the virtual clock")
# three runs each, ~8 s a run on one H200 (estimated): the flat engine's three schedules at world 1,
# the overlapped ones and a local method at world 2
RACES = [
    *[(m, "1") for m in ("dpu", "acco", "streaming_diloco", "ddp_overlap")],
    *[(m, w) for w in WORLDS if w not in ("1", "1 adaptive") for m in ("acco", "streaming_diloco")],
    ("acco", "1 adaptive"),
]
DELAY_CYCLES = 20_000_000  # ~10 ms at 2 GHz: far longer than any kernel of this model
BASE = [
    *SMALL_LM,
    "device=cuda",
    "train.steps=6",
    "train.accum=2",
    "train.deterministic=true",
    "train.save_final_params=true",
    "train.trace=false",
    "train.eval_every=3",  # evaluation inside the run, between syncs
]


def final(out) -> torch.Tensor:
    return torch.load(os.path.join(out, "final_params.pt"), map_location="cpu")


@pytest.mark.parametrize("method,world", RACES)
def test_threaded_delayed_and_inline_runs_are_bitwise_equal(method, world, tmp_path, monkeypatch):
    runs = {"threaded": ([], None), "delayed": ([], str(DELAY_CYCLES)), "inline": (["dist.comm_thread=false"], None)}
    finals = {}
    for name, (extra, delay) in runs.items():
        if delay:
            monkeypatch.setenv("ACCO_COMM_DELAY_CYCLES", delay)
        else:
            monkeypatch.delenv("ACCO_COMM_DELAY_CYCLES", raising=False)
        out = str(tmp_path / name)
        overrides = WORLDS[world][0]
        base = [o for o in BASE if not o.startswith("train.deterministic=")] if ADAPTIVE[0] in overrides else BASE
        run_train([*METHODS[method], *base, *overrides, *extra, f"out_dir={out}"])
        summary = load_run(out)["summary"]
        if ADAPTIVE[0] in overrides:  # the rounds were extended beside the syncs
            rounds = summary["per_rank"][0]["round_micro_batches"]
            assert max(rounds) > 2, rounds
        assert summary["status"] == "completed" and summary["device"].startswith("cuda")
        finals[name] = final(out)
    equal = {name: bool(torch.equal(finals["threaded"], t)) for name, t in finals.items() if name != "threaded"}
    record(
        "races",
        f"{method} x{world}",
        {
            "bitwise_equal": equal,
            "backend": summary["backend"],
            "collectives": WORLDS[world][1],
        },
    )
    assert all(equal.values()), equal


@pytest.mark.parametrize("method", ["acco", "streaming_diloco"])
def test_evaluation_checkpoint_and_exact_resume_with_cuda_tensors(method, tmp_path):
    steps = ["train.steps=8", "train.checkpoint_every=3"]
    ref = str(tmp_path / "ref")
    run_train([*METHODS[method], *BASE, *steps, *WORLDS[LAST][0], f"out_dir={ref}"])
    run = load_run(ref)
    assert run["summary"]["status"] == "completed" and run["summary"]["final_eval_loss"] is not None
    # the run as a crash after step 6 would leave it, without the step-6 checkpoint: resume at 3
    out = str(tmp_path / "resumed")
    shutil.copytree(ref, out)
    for name in ("summary.json", "final_params.pt"):
        os.remove(os.path.join(out, name))
    for entry in os.listdir(os.path.join(out, "checkpoints")):
        if int(entry.split("_")[1]) > 3:
            shutil.rmtree(os.path.join(out, "checkpoints", entry))
    run_train([*METHODS[method], *BASE, *steps, *WORLDS[LAST][0], f"out_dir={out}", "resume=auto"])
    resumed = load_run(out)["summary"]
    equal = bool(torch.equal(final(out), final(ref)))
    record("resume", f"{method} {LAST}", {"resumed_from_step": resumed["resumed_from_step"], "bitwise_equal": equal})
    assert resumed["resumed_from_step"] == 3 and equal
