"""Data for the experiments: the embedded story corpus (CPU-scale TinyStories), raw datasets from
local files through Hugging Face ``datasets`` (TinyStories, OpenWebText, Alpaca, LAMBADA), BPE or
pretrained tokenizers, packing into constant-length blocks (memory-mapped token files), instruction
fine-tuning examples, and the deterministic per-rank micro-batch streams."""

from .alpaca import (
    ALPACA_PROMPT_INPUT,
    ALPACA_PROMPT_NO_INPUT,
    IGNORE_INDEX,
    InstructBatchStream,
    InstructData,
    TokenizedExamples,
    format_alpaca,
    label_tokens,
    prepare_instruction_data,
)
from .generated_instructions import check_answer, generate_instructions, task_of, write_alpaca_json
from .packed import PackedData, RankBatchStream, pack_documents
from .prepare_pretraining import prepare_pretraining_data, pretraining_cache_path
from .prepare_stories import prepare_story_data, story_cache_path
from .sources import KNOWN_DATASETS, DataNotFoundError, load_raw_dataset
from .stories import generate_stories, write_story_jsonl
from .token_file import TokenBlocks
from .tokenizer import EOS_TOKEN, load_pretrained_tokenizer, load_tokenizer, tokenizer_fingerprint, train_bpe_tokenizer

__all__ = [
    "ALPACA_PROMPT_INPUT",
    "ALPACA_PROMPT_NO_INPUT",
    "DataNotFoundError",
    "EOS_TOKEN",
    "IGNORE_INDEX",
    "InstructBatchStream",
    "InstructData",
    "KNOWN_DATASETS",
    "PackedData",
    "RankBatchStream",
    "TokenBlocks",
    "TokenizedExamples",
    "check_answer",
    "format_alpaca",
    "generate_instructions",
    "generate_stories",
    "label_tokens",
    "load_pretrained_tokenizer",
    "load_raw_dataset",
    "load_tokenizer",
    "pack_documents",
    "prepare_instruction_data",
    "prepare_pretraining_data",
    "prepare_story_data",
    "pretraining_cache_path",
    "story_cache_path",
    "task_of",
    "tokenizer_fingerprint",
    "train_bpe_tokenizer",
    "write_alpaca_json",
    "write_story_jsonl",
]
