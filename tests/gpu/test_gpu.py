"""`make gpu-check`'s tests (marked `gpu`, skipped at collection without CUDA): every method on one
GPU against the single-process reference, 2 ranks over NCCL where there are 2 GPUs, bf16 storage
with an fp32 master, the communication stream overlapping compute (CUDA events). What they measure
goes to $ACCO_GPU_RESULTS (results/gpu/ under experiments/gpu_check.py).

Tolerance against the reference (fp32 on CPU): the GPU run keeps bf16 parameters, gradients and
buffer (8-bit significand, unit roundoff 2^-8 ≈ 0.4 %) and computes under bf16 autocast, so each
gradient entry carries a relative error of about 1 % (a few roundings in the matmuls and in the
bf16 accumulation over micro-batches); AdamW's update m/√v is scale-free and first-order in that
error, the fp32 master keeps it from compounding through the parameters. Over 10 steps the
parameter change ‖θ_gpu − θ_ref‖ is then a few % of the reference's own change ‖θ_ref − θ_0‖:
we require at most 10 %, and that the run is at least twice as near its own method's reference as
any other method's. That makes the check discriminating: in this setting (fp32 on CPU, 10 steps,
DPU with one warmup step) the methods' final parameters lie 22-52 % of a run's change apart (DDP
and DPU with a 4-step warmup only 4 %, hence the single warmup step here). The mean training loss
per step agrees within 2 % (a forward in bf16). These bounds are reasoned, not yet measured on a
GPU: gpu-check records the actual distances (reference.json).

The rest of the file runs on CPU: the gpu-check machinery itself (skip without CUDA, the interval
arithmetic, the overlap and throughput measurements on a tiny model)."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys

import pytest
import torch

from acco.harness.gpu_check import covered, peak_tflops
from tests.helpers.gpu import METHODS, record
from tests.helpers.paths import ROOT
from tests.helpers.run_if import CUDA, gpu, needs_cuda, needs_two
from tests.helpers.runs import SMALL_LM, load_run, run_train

CHECK = os.path.join(ROOT, "experiments", "gpu_check.py")
# one update rule, several implementations
SAME_RULE = {frozenset({"ddp", "ddp_flat"}), frozenset({"ddp", "ddp_overlap"}), frozenset({"ddp_flat", "ddp_overlap"})}
STEPS = 10
TINY_CPU = ["device=cpu", "model=gptneo_tiny", *SMALL_LM]


# -- every method against the reference, on 1 GPU and on 2 -------------------------------------------
@pytest.fixture(scope="module")
def references():
    return {}


def reference_of(cfg: dict, method: str, world: int, references: dict):
    from acco.train.reference import replay

    key = (method, world)
    if key not in references:
        references[key] = replay(cfg)
    return references[key]


def check_against_references(method: str, world: int, tmp_path, references) -> None:
    out = str(tmp_path / f"{method}_{world}")
    common = [
        *SMALL_LM,
        "device=cuda",
        f"world_size={world}",
        f"train.steps={STEPS}",
        "train.accum=2",
        "train.deterministic=true",
        "train.save_final_params=true",
        "train.trace=false",  # SMALL_LM leaves it on: a traced run is not the run measured
        "train.eval_every=5",  # evaluation inside the run, on the GPU
        "optim.lr=2e-3",
        "optim.clip_norm=1.0",
        "optim.schedule=cosine",
        "optim.warmup_steps=3",
    ]
    run_train([*METHODS[method], *common, f"out_dir={out}"])
    run = load_run(out)
    assert run["summary"]["status"] == "completed" and run["summary"]["device"].startswith("cuda")
    final = torch.load(os.path.join(out, "final_params.pt")).float().cpu()
    cpu_cfg = dict(run["cfg"], device="cpu")
    ref = reference_of(cpu_cfg, method, world, references)
    theta0, theta_ref = ref.history[0], ref.history[-1]
    change = (theta_ref - theta0).norm()
    rel = float((final - theta_ref).norm() / change)
    others = {}
    for other, overrides in METHODS.items():
        if other == method or frozenset({other, method}) in SAME_RULE:
            continue
        from acco.config.experiments import compose

        other_cfg = compose(
            [*overrides, *[o for o in common if o != "device=cuda"], "device=cpu", f"out_dir={tmp_path / 'ref'}"]
        )
        others[other] = float((final - reference_of(other_cfg, other, world, references).history[-1]).norm() / change)
    with open(os.path.join(out, "metrics.csv")) as f:
        losses = [float(r["train_loss"]) for r in csv.DictReader(f)]
    loss_rel = max(abs(a - b) / abs(b) for a, b in zip(losses, ref.losses))
    record(
        "reference",
        f"{method} x{world}",
        {"rel_error": rel, "nearest_other": min(others.values()), "others": others, "loss_rel_diff": loss_rel},
    )
    assert rel < 0.10, (method, rel)
    assert rel < min(others.values()) / 2, (method, rel, others)
    assert loss_rel < 0.02, (method, loss_rel)


@pytest.mark.integration
@gpu
@needs_cuda
@pytest.mark.parametrize("method", list(METHODS))
def test_every_method_on_one_gpu_matches_the_reference(method, tmp_path, references):
    """world 1: NCCL, the communication thread on its CUDA stream, ordered by events, bf16 buffers
    and the fp32 master (flat methods) or fp32 parameters under autocast (torch DDP)."""
    check_against_references(method, 1, tmp_path, references)


@pytest.mark.integration
@gpu
@needs_two
@pytest.mark.parametrize("method", list(METHODS))
def test_every_method_on_two_gpus_over_nccl_matches_the_reference(method, tmp_path, references):
    check_against_references(method, 2, tmp_path, references)


def run_part(tmp_path, part: str, options: list[str], overrides: list[str] = (), expect: int = 0):
    """`experiments/gpu_check.py --part <part>` in a child process, as gpu-check runs it: its JSON."""
    path = str(tmp_path / f"{part}.json")
    proc = subprocess.run(
        [sys.executable, CHECK, "--part", part, *options, "--json", path, *overrides],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ, ACCO_GPU_TMP=str(tmp_path)),
    )
    assert proc.returncode == expect, proc.stderr[-4000:]
    with open(path) as f:
        return json.load(f)


# -- the communication stream overlaps compute (CUDA events) -------------------------------------------
def overlap(method: str, world: int, tmp_path, extra: list[str] = ()) -> list[dict]:
    return run_part(tmp_path, "overlap", ["--method", method, "--world", str(world)], extra)


@pytest.mark.integration
@gpu
@needs_cuda
@pytest.mark.parametrize("method", ["acco", "ddp_flat"])
def test_the_runs_keep_bf16_storage_an_fp32_master_and_a_stream_of_their_own(method, tmp_path):
    """What the overlapped and the sequential flat runs keep in which dtype, and on which stream
    their syncs run (the overlap itself is the bound of gpu-check's overlap_bound part)."""
    for r in overlap(method, 1, tmp_path):
        trimmed = {k: v for k, v in r.items() if not k.endswith("_spans")}
        record("storage", f"{method} x1 rank {r['rank']}", trimmed)
        s = r["storage"]
        assert r["clock"] == "cuda events" and s["device"].startswith("cuda")
        # fp32 gradients and buffer beside bf16 parameters (train.grad_dtype=auto), an fp32 master
        assert (s["params"], s["grads"], s["buffer"]) == ("torch.bfloat16", "torch.float32", "torch.float32")
        assert (s["master"], s["exp_avg"]) == ("torch.float32",) * 2
        assert s["comm_stream"] != s["compute_stream"]
        assert r["syncs"] >= 5 and r["sync_s"] > 0


@pytest.mark.integration
@gpu
@needs_cuda
def test_torch_ddp_keeps_fp32_parameters_under_bf16_autocast(tmp_path):
    (r,) = overlap("ddp", 1, tmp_path)
    s = r["storage"]
    assert (s["params"], s["grads"], s["compute_dtype"]) == ("torch.float32", "torch.float32", "torch.bfloat16")


# -- the gpu-check machinery, on CPU ------------------------------------------------------------------
@pytest.mark.integration
@pytest.mark.skipif(CUDA, reason="checks the no-GPU path")
def test_gpu_check_skips_cleanly_without_cuda(tmp_path):
    proc = subprocess.run(
        [sys.executable, CHECK, "--out", str(tmp_path / "gpu")], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert "skipped: no CUDA GPU" in proc.stdout
    assert not (tmp_path / "gpu").exists()


def test_covered_intervals():
    assert covered([(0, 10)], [(2, 4), (3, 6), (8, 20)]) == pytest.approx(6.0)
    assert covered([(0, 1), (5, 6)], []) == 0.0
    assert covered([(0, 1)], [(-1, 2)]) == pytest.approx(1.0)


def test_peak_table():
    assert peak_tflops("NVIDIA H100 80GB HBM3")[0] == pytest.approx(989.4)
    assert peak_tflops("NVIDIA H100 PCIe")[0] == pytest.approx(756.0)
    assert peak_tflops("NVIDIA H200")[0] == pytest.approx(989.4)
    assert peak_tflops("NVIDIA A100-SXM4-80GB")[0] == pytest.approx(312.0)
    assert peak_tflops("Some Future GPU")[0] is None


@pytest.mark.integration
def test_the_overlap_bound_measures_every_method_on_cpu(tmp_path):
    """gpu-check's overlap_bound part on a tiny model on CPU (host clock, a host sleep as the
    stretched sync): every number it decides on is there. Its verdicts are asserted on a GPU only
    (tests/gpu/test_gpu.py's gpu test): on a loaded CPU a timing bound is no test."""
    result = run_part(tmp_path, "overlap_bound", [], [*TINY_CPU, "train.eval_every=0"])
    assert result["clock"] == "host" and result["stretch_s"] >= 0 and result["round_compute_s"] > 0
    assert set(result["methods"]) == {"ddp_flat", "acco", "dpu", "wp"}
    for name, row in result["methods"].items():
        assert row["round_s"] > 0 and row["bound_s"] > 0 and isinstance(row["holds"], bool), name
    assert set(result["methods"]["acco"]["checks"]) == {"round", "sync_not_starved", "compute_not_slowed"}


@pytest.mark.integration
@gpu
@needs_cuda
def test_the_overlapped_methods_round_is_max_of_compute_and_sync_on_gpu(tmp_path):
    """The overlap as a bound (acco/harness/gpu_check.py overlap_bound): with the sync stretched to a
    round's compute, flat DDP's round is c + s and ACCO's, DPU's and WP's max(c, s), within the
    margin; the stretched sync is not starved beside compute, nor the compute slowed by it."""
    result = run_part(tmp_path, "overlap_bound", [], ["device=cuda"])
    record("overlap_bound", "x1", result)
    failed = {m: r for m, r in result["methods"].items() if not r["holds"]}
    assert not failed, failed


@pytest.mark.integration
def test_overlap_measurement_tells_overlapped_from_sequential_on_cpu(tmp_path):
    """The same instrumentation on CPU (host clock, gloo): ACCO's syncs run while the compute side
    computes; flat DDP's never do."""
    (acco,) = overlap("acco", 1, tmp_path, TINY_CPU)
    (ddp,) = overlap("ddp_flat", 1, tmp_path, TINY_CPU)
    assert acco["clock"] == ddp["clock"] == "host"
    assert acco["syncs"] == 2 * 6 and ddp["syncs"] == 6
    assert acco["overlap_fraction"] > 0.5
    assert ddp["overlap_fraction"] == 0.0


@pytest.mark.integration
def test_throughput_measurement_on_cpu(tmp_path):
    options = ["--model", "gptneo_tiny", "--seq", "32", "--mb", "4", "--micro-batches", "3"]
    row = run_part(tmp_path, "throughput", options, TINY_CPU)
    assert row["tokens_per_s"] > 0 and row["micro_batches_timed"] == 3
    assert row["mfu"] is None and row["peak_from"] == "not a GPU"  # no FLOP peak for a CPU
    assert row["model_tflops_per_s"] == pytest.approx(6 * row["params"] * row["tokens_per_s"] / 1e12)


@pytest.mark.integration
def test_sync_debug_measurement_runs_on_cpu(tmp_path):
    """The machinery of gpu-check's no-hidden-host-sync part on a tiny model: nothing to check on
    CPU (no CUDA syncs), every micro-batch goes through it."""
    result = run_part(tmp_path, "sync_debug", [], [*TINY_CPU, "method=acco"])
    assert result["checked"] is False and result["error"] is None and result["micro_batches"] >= 6


@pytest.mark.integration
def test_sync_debug_names_the_source_line_of_each_sync_inside_micro_batches(tmp_path):
    """A forward that syncs (the oracle warns as set_sync_debug_mode would, from its own line) is
    reported by its file and line, not blamed on the engine."""
    line = next(
        i for i, text in enumerate(open(os.path.join(ROOT, "tests", "helpers", "oracle.py")), 1) if "SYNC_LINE" in text
    )
    oracle = ["task=tests.helpers.oracle:build_oracle_task", "+oracle.warn_sync=true", "device=cpu", "method=acco"]
    result = run_part(tmp_path, "sync_debug", [], oracle, expect=1)  # the part fails, naming the line
    inside = result["sources"]["micro-batch"]
    assert inside == {f"tests/helpers/oracle.py:{line}": result["syncs"]["micro-batch"]}
    assert result["syncs"]["micro-batch"] == result["micro_batches"] - 4  # all but the warm-up's
    assert result["error"].endswith(f"from tests/helpers/oracle.py:{line} ({result['syncs']['micro-batch']})")


def test_a_sync_is_filed_under_its_source_and_whether_a_library_made_it():
    from acco.harness.gpu_check import sync_source

    lib = "/opt/torch/.venv/lib/python3.12/site-packages/transformers/masking_utils.py"
    assert sync_source(lib, 604) == ("transformers/masking_utils.py:604", True)
    assert sync_source(os.path.join(ROOT, "acco", "engine", "sync.py"), 90) == ("acco/engine/sync.py:90", False)
    assert sync_source("/usr/lib/python3/dist-packages/torch/cuda/__init__.py", 1) == ("torch/cuda/__init__.py:1", True)
