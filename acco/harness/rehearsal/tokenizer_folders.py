"""Small tokenizers in the formats of the paper's pretrained ones, trained with ``tokenizers`` on the
rehearsal's web documents and saved with ``save_pretrained``, so they load like a downloaded copy
(``AutoTokenizer.from_pretrained(folder)``, ``load_pretrained_tokenizer``):

* GPT-Neo (EleutherAI/gpt-neo-125M, -2.7B): a GPT-2 byte-level BPE (``GPT2Tokenizer``: ByteLevel
  pre-tokenizer without prefix space, ``<|endoftext|>`` as BOS/EOS/UNK and as the last id, like
  GPT-2's 50256); the folder holds ``vocab.json``, ``merges.txt``, ``tokenizer.json``,
  ``tokenizer_config.json``;
* Llama-2 (meta-llama/Llama-2-7b-hf): a SentencePiece-style BPE with byte fallback
  (``LlamaTokenizer``: ``▁`` for spaces, a prefix space, ``<unk>`` = 0, ``<s>`` = 1, ``</s>`` = 2,
  then the 256 byte pieces ``<0x00>`` .. ``<0xFF>``, then the learned pieces, as Llama-2's
  vocabulary is ordered; a BOS is added when encoding).

Training is deterministic (see ``acco.data.tokenizer``): the same texts give the same files.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

__all__ = ["GPT_NEO_EOS", "LLAMA_SPECIALS", "save_gpt_neo_tokenizer", "save_llama_tokenizer"]

GPT_NEO_EOS = "<|endoftext|>"
LLAMA_SPECIALS = ("<unk>", "<s>", "</s>")


def _trained_vocab_and_merges(tokenizer) -> tuple[dict[str, int], list]:
    model = json.loads(tokenizer.to_str())["model"]
    return model["vocab"], model["merges"]


def _merge_pairs(merges) -> list[tuple[str, str]]:
    return [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in merges]


def save_gpt_neo_tokenizer(texts: Iterable[str], vocab_size: int, out: Path):
    """Train a GPT-2/GPT-Neo byte-level BPE of ``vocab_size`` ids and save it in ``out``."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import GPT2Tokenizer

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size - 1, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
    )
    tok.train_from_iterator(texts, trainer=trainer)
    vocab, merges = _trained_vocab_and_merges(tok)
    vocab = {piece: i for i, piece in enumerate(sorted(vocab, key=vocab.__getitem__))}
    vocab[GPT_NEO_EOS] = len(vocab)  # GPT-2's <|endoftext|> is its last id
    merges = _merge_pairs(merges)
    hf = GPT2Tokenizer(vocab=vocab, merges=merges)  # type: ignore[arg-type]  # (a, b) pairs work; the stub says str
    hf.model_max_length = 2048
    hf.save_pretrained(str(out))
    # GPT-2's own vocabulary files, as in the hub folders (transformers 5 writes tokenizer.json only)
    (out / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False) + "\n", encoding="utf-8")
    (out / "merges.txt").write_text("#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in merges), encoding="utf-8")
    return hf


def save_llama_tokenizer(texts: Iterable[str], vocab_size: int, out: Path):
    """Train a Llama-2-style BPE (byte fallback) of ``vocab_size`` ids and save it in ``out``."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import LlamaTokenizer

    byte_pieces = [f"<0x{b:02X}>" for b in range(256)]
    reserved = len(LLAMA_SPECIALS) + len(byte_pieces)
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size - reserved, show_progress=False, limit_alphabet=200)
    tok.train_from_iterator(texts, trainer=trainer)
    learned, merges = _trained_vocab_and_merges(tok)
    vocab = {piece: i for i, piece in enumerate([*LLAMA_SPECIALS, *byte_pieces])}
    for piece in sorted(learned, key=learned.__getitem__):
        vocab.setdefault(piece, len(vocab))
    hf = LlamaTokenizer(vocab=vocab, merges=_merge_pairs(merges), add_bos_token=True)
    hf.model_max_length = 4096
    hf.save_pretrained(str(out))
    return hf
