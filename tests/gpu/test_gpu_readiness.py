"""Issue 30 ("ready for the first GPU run"), points 4, 5, 6 (NCCL's streams) and 7, as far as a CPU
can prove them: NCCL's error handling and the allocator's settings are in place before the process
group and CUDA start, respecting a user's own; the training group asks NCCL for high-priority
streams; the clipping norm and the final parameters need no model-sized float64/fp32 copy on the
device. The tests marked `gpu` check the same on CUDA (they skip without one)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

from acco.engine import sync as sync_module
from acco.engine.sharded_adamw import ShardedAdamW
from acco.engine.sync import Syncer, squared_norm
from acco.engine.trace import TraceRecorder
from acco.harness import launch
from acco.harness.launch import DistEnv, cuda_allocator_settings, nccl_error_handling
from acco.runtime.process_group import nccl_group_timeout, training_group_options
from tests.helpers.paths import ROOT
from tests.helpers.run_if import GPUS, gpu, needs_cuda, needs_two
from tests.helpers.runs import SMALL_LM, load_run, run_train


# -- point 4: NCCL timeouts raise on the waiting thread -----------------------------------------------
def test_nccl_error_handling_is_set_before_the_process_group(monkeypatch):
    """No blocking wait (it would disable NCCL's watchdog and flight recorder, and make every
    collective poll the host); CleanUpOnly (the watchdog aborts the communicators, not the
    process); the flight recorder on, dumping on a timeout into the run's folder; deterministic
    kernels already on when the first group is built (issue 42 points 4 and 7)."""
    names = [*launch.NCCL_ERROR_HANDLING, launch.NCCL_DUMP_FILE, "TORCH_NCCL_BLOCKING_WAIT"]
    for name in names:
        monkeypatch.setenv(name, "unset")  # recorded, so the test's end restores the environment
        monkeypatch.delenv(name)
    seen = {}

    def init(backend, **kwargs):
        seen.update(backend=backend, deterministic=torch.are_deterministic_algorithms_enabled())
        seen.update({k: os.environ.get(k) for k in names})

    monkeypatch.setattr(launch.dist, "init_process_group", init)
    monkeypatch.setattr(torch.cuda, "set_device", lambda device: None)
    monkeypatch.setattr(torch, "use_deterministic_algorithms", lambda on, warn_only=False: seen.update(asked=on))
    monkeypatch.setattr(torch, "are_deterministic_algorithms_enabled", lambda: seen.get("asked", False))
    env = DistEnv(0, 2, 0, 2, "127.0.0.1", 29500, "local")
    assert launch.init_process_group(env, torch.device("cuda", 0), 5, deterministic=True, dump_dir="/runs/r") == "nccl"
    assert seen == {
        "backend": "nccl",
        "asked": True,
        "deterministic": True,
        "TORCH_NCCL_ASYNC_ERROR_HANDLING": "2",
        "TORCH_NCCL_TRACE_BUFFER_SIZE": "2000",
        "TORCH_NCCL_DUMP_ON_TIMEOUT": "1",
        "TORCH_NCCL_DEBUG_INFO_TEMP_FILE": "/runs/r/nccl_trace_rank_",
        "TORCH_NCCL_BLOCKING_WAIT": None,
    }
    # NCCL's watchdog waits longer than the host's own bounded wait: the run's failure path reports first
    assert nccl_group_timeout(30) == 90 and nccl_group_timeout(600) == 900


def test_a_users_own_nccl_and_allocator_settings_are_kept():
    environ = {"NCCL_ASYNC_ERROR_HANDLING": "3"}  # the older name torch still reads
    nccl_error_handling(environ)
    assert environ == {
        "NCCL_ASYNC_ERROR_HANDLING": "3",
        "TORCH_NCCL_TRACE_BUFFER_SIZE": "2000",
        "TORCH_NCCL_DUMP_ON_TIMEOUT": "1",
    }
    environ = {}
    cuda_allocator_settings(environ)
    assert environ == {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
    for own in ({"PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:512"}, {"PYTORCH_ALLOC_CONF": "backend:native"}):
        environ = dict(own)
        cuda_allocator_settings(environ)
        assert environ == own


# -- point 6: NCCL's own streams at high priority, for the training group ---------------------------------
def test_only_nccl_groups_get_options():
    assert training_group_options("gloo") is None


@gpu
@needs_cuda
def test_the_training_group_asks_nccl_for_high_priority_streams():
    assert training_group_options("nccl").is_high_priority_stream is True


# -- point 7: no model-sized float64 / fp32 copies on the device -----------------------------------------
def test_squared_norm_in_chunks():
    """A float64 sum of squares chunk by chunk: the one-piece sum's value (up to float64 rounding),
    exactly so for a vector that fits one chunk (the deterministic CPU runs' numbers unchanged)."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(10_001, generator=g)
    whole = x.double().square().sum()
    assert squared_norm(x, chunk=1000).dtype == torch.float64
    assert float(squared_norm(x, chunk=1000)) == pytest.approx(float(whole), rel=1e-12)
    assert torch.equal(squared_norm(x), whole)


def test_final_parameters_are_gathered_to_the_host_in_chunks(monkeypatch):
    """Every rank's fp32 master shard, gathered a few entries at a time (the real collective is
    replaced by one that reads the other ranks' shards), lands in order in a host vector cut to
    the model's size (the padding dropped)."""
    world, shard, numel = 3, 7, 19  # padded to 21
    masters = [torch.arange(r * shard, (r + 1) * shard, dtype=torch.float32) + 0.5 for r in range(world)]
    calls = []

    def all_gather_into(full, own, group):
        start, n = own.storage_offset(), own.numel()
        calls.append(n)
        full.view(world, n).copy_(torch.stack([m[start : start + n] for m in masters]))

    monkeypatch.setattr(sync_module, "all_gather_into", all_gather_into)
    opt = ShardedAdamW(masters[1], [], lambda step, mb: 1e-3)
    syncer = Syncer(torch.zeros(world * shard), opt, 1, world, None, TraceRecorder(1, enabled=False))
    out = syncer.gather_committed_to_host(numel, chunk=3)
    assert calls == [3, 3, 1]
    assert out.device.type == "cpu" and out.dtype == torch.float32
    assert torch.equal(out, (torch.arange(numel, dtype=torch.float32) + 0.5))


# -- on a GPU -----------------------------------------------------------------------------------------------
@pytest.mark.integration
@gpu
@needs_cuda
def test_allocator_settings_reach_a_worker_before_cuda_starts():
    code = (
        "from acco.harness.launch import cuda_allocator_settings\n"
        "cuda_allocator_settings()\n"
        "import torch\n"
        "x = torch.zeros(1 << 20, device='cuda')\n"
        "print(any(s.get('is_expandable') for s in torch.cuda.memory._snapshot()['segments']))\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF")}
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "True", proc.stderr[-2000:]


