"""Every experiment composes at every scale (plain Hydra composition: `experiment=<id>/<scale>`, the
experiment's per-method file merged last; the rehearsal: the paper file plus sizes), its key
hyperparameters are the paper's, and what experiments/train.py prints with --cfg job is what runs.

Here the tests in-process; those that start processes (marked integration) are in
tests/integration/test_experiments.py."""

from __future__ import annotations

import pytest

from acco.config.experiments import CONF_DIR, compose, expand_runs
from acco.config.validate import ConfigError, check_overrides, parse_layout
from acco.harness.run.validate import validate

EXPERIMENTS = [
    "fig4",
    "fig5",
    "fig6",
    "fig7",
    "fig8",
    "fig9",
    "fig10",
    "fig11",
    "table1",
    "table2",
    "table3",
    "beyond_diloco",
]
TRAINING = ["fig4", "fig5", "fig6", "fig7", "fig8", "fig9", "fig10", "fig11", "beyond_diloco"]


def cfg_of(exp, scale, *extra):
    return compose([f"experiment={exp}/{scale}", *extra])


def world(cfg):
    return validate(dict(cfg, out_dir="/nonexistent/run"), cuda_available=True)


def committed_batch(cfg):
    """Sequences per committed step across all workers (ACCO: two stages of `accum` each)."""
    stages = 2 if cfg["method"]["name"] == "acco" else 1
    return world(cfg) * cfg["data"]["micro_batch_size"] * cfg["train"]["accum"] * stages


@pytest.mark.parametrize("scale", ["paper", "cpu", "rehearsal"])
@pytest.mark.parametrize("exp", EXPERIMENTS)
def test_every_experiment_composes(exp, scale):
    cfg = cfg_of(exp, scale)
    assert cfg["experiment"]["id"] == exp and cfg["scale"] == scale
    runs = expand_runs(cfg["experiment"])
    if exp in TRAINING:
        assert runs, f"{exp} at {scale} lists no runs"
        for overrides in runs:  # every listed run composes and validates
            run = cfg_of(exp, scale, *overrides)
            assert world(run) >= 1
            assert run["out_dir"].startswith(f"results/{scale}/{exp}/{run['method']['name']}")
    else:
        assert runs == []


def test_fig5_tinystories_setting():
    cfg = cfg_of("fig5", "paper", "method=ddp")
    m = cfg["model"]["config"]
    assert (m["hidden_size"], m["num_layers"], m["num_heads"]) == (768, 4, 16)
    assert cfg["data"]["source"]["hub_id"] == "roneneldan/TinyStories"
    assert cfg["data"]["tokenizer"] == {"kind": "bpe", "vocab_size": 10000}
    assert cfg["data"]["seq_len"] == 512 and world(cfg) == 8
    assert cfg["optim"]["lr"] == 5e-4 and cfg["optim"]["weight_decay"] == 0.1
    assert cfg["optim"]["betas"] == [0.9, 0.95]
    runs = expand_runs(cfg["experiment"])
    dpu = [r for r in runs if "method=dpu" in r]
    assert sorted({r[1] for r in dpu}) == ["method.warmup_steps=0", "method.warmup_steps=40", "method.warmup_steps=500"]
    assert len(dpu) == 9  # 3 warmups x 3 seeds, as the paper averaged
    # the same committed batch for every method (ACCO accumulates half as much per stage)
    batches = {m: committed_batch(cfg_of("fig5", "paper", f"method={m}")) for m in ("ddp", "dpu", "acco")}
    assert len(set(batches.values())) == 1
    # panel (b): twice the budget
    steps = {int(o.split("=")[1]) for r in runs for o in r if o.startswith("train.steps=")}
    assert steps == {2 * cfg["train"]["steps"]}


