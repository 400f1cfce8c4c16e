"""Single-process evaluation of causal LMs (no torch.distributed here): LAMBADA (lm-eval-harness
``lambada_openai`` definitions), perplexity over packed blocks, instruction-following accuracy, and
a CPU-scale LAMBADA-like set generated from the story world. LAMBADA and the block perplexity also
come as ``ShardedEvaluation``s, which ranks can share (each scores a part, the sums are added)."""

from ..data.generated_lambada import generate_lambada_like, write_lambada_jsonl
from .instruct_eval import instruction_accuracy
from .lambada import lambada_evaluation, lambada_examples, lambada_from_sums, lambada_scores, lambada_sums
from .perplexity import block_nll_sums, block_perplexity, heldout_evaluation, perplexity_from_sums
from .sharded import ShardedEvaluation, evaluation_suite

__all__ = [
    "ShardedEvaluation",
    "block_nll_sums",
    "block_perplexity",
    "evaluation_suite",
    "generate_lambada_like",
    "heldout_evaluation",
    "instruction_accuracy",
    "lambada_evaluation",
    "lambada_examples",
    "lambada_from_sums",
    "lambada_scores",
    "lambada_sums",
    "perplexity_from_sums",
    "write_lambada_jsonl",
]
