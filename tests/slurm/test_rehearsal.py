"""The dress rehearsal (experiment=<id>/rehearsal): every experiment's paper configuration with only sizes shrunk.

* the overlay changes nothing but what it names, and names only sizes, paths and placement (every
  experiment, every run; no training);
* the rehearsal's local data are in the real datasets' layouts and load through the same loaders;
* fig7 (pretraining, LAMBADA + held-out evaluations, saved model) and fig8 (fine-tuning a saved
  pretrained folder) run through the real local Slurm cluster and end completed, and
  make_figures.py draws fig7, fig8, Table 2 and Table 3 from them;
* a tokenizer with more ids than the model's embedding stops the run before it starts (defect 7);
* fig7 configured with the paper's hub ids (no local paths) runs with the hub switched off from a
  hub cache laid out as the hub client lays it out, prepared by experiments/prepare_data.py, through
  train.py and through the local Slurm cluster (issue 29, point 3).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pandas as pd
import pytest

from acco.config.experiments import compose, expand_runs
from acco.config.overlay import ALLOWED, allowed, check_maps, map_run_specs, overlay_problems
from acco.harness.rehearsal.make import FOLDERS, make_rehearsal_data
from acco.harness.run.validate import validate
from tests.helpers.paths import ROOT
from tests.helpers.runs import load_run, run_train

# the tests on the local Slurm cluster share one pytest-xdist worker (tests/conftest.py)
pytestmark = pytest.mark.xdist_group("slurm")

TRAINING = ["fig4", "fig5", "fig6", "fig7", "fig8", "fig9", "fig10", "fig11", "beyond_diloco"]
# what differs between a rehearsal run and its paper run without the overlay naming it


@pytest.fixture(scope="module")
def rehearsal_data(tmp_path_factory):
    """The rehearsal's local data, written once for this module; the experiments find it through
    $ACCO_REHEARSAL_DATA (conf/experiment/*.yaml)."""
    out = tmp_path_factory.mktemp("rehearsal-data") / "rehearsal"
    manifest = make_rehearsal_data(out, log=lambda *_: None)
    before = os.environ.get("ACCO_REHEARSAL_DATA")
    os.environ["ACCO_REHEARSAL_DATA"] = str(out)
    yield out, manifest
    if before is None:
        os.environ.pop("ACCO_REHEARSAL_DATA", None)
    else:
        os.environ["ACCO_REHEARSAL_DATA"] = before


def flatten(d: dict, prefix: str = "") -> dict:
    out = {}
    for key, value in d.items():
        if isinstance(value, dict) and value:
            out.update(flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def world(cfg: dict) -> int:
    return validate(dict(cfg, out_dir="/nonexistent/run"), cuda_available=True)


# -- the overlay changes only sizes ---------------------------------------------------------------
@pytest.mark.parametrize("exp", TRAINING)
def test_rehearsal_differs_from_paper_only_in_overlay_keys(exp, rehearsal_data):
    base = compose([f"experiment={exp}/rehearsal"])
    maps = base["experiment"].get("rehearsal_maps") or {}
    check_maps(maps, exp)  # (b) the run list's value maps are of sizes, paths or where it runs
    paper_runs = expand_runs(compose([f"experiment={exp}/paper"])["experiment"])
    runs = expand_runs(base["experiment"])
    assert len(runs) == len(paper_runs), "the rehearsal has the paper's runs, nothing added or left out"
    out_dirs = set()
    for paper_run, run in zip(paper_runs, runs):
        # the same run: the same keys in the same order, values mapped by the overlay only
        assert [o.split("=")[0] for o in run] == [o.split("=")[0] for o in paper_run]
        for p, r in zip(paper_run, run):
            if p != r:
                assert p.split("=")[0] in maps, (p, r)
        paper = compose([f"experiment={exp}/paper", *paper_run])
        rehearsal = compose([f"experiment={exp}/rehearsal", *run])
        fr = flatten(rehearsal)
        # (a) the composed configs differ only in sizes, paths and where it runs
        assert overlay_problems(paper, rehearsal) == [], f"{exp} {run}"
        # small enough for the local cluster, on CPU, and every rehearsal run has its own folder
        assert rehearsal["device"] == "cpu" and 1 <= world(rehearsal) <= 4
        assert rehearsal["out_dir"].startswith(f"results/rehearsal/{exp}/")
        out_dirs.add(rehearsal["out_dir"])
        # where the paper reads downloads, the rehearsal reads its local copies
        for key in (
            "data.source.path",
            "data.tokenizer.path",
            "model.pretrained_path",
            "final_eval.lambada_source.path",
        ):
            if fr.get(key):
                assert os.path.exists(fr[key]), f"{exp}: {key}={fr[key]} was not generated"
    assert len(out_dirs) == len(runs)


def test_overlay_refuses_anything_but_sizes_paths_and_placement():
    for key in (
        "optim.lr",
        "optim.betas",
        "method.name",
        "train.accum",
        "data.source.hub_id",
        "model.name",
        "train.deterministic",
        "hetero.factor",
        "seed",
        "link.rate_mbit",
        "model.config.tie_word_embeddings",
    ):
        assert not allowed(key), key
        with pytest.raises(ValueError, match=key.replace(".", r"\.")):
            check_maps({key: {1: 2}}, "figX")
        (problem,) = overlay_problems({"a": 0, **nested(key, 1)}, {"a": 0, **nested(key, 2)})
        assert problem.startswith(f"{key}: 1 -> 2 is not a size")
    for key in ("model.config.hidden_size", "train.tokens", "data.source.path", "dist.step_timeout_s", "layout"):
        assert allowed(key), key
    assert "optim" not in ALLOWED and "method" not in ALLOWED
    # the layer pattern of GPT-Neo may shrink in depth, not change kind
    paper = nested("model.config.attention_types", [[["global", "local"], 6]])
    assert overlay_problems(paper, nested("model.config.attention_types", [[["global", "local"], 1]])) == []
    (problem,) = overlay_problems(paper, nested("model.config.attention_types", [[["global", "global"], 1]]))
    assert "pattern" in problem
    # a paper value the overlay's map does not know is an error, not a paper-sized run
    with pytest.raises(ValueError, match="no rehearsal value for the paper's '8x8'"):
        map_run_specs([{"layout": ["1x8", "8x8"]}], {"layout": {"1x8": "1x2"}}, "figX")
    # a rehearsal composed with a method or optimizer setting of its own is caught
    paper = compose(["experiment=fig5/paper", "method=acco"])
    rehearsal = compose(["experiment=fig5/rehearsal", "method=acco", "optim.lr=0.1", "train.accum=3"])
    assert [p.split(":")[0] for p in overlay_problems(paper, rehearsal)] == ["optim.lr", "train.accum"]


def nested(dotted: str, value) -> dict:
    out = node = {}
    *parents, last = dotted.split(".")
    for part in parents:
        node = node.setdefault(part, {})
    node[last] = value
    return out


def test_rehearsal_overlay_resolves_where_the_paper_sets_values():
    # fig8's DPU warmup comes from the per-method block, the layout from the run list
    dpu = compose(["experiment=fig8/rehearsal", "method=dpu", "layout=2x1"])
    assert dpu["method"]["warmup_steps"] == 4 and dpu["world_size"] == 2
    assert dpu["optim"] == compose(["experiment=fig8/paper", "method=dpu", "layout=2x4"])["optim"]
    # the command line still wins over the overlay
    assert compose(["experiment=fig5/rehearsal", "method=acco", "train.steps=3"])["train"]["steps"] == 3
    # tables have no runs: they compose at the rehearsal scale and list none
    assert expand_runs(compose(["experiment=table3/rehearsal"])["experiment"]) == []


# -- the local data ---------------------------------------------------------------------------------
def test_rehearsal_data_in_the_real_layouts(rehearsal_data, tmp_path):
    out, manifest = rehearsal_data
    from acco.data.sources import load_raw_dataset
    from acco.data.tokenizer import load_pretrained_tokenizer

    owt = load_raw_dataset("Skylion007/openwebtext", str(out / "openwebtext"), "train")
    assert owt.column_names == ["text"] and len(owt) == manifest["sizes"]["openwebtext_documents"]
    assert all(t.count("\n\n") >= 3 for t in owt["text"][:50])  # multi-paragraph pages
    ts = {s: load_raw_dataset("roneneldan/TinyStories", str(out / "tinystories"), s) for s in ("train", "validation")}
    assert len(ts["train"]) == 2000 and len(ts["validation"]) == 200
    alpaca = load_raw_dataset("tatsu-lab/alpaca", str(out / "alpaca"), "train")
    assert set(alpaca.column_names) == {"instruction", "input", "output", "text"}
    assert alpaca[0]["text"].endswith("### Response:\n" + alpaca[0]["output"])
    lam = load_raw_dataset("EleutherAI/lambada_openai", str(out / "lambada_openai"), "test", config_name="default")
    assert lam.column_names == ["text"] and len(lam) == 200
    neo = load_pretrained_tokenizer(str(out / FOLDERS["gpt_neo_tokenizer"]), None)
    assert {"vocab.json", "merges.txt", "tokenizer.json"} <= set(os.listdir(out / FOLDERS["gpt_neo_tokenizer"]))
    assert type(neo).__name__ == "GPT2Tokenizer" and neo.eos_token == "<|endoftext|>"
    assert neo.eos_token_id == len(neo) - 1 == 1023
    llama = load_pretrained_tokenizer(str(out / FOLDERS["llama_tokenizer"]), None)
    assert type(llama).__name__ == "LlamaTokenizer" and len(llama) == 768
    assert (llama.unk_token_id, llama.bos_token_id, llama.eos_token_id) == (0, 1, 2)
    assert llama("a kite")["input_ids"][0] == 1  # Llama adds BOS
    assert llama.decode(llama("Lily found a kite.", add_special_tokens=False)["input_ids"]) == "Lily found a kite."
    model_dir = out / FOLDERS["gpt_neo_model"]
    config = json.loads((model_dir / "config.json").read_text())
    assert config["model_type"] == "gpt_neo" and config["vocab_size"] == len(neo)
    # the fig8 overlay describes the saved model's shape
    fig8 = compose(["experiment=fig8/rehearsal", "method=ddp", "layout=1x2"])["model"]
    assert fig8["pretrained_path"] == str(model_dir)
    assert {k: fig8["config"][k] for k in ("hidden_size", "num_layers", "num_heads", "vocab_size")} == {
        k: config[k] for k in ("hidden_size", "num_layers", "num_heads", "vocab_size")
    }
    # deterministic: a second build gives the same bytes
    again = tmp_path / "again"
    make_rehearsal_data(again, log=lambda *_: None)
    for rel in manifest["files"]:
        assert (again / rel).read_bytes() == (out / rel).read_bytes(), rel


# -- defect 7: a tokenizer larger than the model's embedding -------------------------------------------
def one_line_error(args, tmp_path):
    proc = run_train([*args, f"results_root={tmp_path}"], expect=2, timeout=120)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    assert not any(tmp_path.iterdir())  # nothing written, no worker started
    return lines[0]


@pytest.mark.integration
def test_tokenizer_larger_than_the_embedding_stops_before_anything(rehearsal_data, tmp_path):
    out, _ = rehearsal_data
    neo = out / FOLDERS["gpt_neo_tokenizer"]
    # fig4's old pairing at rehearsal size: the GPT-Neo tokenizer (1024 ids) with the Llama model (768)
    # (+: the key is not in the default data group that Hydra composes before the experiment's)
    line = one_line_error(
        ["experiment=fig4/rehearsal", "method=ddp", "method.impl=flat", "layout=1x1", f"data.tokenizer.path={neo}"],
        tmp_path,
    )
    assert f"the tokenizer at {neo} has 1024 token ids" in line and "model.config.vocab_size=768" in line
    # a BPE asked for more ids than the model has
    line = one_line_error(["model.config.vocab_size=512", "data.tokenizer.vocab_size=1024"], tmp_path)
    assert "data.tokenizer.vocab_size=1024" in line and "512" in line
    # a pretrained model's own config.json counts (its embedding: 512 rows), not model.config (1024)
    small = tmp_path.parent / "small-model"
    small.mkdir()
    (small / "config.json").write_text(json.dumps({"model_type": "gpt_neo", "vocab_size": 512}))
    line = one_line_error(
        [
            "experiment=fig8/rehearsal",
            "method=ddp",
            "layout=1x2",
            f"data.tokenizer.path={out / FOLDERS['llama_tokenizer']}",
            f"model.pretrained_path={small}",
        ],
        tmp_path,
    )
    assert f"vocab_size=512 in {small}/config.json" in line and "has 768 token ids" in line


def test_fig4_paper_tokenizer_matches_the_model():
    cfg = compose(["experiment=fig4/paper"])
    assert cfg["data"]["tokenizer"]["hub_id"] == "meta-llama/Llama-2-7b-hf" == cfg["model"]["hub_id"]
    assert cfg["data"]["tokenizer"]["path"].endswith("Llama-2-7b-hf")
    assert cfg["model"]["config"]["vocab_size"] == 32000


# -- data prepared before a job is submitted ---------------------------------------------------------------
@pytest.mark.integration
def test_prepare_data_builds_each_runs_cache_once_and_refuses_missing_data(rehearsal_data, tmp_path):
    env = dict(os.environ, ACCO_CACHE=str(tmp_path / "cache"))

    def prepare(*args):
        return subprocess.run(
            [sys.executable, os.path.join(ROOT, "experiments", "prepare_data.py"), *args],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=300,
            env=env,
        )

    first = prepare("experiment=fig7/rehearsal")
    assert first.returncode == 0, first.stderr[-3000:]
    # fig7's two runs (ddp, acco) read one data configuration: built once
    assert "2 run(s), 1 data configuration(s)" in first.stdout
    built = json.loads(first.stdout.split("(pretrain): ")[1].rsplit(" in ", 1)[0])
    assert built["train_blocks"] > 0 and built["tokenizer"].startswith(str(tmp_path / "cache"))
    caches = sorted(p.name for p in (tmp_path / "cache").iterdir() if p.name.startswith("pretrain-"))
    assert prepare("experiment=fig7/rehearsal").returncode == 0  # found, not rebuilt
    assert sorted(p.name for p in (tmp_path / "cache").iterdir() if p.name.startswith("pretrain-")) == caches
    missing = prepare("experiment=fig7/rehearsal", f"data.source.path={tmp_path / 'nowhere'}")
    lines = [line for line in missing.stderr.splitlines() if line.strip()]
    assert missing.returncode == 2 and len(lines) == 1 and "not found at" in lines[0], missing.stderr


# -- offline compute nodes: the paper's hub ids, served from the hub cache ---------------------------------
# fig7's data, tokenizer and LAMBADA by hub id, as in the paper config (the rehearsal's local paths dropped)
HUB_IDS = ["data.source.path=null", "data.tokenizer.path=null", "final_eval.lambada_source.path=null"]


def offline_env(hub_cache, acco_cache) -> dict:
    """A compute node without internet: the hub switched off, the hub client's cache at `hub_cache`."""
    return dict(
        os.environ, HF_HUB_CACHE=str(hub_cache), HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", ACCO_CACHE=str(acco_cache)
    )


def _experiment(script: str, args: list[str], env: dict, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, os.path.join(ROOT, "experiments", script), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def _check_hub_id_run(path, out) -> None:
    run = load_run(str(path))
    s, cfg = run["summary"], run["cfg"]
    assert s["status"] == "completed" and s["final_eval_error"] is None
    assert cfg["data"]["source"] == {
        "hub_id": "Skylion007/openwebtext",
        "path": None,
        "split": "train",
        "text_field": "text",
    }
    assert cfg["data"]["tokenizer"]["path"] is None and cfg["final_eval"]["lambada_source"]["path"] is None
    # LAMBADA's whole stand-in test split, read from the hub cache by hub id
    assert s["final_eval"]["lambada"]["examples"] == 200 and s["final_eval"]["heldout"]["tokens"] > 0


@pytest.mark.integration
def test_fig7_by_hub_ids_runs_offline_from_the_prepared_hub_cache(rehearsal_data, tmp_path):
    out, _ = rehearsal_data
    env = offline_env(out / FOLDERS["hub_cache"], tmp_path / "cache")
    prepared = _experiment("prepare_data.py", ["experiment=fig7/rehearsal", *HUB_IDS], env)
    assert prepared.returncode == 0, prepared.stderr[-3000:]
    assert "1 data configuration(s)" in prepared.stdout
    run = [
        "experiment=fig7/rehearsal",
        *HUB_IDS,
        "method=acco",
        "layout=1x2",
        "world_size=2",
        "train.tokens=8192",
        "train.log_every=0",
        f"results_root={tmp_path / 'results'}",
    ]
    trained = _experiment("train.py", [*run, "out_dir=" + str(tmp_path / "run")], env)
    assert trained.returncode == 0, trained.stderr[-3000:]
    _check_hub_id_run(tmp_path / "run", out)
    # the same run on a node whose hub cache is empty: one line naming the fix, before any worker
    empty = _experiment("train.py", [*run, "out_dir=" + str(tmp_path / "run2")], dict(env, HF_HUB_CACHE=str(tmp_path)))
    lines = [line for line in empty.stderr.splitlines() if line.strip()]
    assert empty.returncode == 2 and len(lines) == 1 and "experiments/prepare_data.py" in lines[0], empty.stderr
    assert not (tmp_path / "run2").exists()


@pytest.mark.slow
@pytest.mark.integration
def test_fig7_by_hub_ids_completes_through_slurm_with_the_hub_off(cluster, rehearsal_data, tmp_path):
    out, _ = rehearsal_data
    env = offline_env(out / FOLDERS["hub_cache"], tmp_path / "cache")
    prepared = _experiment("prepare_data.py", ["experiment=fig7/rehearsal", *HUB_IDS], env)
    assert prepared.returncode == 0, prepared.stderr[-3000:]
    args = ["experiment=fig7/rehearsal", *HUB_IDS, "method=acco", "launcher=slurm_local", "launcher.wait=true"]
    trained = _experiment("train.py", [*args, "train.log_every=0", f"out_dir={tmp_path / 'run'}"], env, timeout=420)
    assert trained.returncode == 0, trained.stderr[-3000:]
    _check_hub_id_run(tmp_path / "run", out)
    s = load_run(str(tmp_path / "run"))["summary"]
    assert s["launcher"] == "slurm" and s["world_size"] == 4 and len({r["node"] for r in s["per_rank"]}) == 2


# -- fig7 and fig8 through the local Slurm cluster ------------------------------------------------------
def _script(name: str, args: list[str]) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, os.path.join(ROOT, "experiments", name), *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=os.environ.copy(),
    )


@pytest.fixture(scope="module")
def rehearsed(cluster, rehearsal_data, tmp_path_factory):
    """fig7 (both runs, one job array, as `make rehearse` submits it) and fig8's first layout (DDP and
    ACCO: what Table 3's fine-tuning row compares) through Slurm, at the same time."""
    root = tmp_path_factory.mktemp("rehearsal-results")
    common = [f"results_root={root}", "launcher=slurm_local", "train.log_every=0"]
    procs = [_script("submit.py", ["experiment=fig7/rehearsal", *common, "--wait"])]
    procs += [
        _script("train.py", ["experiment=fig8/rehearsal", *common, "launcher.wait=true", f"method={m}", "layout=1x2"])
        for m in ("ddp", "acco")
    ]
    failed = []
    for proc in procs:
        out, err = proc.communicate(timeout=420)
        if proc.returncode:
            failed.append(f"{' '.join(proc.args[1:])} exited {proc.returncode}\n{err[-3000:]}")
    assert not failed, "\n".join(failed)
    return root


@pytest.mark.slow
@pytest.mark.integration
def test_fig7_rehearsal_completes_through_slurm(rehearsed, rehearsal_data):
    out, _ = rehearsal_data
    runs = {p.name: p for p in (rehearsed / "rehearsal" / "fig7").iterdir()}
    assert set(runs) == {"ddp", "acco"}
    for _name, path in runs.items():
        run = load_run(str(path))
        s, cfg = run["summary"], run["cfg"]
        assert s["status"] == "completed" and s["launcher"] == "slurm" and s["world_size"] == 4
        assert len({r["node"] for r in s["per_rank"]}) == 2  # 2x2: two virtual nodes
        assert cfg["layout"] == "2x2" and cfg["model"]["name"] == "gptneo_125m"
        assert cfg["data"]["source"]["path"] == str(out / "openwebtext")
        # the token budget, reached at the first committed step that meets it
        metrics = pd.read_csv(path / "metrics.csv")
        assert metrics["tokens"].iloc[-1] >= cfg["train"]["tokens"] > metrics["tokens"].iloc[:-1].max()
        # Table 2's evaluations: LAMBADA (the whole local test split) and held-out perplexity
        ev = json.loads((path / "eval.json").read_text())
        assert set(s["final_eval"]) == {"lambada", "heldout"} and ev["lambada"]["examples"] == 200
        assert ev["heldout"]["perplexity"] > 1 and ev["lambada"]["perplexity"] > 1
        # the saved model loads as a pretrained folder with its GPT-Neo-format tokenizer
        from transformers import AutoConfig, AutoTokenizer

        assert AutoConfig.from_pretrained(path / "model").vocab_size == 1024
        assert len(AutoTokenizer.from_pretrained(path / "model")) == 1024
        assert (path / "trace.json").exists()
    assert list((runs["ddp"] / "checkpoints").iterdir())  # the checkpoint path ran (every 4 steps)


@pytest.mark.slow
@pytest.mark.integration
def test_fig8_rehearsal_finetunes_the_saved_model_through_slurm(rehearsed, rehearsal_data):
    out, _ = rehearsal_data
    runs = {p.name: p for p in (rehearsed / "rehearsal" / "fig8").iterdir()}
    assert set(runs) == {"ddp_layout=1x2", "acco_layout=1x2"}
    for path in runs.values():
        run = load_run(str(path))
        s, cfg = run["summary"], run["cfg"]
        assert s["status"] == "completed" and s["launcher"] == "slurm" and s["world_size"] == 2
        assert cfg["model"]["pretrained_path"] == str(out / FOLDERS["gpt_neo_model"])
        assert cfg["data"]["kind"] == "instruct" and cfg["optim"]["betas"] == [0.9, 0.95]
        metrics = pd.read_csv(path / "metrics.csv")
        assert metrics["eval_loss"].notna().sum() >= 1  # the validation loss Fig. 8 plots
        assert metrics["samples"].iloc[-1] >= cfg["train"]["samples"]


@pytest.mark.slow
@pytest.mark.integration
def test_figures_and_tables_from_the_rehearsal(rehearsed):
    proc = subprocess.run(
        [
            sys.executable,
            os.path.join(ROOT, "analysis", "make_figures.py"),
            str(rehearsed),
            "--scale",
            "rehearsal",
            "--only",
            "fig7,fig8,table2,table3",
            "--no-timelines",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    base = rehearsed / "rehearsal"
    for path in ("fig7/figures/fig7.png", "fig8/figures/fig8.png", "tables/table2.md", "tables/table3.md", "REPORT.md"):
        assert (base / path).exists(), f"{path} missing:\n{proc.stdout}"
    t3 = pd.read_csv(base / "tables" / "table3.csv")
    fig7_row = t3[t3["source"] == "fig7"].iloc[0]
    assert fig7_row["ddp_s"] > 0 and fig7_row["acco_s"] > 0
    fig8_row = t3[(t3["source"] == "fig8") & (t3["layout"] == "1x2")].iloc[0]  # the paper's 1x8 row
    assert fig8_row["ddp_s"] > 0 and fig8_row["acco_s"] > 0
    t2 = pd.read_csv(base / "tables" / "table2.csv")
    assert t2[t2["source"] == "fig7"]["lambada_ppl"].notna().all()
