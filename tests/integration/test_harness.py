"""LAMBADA scored by lm-evaluation-harness agrees with ours (acco/evaluation/lambada.py) on a small
saved model: the same examples right and wrong, perplexity within 0.5 % (it agrees to ~1e-7); and
`experiments/evaluate.py --harness` records the harness's numbers beside ours in eval.json."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import pytest
import torch

from acco.data.generated_lambada import generate_lambada_like
from acco.data.stories import generate_stories
from acco.evaluation.lambada import lambada_examples, lambada_scores, lambada_sums
from tests.helpers.paths import ROOT
from tests.helpers.runs import SMALL_LM, run_train

pytest.importorskip("lm_eval")
pytest.importorskip("accelerate")
# one pytest-xdist worker: both tests use the module's trained model
pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("harness")]


@pytest.fixture(scope="module")
def saved_model(tmp_path_factory):
    """A small GPT-Neo trained long enough to get some LAMBADA-like cloze words right."""
    out = tmp_path_factory.mktemp("harness") / "run"
    run_train(
        [
            "method=ddp",
            *SMALL_LM,
            "data.micro_batch_size=8",
            "optim.lr=0.003",
            "world_size=1",
            "train.steps=300",
            "train.eval_every=0",
            "train.save_model=true",
            # the CPU scale's LAMBADA stand-in (generated passages in its schema), as fig7/cpu uses
            "+final_eval.lambada_source.generator=lambada_like",
            "+final_eval.lambada_source.num_examples=80",
            "final_eval.lambada_source.hub_id=null",
            f"out_dir={out}",
        ],
        timeout=900,
    )
    return out


def test_harness_and_ours_agree_example_by_example(saved_model):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from acco.evaluation.lm_eval_harness import harness_lambada

    model_dir = str(saved_model / "model")
    # LAMBADA-like cloze passages (hard for this model) and story openings cut after 3 to 8 words
    # (the next word is often easy after training on such stories): some right, most wrong
    stories = [" ".join(text.split()[: 3 + i % 6]) for i, text in enumerate(generate_stories(60, seed=1))]
    examples = lambada_examples(generate_lambada_like(40, seed=0) + stories)
    model = AutoModelForCausalLM.from_pretrained(model_dir, local_files_only=True)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    ours = lambada_scores(model, tokenizer, examples, torch.device("cpu"))
    theirs = harness_lambada(model_dir, examples, per_example=True)
    assert theirs["examples"] == ours["examples"] == 100
    per_example = [lambada_sums(model, tokenizer, [ex], torch.device("cpu")) for ex in examples]
    assert theirs["correct"] == [bool(s["correct"]) for s in per_example]  # the same examples right
    assert 0 < sum(theirs["correct"]) < len(examples), sum(theirs["correct"])  # a real test of agreement
    assert ours["accuracy"] == theirs["accuracy"]
    for mine, harness in zip(per_example, theirs["loglik"]):
        assert mine["loglik_sum"] == pytest.approx(harness, rel=1e-4, abs=1e-4)
    assert abs(ours["perplexity"] / theirs["perplexity"] - 1) < 0.005
    assert math.isfinite(theirs["perplexity"])


def test_evaluate_harness_records_both_in_eval_json(saved_model):
    proc = subprocess.run(
        [sys.executable, os.path.join(ROOT, "experiments", "evaluate.py"), str(saved_model), "--harness"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    with open(saved_model / "eval.json") as f:
        result = json.load(f)
    ours, harness = result["lambada"], result["lambada_harness"]
    assert harness["examples"] == ours["examples"] and harness["accuracy"] == ours["accuracy"]
    assert abs(ours["perplexity"] / harness["perplexity"] - 1) < 0.005
    assert "lm-eval" in proc.stdout and "lambada_openai" in proc.stdout
