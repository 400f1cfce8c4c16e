"""Single-process evaluation of causal LMs (no torch.distributed here): LAMBADA (lm-eval-harness
``lambada_openai`` definitions), perplexity over packed blocks, instruction-following accuracy, and
a CPU-scale LAMBADA-like set generated from the story world."""
from .instruct_eval import instruction_accuracy
from .lambada import lambada_examples, lambada_scores
from .lambada_synth import generate_lambada_like, write_lambada_jsonl
from .perplexity import block_perplexity

__all__ = [
    "block_perplexity",
    "generate_lambada_like",
    "instruction_accuracy",
    "lambada_examples",
    "lambada_scores",
    "write_lambada_jsonl",
]
