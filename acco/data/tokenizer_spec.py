"""Tokenizer "specs": the config that chooses a tokenizer for a data pipeline.

* ``{"kind": "bpe", "vocab_size": 10000}``: a byte-level BPE trained on the training split of the
  data (the paper's 10k-vocabulary tokenizer for TinyStories);
* ``{"kind": "pretrained", "path": "data/tokenizers/gpt-neo-125M", "hub_id": "EleutherAI/gpt-neo-125M"}``:
  a pretrained tokenizer from a local folder (``hub_id`` names what to download when it is missing,
  and is looked up in the Hugging Face cache when there is no ``path``).

``resolve_tokenizer_spec`` validates a spec and returns its cache identity: the vocabulary size for
a BPE (the training texts are covered by the data's own key), the content fingerprint of a
pretrained tokenizer (so a copy elsewhere is the same key and a changed tokenizer another one).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path

from .tokenizer import EOS_TOKEN, load_pretrained_tokenizer, load_tokenizer, tokenizer_fingerprint, train_bpe_tokenizer

__all__ = ["ResolvedTokenizer", "materialize_tokenizer", "resolve_tokenizer_spec"]

_KEYS = {"bpe": {"kind", "vocab_size"}, "pretrained": {"kind", "path", "hub_id"}}


class ResolvedTokenizer:
    """A validated spec: ``identity`` (JSON-able, for cache keys) and, for a pretrained one, the
    loaded ``tokenizer``."""

    def __init__(self, spec: dict, identity: dict, tokenizer=None):
        self.spec = spec
        self.identity = identity
        self.tokenizer = tokenizer

    @property
    def kind(self) -> str:
        return self.spec["kind"]


def resolve_tokenizer_spec(spec: dict) -> ResolvedTokenizer:
    spec = dict(spec or {})
    kind = spec.get("kind")
    if kind not in _KEYS:
        raise ValueError(f"tokenizer kind must be 'bpe' or 'pretrained', got {kind!r}")
    unknown = set(spec) - _KEYS[kind]
    if unknown:
        raise ValueError(
            f"unknown key(s) {', '.join(sorted(unknown))} in a {kind} tokenizer spec; "
            f"allowed: {', '.join(sorted(_KEYS[kind]))}"
        )
    if kind == "bpe":
        vocab_size = spec.get("vocab_size")
        if not isinstance(vocab_size, int) or isinstance(vocab_size, bool):
            raise ValueError(f"a bpe tokenizer spec needs an integer vocab_size, got {vocab_size!r}")
        return ResolvedTokenizer(spec, {"kind": "bpe", "vocab_size": vocab_size})
    tok = load_pretrained_tokenizer(spec.get("path"), spec.get("hub_id"))
    return ResolvedTokenizer(spec, {"kind": "pretrained", "fingerprint": tokenizer_fingerprint(tok)}, tok)


def materialize_tokenizer(
    resolved: ResolvedTokenizer, train_texts: Callable[[], Iterable[str]], out_dir: Path, train_fn=train_bpe_tokenizer
):
    """The tokenizer of a build, saved in ``out_dir``: returns ``(tokenizer, file name)``.

    A BPE is trained by ``train_fn(train_texts(), vocab_size, out_dir / "tokenizer.json")``; a
    pretrained tokenizer is copied with ``save_pretrained`` into ``out_dir / "tokenizer"``.
    """
    if resolved.kind == "bpe":
        train_fn(train_texts(), resolved.spec["vocab_size"], out_dir / "tokenizer.json")
        return load_tokenizer(out_dir / "tokenizer.json"), "tokenizer.json"
    tok = resolved.tokenizer
    tok.save_pretrained(os.fspath(out_dir / "tokenizer"))
    return tok, "tokenizer"


def eos_id_of(tokenizer) -> int:
    """The id of the document separator: the tokenizer's EOS (``<|endoftext|>`` for our BPE)."""
    eos = tokenizer.eos_token_id  # GPT-2/Neo: also their unk token, which is fine
    if eos is None and EOS_TOKEN in tokenizer.get_vocab():
        eos = tokenizer.convert_tokens_to_ids(EOS_TOKEN)
    if eos is None:
        raise ValueError(f"tokenizer {getattr(tokenizer, 'name_or_path', '')!r} has no EOS token")
    return int(eos)
