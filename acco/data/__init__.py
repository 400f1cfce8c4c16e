"""CPU-scale language-model pretraining data: an embedded story corpus, a byte-level BPE tokenizer,
packing into constant-length blocks and the deterministic per-rank micro-batch stream."""
from .packed import RankBatchStream, pack_documents
from .prepare import PackedData, prepare_story_data, story_cache_path
from .stories import generate_stories, write_story_jsonl
from .tokenizer import EOS_TOKEN, load_tokenizer, train_bpe_tokenizer

__all__ = [
    "EOS_TOKEN",
    "PackedData",
    "RankBatchStream",
    "generate_stories",
    "load_tokenizer",
    "pack_documents",
    "prepare_story_data",
    "story_cache_path",
    "train_bpe_tokenizer",
    "write_story_jsonl",
]