@pytest.mark.integration
@gpu
@needs_cuda
def test_more_ranks_than_gpus_is_refused_before_any_worker_starts(tmp_path):
    out = tmp_path / "run"
    proc = run_train([*SMALL_LM, "device=cuda", f"world_size={GPUS + 1}", f"out_dir={out}"], expect=2)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "GPU(s) visible" in lines[0], proc.stderr
    assert not out.exists()


@pytest.mark.integration
@gpu
@needs_cuda
@pytest.mark.parametrize(
    "method", [["method=diloco", "method.sync_every=4"], ["method=streaming_diloco", "method.fragments=2"]]
)
def test_local_methods_on_a_gpu_with_their_outer_state_in_host_memory(method, tmp_path):
    """φ in host memory, a fragment at a time on the GPU: the run still equals the reference."""
    from acco.train.reference import replay

    out = str(tmp_path / "run")
    run_train([*method, *SMALL_LM, "device=cuda", "train.steps=8", "train.save_final_params=true", f"out_dir={out}"])
    run = load_run(out)
    assert run["summary"]["status"] == "completed"
    final = torch.load(os.path.join(out, "final_params.pt")).float()
    assert final.device.type == "cpu"
    ref = replay(dict(run["cfg"], device="cpu"))
    change = (ref.history[-1] - ref.history[0]).norm()
    assert float((final - ref.history[-1]).norm() / change) < 0.10


@pytest.mark.integration
@gpu
@needs_two
def test_a_hung_rank_over_nccl_is_named_and_its_peer_is_not_aborted(tmp_path):
    """Point 4 on NCCL: rank 1 stops outside any collective; rank 0's host wait for its step's
    collectives gives up after dist.step_timeout_s and raises (acco.engine.device_clock.wait_for)
    before NCCL's watchdog, which waits longer, would abort it."""
    out = tmp_path / "run"
    run_train(
        [
            "method=ddp",
            *SMALL_LM,
            "device=cuda",
            "world_size=2",
            "train.steps=12",
            "fault.hang_rank=1",
            "fault.at_step=3",
            "dist.step_timeout_s=10",
            f"out_dir={out}",
        ],
        expect=1,
    )
    with open(out / "summary.json") as f:
        s = json.load(f)
    assert s["status"] == "failed" and s["failed_rank"] == 1 and "rank 1 hung" in s["error"], s
    assert s["exit_codes"][0] != -6, s  # not the watchdog's SIGABRT
    assert any(e and "rank 0" in e for e in s["rank_errors"]), s  # rank 0's own report: its timeout