def test_fig7_fig11_openwebtext_setting():
    for exp, layout, tokens, paper_steps in (("fig7", "4x8", 50e9, 31789), ("fig11", "1x8", 6e9, 15259)):
        for method, accum in (("ddp", 2), ("acco", 1)):
            cfg = cfg_of(exp, "paper", f"method={method}")
            m = cfg["model"]["config"]
            assert (m["hidden_size"], m["num_layers"], m["max_position_embeddings"]) == (768, 12, 1024)
            assert cfg["data"]["source"]["hub_id"] == "Skylion007/openwebtext"
            assert cfg["data"]["micro_batch_size"] == 24 and cfg["data"]["seq_len"] == 1024
            assert cfg["layout"] == layout and world(cfg) == parse_layout(layout)[0] * parse_layout(layout)[1]
            o = cfg["optim"]
            assert (o["lr"], o["weight_decay"], o["betas"], o["schedule"]) == (6e-4, 0.1, [0.9, 0.95], "cosine")
            assert cfg["train"]["accum"] == accum
            # the paper's budget in tokens, not in steps (adaptive ACCO steps hold more tokens)
            assert cfg["train"]["tokens"] == tokens and isinstance(cfg["train"]["tokens"], int)
            assert cfg["train"]["steps"] is None and cfg["train"].get("samples") is None
            nominal_steps = tokens / (committed_batch(cfg) * cfg["data"]["seq_len"])
            assert nominal_steps == pytest.approx(paper_steps, rel=1e-3)
            assert cfg["final_eval"]["lambada"] and cfg["final_eval"]["heldout"]
            assert cfg["train"]["trace_steps"] == [100, 110] and cfg["train"]["checkpoint_every"] == 1000
    # the CPU scale sized in tokens too (issue 32): 100 DDP steps of 128-token sequences, the same
    # tokens per committed step for both methods (deterministic ACCO), so --cfg job shows the budget
    for exp in ("fig7", "fig11"):
        by_method = {method: cfg_of(exp, "cpu", f"method={method}") for method in ("ddp", "acco")}
        for cfg in by_method.values():
            assert (cfg["train"]["steps"], cfg["train"]["tokens"]) == (None, 819200)
            assert cfg["train"]["deterministic"] is True
        tokens_per_step = {m: committed_batch(c) * c["data"]["seq_len"] for m, c in by_method.items()}
        assert tokens_per_step["ddp"] == tokens_per_step["acco"] == 819200 // 100


def test_fig8_finetuning_setting():
    for layout in ("1x8", "2x4"):
        for method, accum in (("ddp", 4), ("dpu", 4), ("acco", 2)):
            cfg = cfg_of("fig8", "paper", f"method={method}", f"layout={layout}")
            assert cfg["model"]["hub_id"] == "EleutherAI/gpt-neo-2.7B" and cfg["model"]["pretrained_path"]
            assert cfg["data"]["source"]["hub_id"] == "tatsu-lab/alpaca"
            assert cfg["data"]["micro_batch_size"] == 4 and cfg["train"]["accum"] == accum
            assert committed_batch(cfg) == 128
            assert cfg["optim"]["lr"] == 2e-5 and cfg["optim"]["weight_decay"] == 0.0
            assert cfg["optim"]["schedule"] == "cosine" and cfg["optim"]["betas"] == [0.9, 0.95]  # Table 5
            # the official loop: 50,000 global micro-batches of 4 (~1563 steps at batch 128)
            assert cfg["train"]["samples"] == 200000 and cfg["train"]["steps"] is None
            assert cfg["train"]["samples"] / committed_batch(cfg) == pytest.approx(1562.5)
            if method == "dpu":
                assert cfg["method"]["warmup_steps"] == 50
    runs = expand_runs(cfg_of("fig8", "paper")["experiment"])
    assert {tuple(r) for r in runs} == {
        (f"method={m}", f"layout={lay}") for m in ("ddp", "dpu", "acco") for lay in ("1x8", "2x4")
    }
    cpu = cfg_of("fig8", "cpu", "method=acco")
    assert cpu["model"]["pretrained_from"]["experiment"] == "fig7"  # starts from the CPU pretraining
    assert cpu["optim"]["betas"] == [0.9, 0.95]
    # sized in samples as the paper's fig8 (a step budget let adaptive ACCO train 2.2x DDP's samples)
    for method in ("ddp", "acco", "dpu"):
        train = cfg_of("fig8", "cpu", f"method={method}")["train"]
        assert (train["steps"], train["samples"]) == (None, 2560), method


