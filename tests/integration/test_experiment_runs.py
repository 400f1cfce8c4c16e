"""Every CPU-scale experiment runs end to end for a few steps through the real entry point; sweeps
write one folder per run named after what varies; the fine-tuning run starts from the pretraining
run's checkpoint, trained first when missing; missing data offline is one clear line."""

from __future__ import annotations

import json
import os

import pytest

from acco.config.experiments import compose, expand_runs
from tests.helpers.runs import load_run, run_folders, run_train

pytestmark = pytest.mark.integration  # every test here starts processes

FAST = ["train.steps=2", "train.log_every=0", "data.source.num_stories=1500"]


@pytest.mark.parametrize("exp", ["fig4", "fig5", "fig6", "fig7", "fig9", "fig10", "fig11"])
def test_cpu_experiment_runs(tmp_path, exp):
    first = expand_runs(compose([f"experiment={exp}/cpu"])["experiment"])[0]
    run_train([f"experiment={exp}/cpu", *first, *FAST, f"results_root={tmp_path}"])
    runs = run_folders(tmp_path)  # not the experiment's run list (2 steps): a folder of its own
    assert len(runs) == 1 and runs[0].parent.parent == tmp_path / "sweeps"
    assert not (tmp_path / "cpu").exists()
    summary = load_run(str(runs[0]))["summary"]
    assert summary["status"] == "completed" and summary["steps_completed"] == 2
    if exp in ("fig7", "fig11"):  # Table 2's evaluations ran at the end
        assert set(summary["final_eval"]) == {"heldout", "lambada"}
        assert summary["final_eval"]["lambada"]["examples"] == 500
        assert os.path.isdir(runs[0] / "model")


@pytest.mark.slow
def test_finetuning_trains_its_pretraining_dependency_first(tmp_path, monkeypatch):
    monkeypatch.setenv("ACCO_CACHE", str(tmp_path / "cache"))  # the pretraining lands in the cache
    dep = "+model.pretrained_from.overrides=['method=ddp','train.steps=2','data.source.num_stories=1500']"
    proc = run_train(
        ["experiment=fig8/cpu", "method=acco", "layout=2x1", "train.steps=2", f"results_root={tmp_path}", dep]
    )
    assert "training it first" in proc.stderr
    pre = tmp_path / "cache" / "pretrained" / "cpu" / "fig7" / "ddp_data.source.num_stories=1500_train.steps=2"
    assert load_run(str(pre))["summary"]["status"] == "completed" and (pre / "model").is_dir()
    assert not (tmp_path / "cpu" / "fig7").exists()  # nothing under the results
    (fine,) = [p.parent for p in tmp_path.rglob("summary.json") if p.parent != pre]
    assert fine.name.startswith("acco_layout=2x1_model.pretrained_from.overrides=")
    run = load_run(str(fine))
    assert run["summary"]["status"] == "completed"
    assert run["cfg"]["model"]["pretrained_path"] == str((pre / "model").resolve())
    assert run["cfg"]["data"]["kind"] == "instruct"
    # a second fine-tuning run reuses the checkpoint instead of pretraining again
    proc = run_train(["experiment=fig8/cpu", "method=ddp", "train.steps=1", f"results_root={tmp_path}", dep])
    assert "training it first" not in proc.stderr


def test_multirun_sweep_one_folder_per_run(tmp_path):
    """A sweep of settings outside the experiment's run list goes to one folder of its own, named
    after the experiment and what the sweep varies, never beside the experiment's runs."""
    proc = run_train(["-m", "experiment=fig5/cpu", "method=ddp,acco", *FAST, f"results_root={tmp_path}"])
    sweep = tmp_path / "sweeps" / "fig5-cpu_data.source.num_stories=1500_method=ddp,acco_train.steps=2"
    names = sorted(p.name for p in sweep.iterdir())
    assert names == [
        "acco_data.source.num_stories=1500_train.steps=2",
        "ddp_data.source.num_stories=1500_train.steps=2",
    ]
    assert not (tmp_path / "cpu").exists()
    for name in names:
        assert load_run(str(sweep / name))["summary"]["status"] == "completed"
    # the closing table: every run with its status
    table = proc.stderr[proc.stderr.index("sweep of 2 runs") :]
    assert "2 completed, 0 skipped" in table and all(name in table for name in names)


def one_line_error(args, tmp_path):
    proc = run_train([*args, f"results_root={tmp_path}"], expect=2, timeout=120)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    assert not any(tmp_path.iterdir())  # nothing written
    return lines[0]


def test_offline_missing_data_tokenizer_and_model(tmp_path):
    line = one_line_error(["experiment=fig5/cpu", "data=tinystories", "data.seq_len=128"], tmp_path)
    assert "roneneldan/TinyStories" in line and "hf download" in line
    assert "data.source.path=data/" in line
    line = one_line_error(["data=openwebtext", "data.seq_len=128", "data.source.path=/nonexistent/owt"], tmp_path)
    assert "/nonexistent/owt" in line and "Skylion007/openwebtext" in line
    corpus = tmp_path.parent / "owt.jsonl"
    corpus.write_text(json.dumps({"text": "a b c"}) + "\n")
    line = one_line_error(["data=openwebtext", "data.seq_len=128", f"data.source.path={corpus}"], tmp_path)
    assert "EleutherAI/gpt-neo-125M" in line and "data.tokenizer.path" in line
    line = one_line_error(["model=gptneo_2p7b", "data=synthetic"], tmp_path)
    assert "EleutherAI/gpt-neo-2.7B" in line and "model.pretrained_path" in line


def test_unknown_experiment_lists_the_valid_ones(tmp_path):
    line = one_line_error(["experiment=fig12/cpu"], tmp_path)
    assert "unknown experiment 'fig12/cpu'" in line and "fig5/cpu" in line and "table3/paper" in line
    line = one_line_error(["experiment=table2/cpu"], tmp_path)
    assert "no training runs of its own" in line
    line = one_line_error(["experiment=fig7/paper"], tmp_path)
    assert "experiment=fig7/cpu" in line and "launcher=slurm" in line
    line = one_line_error(["+experiment=fig5", "scale=cpu", "method=acco"], tmp_path)  # the form before issue 12
    assert "use experiment=fig5/cpu" in line
