"""LAMBADA through lm-evaluation-harness itself (`pip install -e '.[eval]'`), beside our own scoring.

Researchers read LAMBADA as `lm_eval` reports it, so `experiments/evaluate.py --harness` runs the
harness's `lambada_openai` task on the saved Hugging Face model folder. Offline, the task reads a
local copy: the examples our loader gives (a `save_to_disk` folder, jsonl, json, parquet or text)
are written as one jsonl file and a task with the same prompt, target and metrics as
`lambada_openai` is pointed at it (`lambada_openai_local`), so both scorings see the same examples.
"""

from __future__ import annotations

import json
import os
import tempfile

TASK = "lambada_openai_local"

# lm_eval/tasks/lambada/lambada_openai.yaml with a local json file in place of the hub dataset
TASK_YAML = """task: {task}
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
output_type: loglikelihood
test_split: test
doc_to_text: "{{{{text.split(' ')[:-1]|join(' ')}}}}"
doc_to_target: "{{{{' '+text.split(' ')[-1]}}}}"
metric_list:
  - metric: perplexity
    aggregation: perplexity
    higher_is_better: false
  - metric: acc
    aggregation: mean
    higher_is_better: true
metadata:
  version: 1.0
"""


class HarnessMissing(RuntimeError):
    pass


def harness_available() -> str | None:
    """None, or the one line saying what to install."""
    try:
        import accelerate  # noqa: F401  (lm_eval's Hugging Face model needs it)
        import lm_eval  # noqa: F401
    except ImportError as exc:
        return f"--harness needs lm-evaluation-harness: pip install -e '.[eval]' ({exc.name} is missing)"
    return None


def harness_lambada(
    model_dir: str,
    examples: list[tuple[str, str]],
    device: str = "cpu",
    batch_size: int = 8,
    per_example: bool = False,
) -> dict:
    """`{"perplexity", "accuracy", "examples", "version"}` of lm_eval's lambada_openai scoring of the
    model folder on these `(context, " word")` examples (written back as LAMBADA's `text` field);
    `per_example`: also `"loglik"` and `"correct"`, one per example in their order."""
    problem = harness_available()
    if problem:
        raise HarnessMissing(problem)
    import lm_eval
    from lm_eval.tasks import TaskManager

    with tempfile.TemporaryDirectory(prefix="acco-harness-") as tmp:
        data = os.path.join(tmp, "lambada.jsonl")
        with open(data, "w") as f:
            for context, target in examples:
                f.write(json.dumps({"text": context + target}) + "\n")
        with open(os.path.join(tmp, f"{TASK}.yaml"), "w") as f:
            f.write(TASK_YAML.format(task=TASK, data=data))
        out = lm_eval.simple_evaluate(
            model="hf",
            model_args=f"pretrained={model_dir},dtype=float32",
            tasks=[TASK],
            task_manager=TaskManager(include_path=tmp),
            device=device,
            batch_size=batch_size,
            bootstrap_iters=0,
            log_samples=per_example,
        )
    scores = out["results"][TASK]
    result = {
        "perplexity": float(scores["perplexity,none"]),
        "accuracy": float(scores["acc,none"]),
        "examples": int(out["n-samples"][TASK]["effective"]),
        "version": str(lm_eval.__version__),
    }
    if per_example:  # each sample's (loglikelihood, greedy) response, by document
        samples = sorted(out["samples"][TASK], key=lambda s: s["doc_id"])
        result["loglik"] = [float(s["filtered_resps"][0][0]) for s in samples]
        result["correct"] = [bool(s["filtered_resps"][0][1]) for s in samples]
    return result