def test_fig9_fig10_fig4_and_tables():
    for scale in ("paper", "cpu"):
        cfg = cfg_of("fig9", scale, "method=acco")
        assert world(cfg) == 4 and cfg["hetero"] == {"slow_rank": 3, "factor": 4.0}
        assert cfg["train"]["deterministic"] is False  # fast workers keep accumulating
        runs = {tuple(sorted(r)) for r in expand_runs(cfg["experiment"])}
        if scale == "paper":
            assert runs == {("method=ddp",), ("method=acco",)}
        else:  # 5 paired seeds against the flat DDP (blocking and overlapped) and PyTorch's DDP, 3 virtual
            overlapped = ("method.bucket_mb=0.135", "method.impl=flat", "method.overlap_backward=True", "method=ddp")
            torch_ddp = (
                "method.bucket_mb=0.135",
                "method.comm_hook=reduce_scatter_bf16",
                "method.impl=torch",
                "method=ddp",
            )
            measured = {("method.impl=flat", "method=ddp"), ("method=acco",), overlapped, torch_ddp}
            assert {r for r in runs if not any(o.startswith("clock.") for o in r)} == {
                tuple(sorted((*m, f"seed={s}"))) for m in measured for s in range(5)
            }
            virtual = [dict(o.split("=", 1) for o in r) for r in runs if "clock.mode=virtual" in r]
            arm = {"True": "ddp_overlap", None: None}
            assert sorted(
                (v["method"], arm[v.get("method.overlap_backward")] or "", v["seed"]) for v in virtual
            ) == sorted(
                (m, a, str(s)) for m, a in (("acco", ""), ("ddp", ""), ("ddp", "ddp_overlap")) for s in range(3)
            )
            # the slow rank is slow by the clock (no sleep), both methods over the same samples
            assert {(v["clock.micro_batch_s"], v["train.samples"]) for v in virtual} == {("0.2", "4800")}
            # the measured runs' design (issue 32): the untied model at the paper's rate, in samples
            assert cfg["model"]["name"] == "gptneo_tiny_untied" and cfg["optim"]["lr"] == 5e-4
            assert (cfg["train"]["steps"], cfg["train"]["samples"]) == (None, 4800)
        # fig10: DPU with 1 vs 2 micro-batches per step, over the same samples (accum 1: 2x steps)
        runs = [cfg_of("fig10", scale, *r) for r in expand_runs(cfg_of("fig10", scale)["experiment"])]
        assert {c["train"]["accum"] for c in runs} == {1, 2} and {c["method"]["name"] for c in runs} == {"dpu"}
        if scale == "paper":
            by_accum = {c["train"]["accum"]: c for c in runs}
            assert by_accum[1]["train"]["steps"] == 2 * by_accum[2]["train"]["steps"]
        else:  # the budget ladder: both arms at every rung, sized in samples, the same warmup samples
            assert_fig10_ladder(runs)
    fig4 = cfg_of("fig4", "paper")
    llama = fig4["model"]["config"]
    assert (llama["hidden_size"], llama["num_hidden_layers"], llama["intermediate_size"]) == (4096, 32, 11008)
    # Llama-2's own tokenizer (32000 ids = the embedding), not OpenWebText's GPT-Neo one (50257)
    assert fig4["data"]["tokenizer"]["hub_id"] == "meta-llama/Llama-2-7b-hf" and llama["vocab_size"] == 32000
    t1 = cfg_of("table1", "cpu")["experiment"]["paper"]
    assert (t1["K"], t1["N"], t1["psi"]) == (12, 64, 7.5e9)
    assert t1["gb"] == {
        "ddp": 120,
        "zero1": 31,
        "zero2": 16,
        "zero3": 2,
        "diloco": 150,
        "slowmo": 150,
        "co2": 180,
        "dpu": 46,
        "wp": 46,
        "acco": 46,
    }
    t2 = cfg_of("table2", "cpu")["experiment"]["paper"]["perplexity"]
    assert t2["1x8"]["acco"] == {"lambada": 47.1, "openwebtext": 24.2}
    assert t2["4x8"]["ddp"] == {"lambada": 44.1, "openwebtext": 21.7}
    rows = cfg_of("table3", "cpu")["experiment"]["paper"]["rows"]
    assert [(r["ddp_s"], r["acco_s"]) for r in rows] == [
        (4 * 3600 + 41 * 60, 4 * 3600 + 25 * 60),
        (14 * 3600 + 41 * 60, 10 * 3600 + 55 * 60),
        (43 * 60, 25 * 60),
        (3 * 3600 + 46 * 60, 29 * 60),
    ]


def warmup_samples(cfg: dict) -> int:
    """optim.warmup_steps in samples: a budgeted run counts them in nominal steps (acco/train/budget.py)."""
    per_step = world(cfg) * cfg["train"]["accum"] * cfg["data"]["micro_batch_size"]
    return cfg["optim"]["warmup_steps"] * per_step * (2 if cfg["method"]["name"] == "acco" else 1)


