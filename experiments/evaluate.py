#!/usr/bin/env python
"""Evaluate the saved model of finished runs again (Table 2): LAMBADA perplexity and accuracy on
the whole test set, and perplexity on the held-out validation blocks of the run's training data.
Writes <run>/eval.json and prints one line per run. A run keeps its model (model/) only when trained
with train.save_model=true; the committed runs of results/cpu keep none. fig8's CPU fine-tuning saves
its pretraining run's model in the data cache ($ACCO_CACHE, default ~/.cache/acco):

    python experiments/evaluate.py "${ACCO_CACHE:-$HOME/.cache/acco}/pretrained/cpu/fig7/ddp_method.impl=flat_seed=0"
    python experiments/evaluate.py RUN_DIR --lambada-path data/lambada_openai --device cuda
    python experiments/evaluate.py RUN_DIR --harness     # also lm-evaluation-harness's lambada_openai

With --harness (the [eval] extra) eval.json also holds `lambada_harness`: lm_eval's accuracy and
perplexity of the same model folder on the same examples (acco/evaluation/lm_eval_harness.py).

A run whose final evaluation failed after its training (summary.json: status `completed`,
`final_eval_error`) is finished here: its summary.json gets the results as `final_eval` and its
`final_eval_error` is cleared (`final_eval_by` names this script).
"""

import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def record_in_summary(run: str, results: dict) -> None:
    """summary.json (when the run has one) with these results as its final evaluation."""
    from acco.atomic import atomic_write_json
    from acco.runtime.summary import SUMMARY_FILE, read_summary

    summary = read_summary(run)
    if summary is None:
        return
    summary.final_eval, summary.final_eval_error = results, None
    summary.extra["final_eval_by"] = "experiments/evaluate.py"
    atomic_write_json(os.path.join(run, SUMMARY_FILE), summary.to_json())


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", help="run folders holding config.yaml and model/")
    parser.add_argument("--lambada-path", help="a local copy of EleutherAI/lambada_openai (test split)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--harness", action="store_true", help="also score LAMBADA with lm-evaluation-harness")
    args = parser.parse_args(argv)
    if args.harness:
        from acco.evaluation.lm_eval_harness import harness_available

        problem = harness_available()
        if problem:
            print(f"error: {problem}", file=sys.stderr)
            return 2

    import torch
    import yaml
    from transformers import AutoModelForCausalLM

    from acco.atomic import atomic_write_json
    from acco.config.schema import typed
    from acco.data.sources import DataNotFoundError
    from acco.data.tokenizer import load_tokenizer
    from acco.tasks.lm import lambada_final_eval, lambada_test_examples, prepare_lm_data

    device = torch.device(args.device)
    for run in args.runs:
        cfg_path, model_dir = os.path.join(run, "config.yaml"), os.path.join(run, "model")
        if not os.path.exists(cfg_path):
            print(f"error: {run} is not a run folder (no config.yaml)", file=sys.stderr)
            return 2
        if not os.path.isdir(model_dir):
            # a run saves its model only when asked, and the committed runs (results/cpu) keep none
            print(
                f"error: {run} kept no model/ (a run saves one only with train.save_model=true); train it "
                f"again with train.save_model=true, or evaluate a run that saved one, e.g. fig8's CPU "
                f"pretraining, $ACCO_CACHE/pretrained/cpu/fig7/ddp_method.impl=flat_seed=0 (docs/experiments.md)",
                file=sys.stderr,
            )
            return 2
        with open(cfg_path) as f:
            cfg = yaml.safe_load(f)
        cfg["final_eval"] = dict(cfg.get("final_eval") or {}, lambada=True, heldout=True)
        if args.lambada_path:
            cfg["final_eval"]["lambada_source"] = {
                "hub_id": "EleutherAI/lambada_openai",
                "path": args.lambada_path,
                "split": "test",
            }
        cfg = typed(cfg)  # the run's config, read as the run read it
        try:
            data = prepare_lm_data(cfg.data)
            model: torch.nn.Module = AutoModelForCausalLM.from_pretrained(model_dir, local_files_only=True)
            model.to(device)
            results = lambada_final_eval(cfg, load_tokenizer(model_dir), data.val_blocks, device)(model)
            if args.harness:
                from acco.evaluation.lm_eval_harness import harness_lambada

                results["lambada_harness"] = harness_lambada(model_dir, lambada_test_examples(cfg), args.device)
        except DataNotFoundError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        atomic_write_json(os.path.join(run, "eval.json"), results)
        record_in_summary(run, results)
        print(
            f"{run}: LAMBADA ppl {results['lambada']['perplexity']:.2f} "
            f"acc {results['lambada']['accuracy']:.3f} ({results['lambada']['examples']} examples), "
            f"held-out ppl {results['heldout']['perplexity']:.2f}"
        )
        if "lambada_harness" in results:
            h = results["lambada_harness"]
            print(f"{run}: lm-eval {h['version']} lambada_openai ppl {h['perplexity']:.2f} acc {h['accuracy']:.3f}")
        print(json.dumps(results), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
