"""Memory and cost before a paper-scale job is submitted: the per-rank model state estimated from
the model on the meta device equals Table 1's formulas and what a real run reports in
summary.json; a run that cannot fit stops with one line naming the figure and a setting that
fits; `experiments/reproduce.py <id> --scale paper --dry-run` prints a row per run and submits
nothing."""

from __future__ import annotations

import importlib.util
import math
import os
import re

import pytest
import yaml

from acco.config.experiments import compose, expand_runs
from acco.harness.run import plan as run_plan
from acco.train import memory as me
from analysis.tables import TABLE1_FORMULAS, paper_block, round_half_up
from tests.helpers.paths import ROOT
from tests.helpers.runs import SMALL_LM, load_run, run_train

PAPER_EXPERIMENTS = ["fig4", "fig5", "fig6", "fig7", "fig8", "fig9", "fig10", "fig11"]


def table1_point():
    p = paper_block("table1")
    return float(p["K"]), int(p["N"]), float(p["psi"]), p["gb"]


# -- Table 1 -----------------------------------------------------------------------------------
def test_model_state_equals_table1_formulas():
    K, N, psi, paper_gb = table1_point()
    groups = ((int(psi),),)  # one flat vector of Ψ entries: Ψ/N shards exactly
    assert int(psi) % N == 0

    def gb(layout):
        state = me.model_states(groups, N, layout)
        return max(me.model_state_total(s) for s in state) / me.GB

    # the engine's flat methods on GPU (dpu, wp, acco, and ddp impl=flat, which holds the buffer too)
    assert me.FLAT_BF16.K == K
    acco = gb(me.FLAT_BF16)
    assert acco == pytest.approx(TABLE1_FORMULAS["acco"][0](K, N) * psi / me.GB, rel=1e-12)
    for key in ("dpu", "wp", "acco"):
        assert round_half_up(acco) == paper_gb[key]
    # Table 1's ZeRO-1 (bf16 parameters and gradients, no buffer): the paper's DDP baseline
    zero1 = me.StateLayout("ZeRO-1 as in Table 1", 2, 2, 0, 4)
    assert gb(zero1) == pytest.approx(TABLE1_FORMULAS["zero1"][0](K, N) * psi / me.GB, rel=1e-12)
    assert round_half_up(gb(zero1)) == paper_gb["zero1"]
    # PyTorch's own baseline keeps fp32 parameters and gradients and no separate master:
    # (4 + 4 + 8/N)Ψ, plus a 4-byte step count per tensor of the rank's partition
    tensors = 10 * N
    even = ((int(psi) // tensors,) * tensors,)
    states = me.model_states(even, N, me.TORCH_ZERO1)
    assert {me.model_state_total(s) for s in states} == {int((4 + 4 + 8 / N) * psi) + 4 * 10}


def test_paper_runs_flat_estimate_is_table1_at_their_size():
    """A real paper config (fig7's ACCO run, GPT-Neo 125M on 32 GPUs): the model state is the
    Table 1 formula of DPU/WP/ACCO at the model's parameter count padded to 32 shards."""
    cfg = compose(["experiment=fig7/paper", "method=acco", "train.grad_dtype=bf16"])  # Table 1's bf16 buffers
    K, _, _, _ = table1_point()
    est = me.estimate(cfg, 32)
    shape = me.model_shape(cfg)
    padded = 32 * math.ceil(shape.params / 32)
    assert me.model_state_total(est.model_state) == pytest.approx(TABLE1_FORMULAS["acco"][0](K, 32) * padded)
    # as configured, the figure's flat methods accumulate and reduce gradients in fp32 like its torch
    # DDP baseline: 6 bytes more per entry (the fp32 accumulator beside the bf16 micro-batch gradient,
    # and the buffer in fp32)
    as_run = me.estimate(compose(["experiment=fig7/paper", "method=acco"]), 32)
    assert me.model_state_total(as_run.model_state) - me.model_state_total(est.model_state) == 6 * padded
    # GPT-Neo 125M: tied embeddings count once (125.2M with 1024 positions)
    assert 124e6 < shape.params < 126e6


# -- a real run ---------------------------------------------------------------------------------
@pytest.mark.integration
@pytest.mark.parametrize("method,world", [("ddp", 2), ("acco", 3), ("diloco", 2), ("streaming_diloco", 3)])
def test_model_state_equals_a_real_runs_summary(tmp_path, method, world):
    """The estimate from the run's own config (model on the meta device, nothing trained) equals,
    byte for byte and rank by rank, what the run's ranks report: PyTorch's ZeRO partition of whole
    tensors (ddp), the flat padded shards (acco, 3 ranks pad the last shard), the local methods'
    unsharded inner AdamW with φ, the outer momentum shards and one fragment's fp32 staging."""
    out = str(tmp_path / "run")
    run_train(
        [
            f"method={method}",
            *SMALL_LM,
            f"world_size={world}",
            "train.steps=1",
            "train.accum=1",
            "train.deterministic=true",
            f"out_dir={out}",
        ]
    )
    run = load_run(out)
    assert run["summary"]["status"] == "completed"
    layout = me.state_layout(run["cfg"], gpu=False)
    estimated = me.model_states(me.model_shape(run["cfg"]).groups, world, layout)
    keys = ("param_bytes", "grad_bytes", "comm_buffer_bytes", "optimizer_state_bytes")
    measured = [{k: r[k] for k in keys} for r in run["summary"]["per_rank"]]
    assert estimated == measured
    if method == "ddp":  # the partition is uneven: the check really is per rank
        assert len({r["optimizer_state_bytes"] for r in measured}) > 1


# -- activations -----------------------------------------------------------------------------------
def test_local_methods_global_parameters_are_not_device_memory_on_a_gpu():
    """On a GPU the local methods keep φ (fp32, the whole model) in host memory
    (acco/engine/local_rounds.py), so the per-GPU estimate leaves its 4P bytes out; on CPU they count."""
    cfg = compose(["method=streaming_diloco", "world_size=2"])
    groups = me.model_shape(cfg).groups
    on_gpu, on_cpu = (me.model_states(groups, 2, me.state_layout(cfg, gpu=g))[0] for g in (True, False))
    assert me.state_layout(cfg, gpu=True).phi_on_host and not me.state_layout(cfg, gpu=False).phi_on_host
    padded = on_cpu["param_bytes"] // 4  # fp32 on CPU: 4 bytes per (padded) entry
    # bf16 on GPU: the inner AdamW's K per entry is the same; only φ moves
    assert on_cpu["optimizer_state_bytes"] - on_gpu["optimizer_state_bytes"] == 4 * padded


def test_activation_formula_is_korthikanti_for_a_gelu_model():
    """GPT-Neo (GELU MLP of width 4h, eager attention): per layer 34·sbh + 5·a·s²·b bytes at 16
    bit; with checkpointing 2·sbh per layer plus one layer recomputed; fp32 compute doubles it."""
    cfg = compose(["experiment=fig7/paper", "method=acco"])
    shape = me.model_shape(cfg)
    assert shape.intermediate == 4 * shape.hidden and shape.attention == "eager"
    s, b, h, a, L = 1024, 3, shape.hidden, shape.heads, shape.layers
    full = me.activation_bytes(shape, s, b, checkpointing=False)["layers"]
    layer = 34 * s * b * h + 5 * a * s * s * b
    assert full == L * layer + 4 * s * b * h
    ckpt = me.activation_bytes(shape, s, b, checkpointing=True)["layers"]
    assert ckpt == L * 2 * s * b * h + layer + 4 * s * b * h
    assert me.activation_bytes(shape, s, b, False, act_bytes=4)["layers"] == 2 * full


# -- the check before submission --------------------------------------------------------------------
FIG8_ACCO = [
    "experiment=fig8/paper",
    "method=acco",
    "layout=1x8",
    "launcher=slurm",
    "device=auto",
]  # device=auto: this machine has no GPU; the estimate is at GPU precision


@pytest.mark.integration
def test_a_run_that_cannot_fit_stops_with_one_line(tmp_path):
    proc = run_train([*FIG8_ACCO, "launcher.gpu_mem_gb=1", f"results_root={tmp_path}"], expect=2, timeout=300)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    m = re.fullmatch(
        r"error: fig8 run acco_layout=1x8: estimated ([\d.]+) GB per GPU exceeds the profile's "
        r"gpu_mem_gb=1: (.+)",
        lines[0],
    )
    assert m, lines[0]
    cfg = compose([*FIG8_ACCO, "launcher.gpu_mem_gb=1"])
    assert float(m.group(1)) == pytest.approx(me.estimate(cfg, 8).total_gb, abs=0.05)
    assert "GPUs with more memory" in m.group(2)  # 2.7B parameters: nothing here fits in 1 GB
    assert not os.listdir(tmp_path)  # nothing half-written


def test_the_line_names_a_setting_that_fits():
    """Between the estimates at micro-batch 1 and at the config's 4, the check names a smaller
    micro-batch (or checkpointing), and the run with that setting passes the check."""
    cfg = compose([*FIG8_ACCO])
    small, large = me.estimate(cfg, 8, micro_batch=1).total_gb, me.estimate(cfg, 8).total_gb
    assert small < large
    limit = (small + large) / 2
    cfg["launcher"]["gpu_mem_gb"] = limit
    problem = me.fit_problem(cfg, 8)
    assert problem and f"gpu_mem_gb={limit:g}" in problem
    fixes = re.findall(r"set (?:a smaller )?([\w.]+)=(\w+)", problem)
    assert fixes, problem
    for key, value in fixes:
        fixed = yaml.safe_load(yaml.safe_dump(cfg))
        section, name = key.split(".")
        fixed[section][name] = yaml.safe_load(value)
        assert me.fit_problem(fixed, 8) is None, (key, value)


@pytest.mark.integration
def test_a_run_that_fits_passes_the_memory_check(tmp_path):
    proc = run_train([*FIG8_ACCO, f"results_root={tmp_path}"], expect=None, timeout=300)
    assert "estimated" not in proc.stderr and "gpu_mem_gb" not in proc.stderr, proc.stderr


# -- the dry run ---------------------------------------------------------------------------------------
def load_reproduce():
    spec = importlib.util.spec_from_file_location("reproduce", os.path.join(ROOT, "experiments", "reproduce.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.integration
@pytest.mark.parametrize("exp", PAPER_EXPERIMENTS)
def test_dry_run_prints_a_row_per_run_and_submits_nothing(exp, tmp_path, capsys, monkeypatch):
    reproduce = load_reproduce()
    import subprocess

    monkeypatch.setattr(subprocess, "call", lambda *a, **k: pytest.fail(f"dry run started {a}"))
    code = reproduce.main([exp, "--scale", "paper", "--dry-run", "--results", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert not os.listdir(tmp_path)
    runs = expand_runs(compose([f"experiment={exp}/paper"])["experiment"])
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("run "))
    cols = lines[header].split()
    assert all(c in lines[header] for c in ("GPUs", "nodes", "GB/GPU", "hours", "GPU-hours"))
    rows = lines[header + 1 : header + 1 + len(runs)]
    assert len(rows) == len(runs)
    assert any(line.startswith("assumptions: ") and "MFU" in line for line in lines)
    for run, line in zip(runs, rows):
        cfg = compose([f"experiment={exp}/paper", *run])
        plan = run_plan.plan(cfg)
        cells = line.split()
        assert cells[0] == os.path.basename(cfg["out_dir"])
        assert len(cells) == len(cols)
        gpus, nodes = int(cells[cols.index("GPUs")]), int(cells[cols.index("nodes")])
        assert (gpus, nodes) == (plan["gpus"], plan["nodes"])
        assert float(cells[cols.index("GPU-hours")]) == pytest.approx(plan["gpu_hours"], abs=0.051)
        assert float(cells[cols.index("hours")]) == pytest.approx(plan["wall_clock_h"], abs=0.0051)
        assert float(cells[cols.index("GB/GPU")]) == pytest.approx(plan["memory_gb"], abs=0.051)
        assert plan["gpu_hours"] == pytest.approx(plan["wall_clock_h"] * gpus)
        assert plan["memory_gb"] > plan["model_state_gb"] > 0


def test_dry_run_steps_follow_the_token_budget():
    """fig11 trains on a 6e9-token budget: DDP reaches it after ⌈6e9 / (8·2·24·1024)⌉ steps
    (the config's numbers), and the wall-clock is that many DDP steps of c + m."""
    cfg = compose(["experiment=fig11/paper", "method=ddp"])
    plan = run_plan.plan(cfg)
    per_step = 8 * cfg["train"]["accum"] * cfg["data"]["micro_batch_size"] * cfg["data"]["seq_len"]
    assert plan["steps"] == math.ceil(float(cfg["train"]["tokens"]) / per_step)
    assert plan["wall_clock_h"] * 3600 == pytest.approx(plan["steps"] * (plan["compute_per_round_s"] + plan["sync_s"]))