def assert_fig10_ladder(runs: list[dict]) -> None:
    rungs: dict[int, dict] = {}
    for c in runs:
        assert c["train"]["steps"] is None and c["train"]["samples"]
        rungs.setdefault(c["train"]["samples"], {}).setdefault(c["train"]["accum"], set()).add(c["seed"])
    budgets = sorted(rungs)
    assert [b // budgets[0] for b in budgets] == [1, 2, 4, 8]
    assert all(arms[1] == arms[2] and len(arms[1]) == 3 for arms in rungs.values())  # paired, fixed n = 3
    assert len({warmup_samples(c) for c in runs}) == 1


def test_fig10_ladder_reads_no_sample_twice():
    """The top rung's samples are under one epoch of the synthetic training set (no re-reading)."""
    from omegaconf import OmegaConf

    from acco.tasks.lm import prepare_lm_data

    runs = [cfg_of("fig10", "cpu", *r) for r in expand_runs(cfg_of("fig10", "cpu")["experiment"])]
    top = max(c["train"]["samples"] for c in runs)
    blocks = prepare_lm_data(OmegaConf.create(runs[0]["data"])).train_blocks.shape[0]
    assert top < 0.5 * blocks


def test_fig6_and_lr_sweep_share_one_setting():
    """fig6's rate is chosen on lr_sweep's DDP runs: the two compose the same DDP run at fig6's rate
    (so the sweep's runs at that rate are fig6's), both sized in samples."""
    from acco.config.experiments import NOT_THE_RUN, changed_keys

    fig6 = cfg_of("fig6", "cpu", "method=ddp", "seed=0")
    sweep = cfg_of("lr_sweep", "cpu", "method=ddp", "train.accum=2", f"optim.lr={fig6['optim']['lr']}", "seed=0")
    assert fig6["train"]["steps"] is None and fig6["train"]["samples"] == 4800
    assert changed_keys(sweep, fig6) == [] and "experiment" in NOT_THE_RUN
    assert fig6["model"]["name"] == sweep["model"]["name"] == "gptneo_tiny_untied"


@pytest.mark.parametrize("exp", TRAINING)
def test_cpu_scale_is_small(exp):
    for overrides in expand_runs(cfg_of(exp, "cpu")["experiment"]):
        cfg = cfg_of(exp, "cpu", *overrides)
        assert 1 <= world(cfg) <= 4 and cfg["device"] == "auto"
        assert cfg["model"]["name"] in ("gptneo_tiny", "gptneo_tiny_untied", "llama_tiny")
        # fig5 (b) and fig10 accum 1: twice the 150-step budget; beyond_diloco's adaptive ACCO: a
        # sample budget (DDP's 300 steps) instead; fig7 and fig11: a budget in tokens
        train, per_step = cfg["train"], world(cfg) * cfg["data"]["micro_batch_size"] * 2
        samples = train["samples"] or (train["tokens"] and train["tokens"] / cfg["data"]["seq_len"])
        budget = train["steps"] or samples / per_step
        assert budget <= 300


def test_user_overrides_win_over_the_experiment():
    cfg = cfg_of("fig5", "cpu", "method=acco", "train.steps=3", "optim.lr=0.01")
    assert cfg["train"]["steps"] == 3 and cfg["optim"]["lr"] == 0.01
    assert cfg["train"]["accum"] == 1  # still the experiment's per-method value
    assert cfg_of("fig5", "cpu", "method=acco", "train.accum=5")["train"]["accum"] == 5


def test_experiment_with_another_logger_composes():
    """`experiment=... logger=wandb`: the logger group is Hydra's like any other (the old merge layer
    re-applied `logger=wandb` after composing, as the string "wandb" in place of the group)."""
    cfg = cfg_of("fig5", "cpu", "method=acco", "logger=wandb")
    assert cfg["logger"]["name"] == "wandb" and cfg["logger"]["mode"] == "offline"
    assert cfg["train"]["accum"] == 1 and cfg["optim"]["lr"] == 5e-4  # and the experiment's settings


def test_a_group_chosen_on_the_command_line_wins_over_the_experiments():
    cfg = cfg_of("fig5", "paper", "method=ddp", "model=gptneo_tiny")
    assert cfg["model"]["name"] == "gptneo_tiny" and cfg["data"]["name"] == "tinystories"
    assert cfg["train"]["accum"] == 2 and cfg["world_size"] == 8


@pytest.mark.parametrize(
    "argv", [["+experiment=fig5", "scale=cpu"], ["experiment=fig5"], ["experiment=fig5/cpu", "scale=paper"]]
)
def test_the_old_experiment_form_names_the_new_one(argv):
    with pytest.raises(ConfigError, match=r"^the scale is part of the experiment choice now: use experiment=fig5/"):
        check_overrides(argv, CONF_DIR)
    check_overrides(["experiment=fig5/cpu", "method=acco"], CONF_DIR)
    with pytest.raises(ConfigError, match="unknown experiment 'fig5/huge'.*fig5/rehearsal"):
        check_overrides(["experiment=fig5/huge"], CONF_DIR)
