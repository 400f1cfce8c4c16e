"""Byte-level BPE tokenizer trained with Hugging Face ``tokenizers`` (the paper trained its own
10k-vocabulary BPE on TinyStories; the CPU scale trains a smaller one on the embedded corpus).

Determinism: ``tokenizers``' BPE trainer counts words in parallel (rayon) but the counts are sums,
every byte of the byte-level alphabet is given a fixed id up front (``initial_alphabet``), and
merges are taken from a heap ordered by (count, pair ids), so ties are broken deterministically.
Training the same texts gives the same ``tokenizer.json`` bytes whatever the thread count or
process (checked with 1 and several rayon threads and across processes; ``tests/test_data.py``
checks it too). No ``RAYON_NUM_THREADS`` override is therefore needed.
"""
from __future__ import annotations

import os
from typing import Iterable

EOS_TOKEN = "<|endoftext|>"

__all__ = ["EOS_TOKEN", "train_bpe_tokenizer", "load_tokenizer"]

# 256 byte symbols plus the special token.
_MIN_VOCAB = 257


def train_bpe_tokenizer(texts: Iterable[str], vocab_size: int, out_path: str | os.PathLike) -> None:
    """Train a byte-level BPE on ``texts`` and save it as a ``tokenizer.json`` at ``out_path``.

    The vocabulary holds the 256 byte symbols, ``<|endoftext|>`` (id 0) and learned merges, up to
    ``vocab_size`` entries (fewer if the corpus runs out of pairs to merge). No special token is
    added automatically when encoding: the packer appends EOS after each document itself.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    if vocab_size < _MIN_VOCAB:
        raise ValueError(f"vocab_size must be >= {_MIN_VOCAB} (256 bytes + {EOS_TOKEN}), got {vocab_size}")
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[EOS_TOKEN],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    tmp = f"{os.fspath(out_path)}.tmp{os.getpid()}"
    tok.save(tmp, pretty=True)
    os.replace(tmp, out_path)


def load_tokenizer(path: str | os.PathLike):
    """Load a ``tokenizer.json`` as a ``transformers.PreTrainedTokenizerFast``.

    ``eos_token`` is ``<|endoftext|>``; ``pad_token`` is set to the same token (GPT convention),
    so batched padding works out of the box.
    """
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(tokenizer_file=os.fspath(path), eos_token=EOS_TOKEN, pad_token=EOS_TOKEN)
