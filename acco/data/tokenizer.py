"""Byte-level BPE tokenizer trained with Hugging Face ``tokenizers`` (the paper trained its own
10k-vocabulary BPE on TinyStories; the CPU scale trains a smaller one on the embedded corpus).

Determinism: ``tokenizers``' BPE trainer counts words in parallel (rayon) but the counts are sums,
every byte of the byte-level alphabet is given a fixed id up front (``initial_alphabet``), and
merges are taken from a heap ordered by (count, pair ids), so ties are broken deterministically.
Training the same texts gives the same ``tokenizer.json`` bytes whatever the thread count or
process (checked with 1 and several rayon threads and across processes; ``tests/integration/test_data.py``
checks it too). No ``RAYON_NUM_THREADS`` override is therefore needed.

Pretrained tokenizers (e.g. GPT-Neo's, for OpenWebText and fine-tuning) are loaded from a local
folder only (``load_pretrained_tokenizer``): without one, a one-line error says what to download
and where to put it. ``tokenizer_fingerprint`` hashes what determines a tokenizer's output, for
cache keys.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from pathlib import Path

from ..atomic import atomic_write
from .hub import hub_cache_dir
from .sources import DataNotFoundError

EOS_TOKEN = "<|endoftext|>"

__all__ = [
    "EOS_TOKEN",
    "TOKENIZER_FILES",
    "load_pretrained_tokenizer",
    "load_tokenizer",
    "tokenizer_fingerprint",
    "tokenizer_hint",
    "train_bpe_tokenizer",
]

# Suggested local folders of the pretrained tokenizers the experiments use.
KNOWN_TOKENIZERS = {
    "EleutherAI/gpt-neo-125M": "data/tokenizers/gpt-neo-125M",
    "EleutherAI/gpt-neo-2.7B": "data/tokenizers/gpt-neo-2.7B",
}

# What of a model repository a tokenizer is (hf download --include; experiments/prepare_data.py).
TOKENIZER_FILES = ("*.json", "*.txt", "*.model")

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
    atomic_write(out_path, lambda tmp: tok.save(tmp, pretty=True))


def load_tokenizer(path: str | os.PathLike):
    """Load a ``tokenizer.json`` as a ``transformers.PreTrainedTokenizerFast``.

    ``eos_token`` is ``<|endoftext|>``; ``pad_token`` is set to the same token (GPT convention),
    so batched padding works out of the box. A folder (a saved pretrained tokenizer) is loaded
    with ``load_pretrained_tokenizer``.
    """
    from transformers import PreTrainedTokenizerFast

    if Path(path).is_dir():
        return load_pretrained_tokenizer(path, None)
    return PreTrainedTokenizerFast(tokenizer_file=os.fspath(path), eos_token=EOS_TOKEN, pad_token=EOS_TOKEN)


def tokenizer_hint(
    hub_id: str | None, config_key: str = "tokenizer.path", path: str | os.PathLike | None = None
) -> str:
    """What to do to get ``hub_id``'s tokenizer locally (one line, no trailing period); ``path``: the
    folder the config already names, which the download then fills."""
    if hub_id is None:
        return f"save a tokenizer there (save_pretrained, or a tokenizer.json) or set {config_key} to one"
    local = path or KNOWN_TOKENIZERS.get(hub_id, "data/tokenizers/" + hub_id.split("/")[-1])
    include = " ".join(f"--include '{pattern}'" for pattern in TOKENIZER_FILES)
    where = (
        f"copy it there (or set {config_key} to where it is)" if path else f"copy it here and set {config_key}={local}"
    )
    return (
        f"run experiments/prepare_data.py with the same overrides where the hub is reachable (it fetches it), "
        f'or run "hf download {hub_id} {include} --local-dir {local}" on a machine with internet, {where}'
    )


def _short(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:157] + '...' if len(text) > 160 else text}"


def load_pretrained_tokenizer(
    path: str | os.PathLike | None, hub_id: str | None, *, config_key: str = "tokenizer.path"
):
    """``AutoTokenizer.from_pretrained(path or hub_id, local_files_only=True)``.

    ``path``: a folder written by ``save_pretrained`` / ``hf download --local-dir`` (or one of our
    ``tokenizer.json`` files); without it, ``hub_id`` is looked up in the hub cache only
    (where ``experiments/prepare_data.py`` fetches it).
    ``pad_token`` is set to ``eos_token`` when the tokenizer has none. Raises ``DataNotFoundError``
    (one line: what to download, where to put it) when nothing is found.
    """
    from transformers import AutoTokenizer

    if path is not None:
        p = Path(path).expanduser()
        if not p.exists():
            what = f"tokenizer {hub_id}" if hub_id else "tokenizer"
            raise DataNotFoundError(
                f"{what} not found at {path} (no such file or folder): {tokenizer_hint(hub_id, config_key, path)}"
            )
        if p.is_file():
            if p.suffix != ".json":
                raise DataNotFoundError(
                    f"{path} is not a tokenizer: give a folder saved with save_pretrained or a tokenizer.json"
                )
            return load_tokenizer(p)
        try:
            tok = AutoTokenizer.from_pretrained(str(p), local_files_only=True)
        except Exception as exc:  # noqa: BLE001
            raise DataNotFoundError(
                f"could not load a tokenizer from {path} ({_short(exc)}): {tokenizer_hint(hub_id, config_key)}"
            ) from exc
    elif hub_id:
        try:
            tok = AutoTokenizer.from_pretrained(hub_id, local_files_only=True, cache_dir=hub_cache_dir())
        except Exception as exc:  # noqa: BLE001
            raise DataNotFoundError(
                f"tokenizer {hub_id} is not in the Hugging Face cache {hub_cache_dir()}: "
                f"{tokenizer_hint(hub_id, config_key)}"
            ) from exc
    else:
        raise DataNotFoundError(f"no tokenizer given: set {config_key} to a local tokenizer folder")
    if tok.pad_token is None and tok.eos_token is not None:
        tok.pad_token = tok.eos_token
    return tok


def tokenizer_fingerprint(tokenizer) -> str:
    """SHA-256 (16 hex digits) of what determines a tokenizer's ids: its class, its serialized
    backend (vocabulary, merges, normalizer, pre-tokenizer, post-processor, added tokens; not the
    per-call padding/truncation state) or else its vocabulary, and its special tokens."""
    h = hashlib.sha256(type(tokenizer).__name__.encode())
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        state = json.loads(backend.to_str())
        state.pop("padding", None)
        state.pop("truncation", None)
        h.update(json.dumps(state, sort_keys=True).encode())
    else:
        h.update(json.dumps(sorted(tokenizer.get_vocab().items(), key=lambda kv: kv[1])).encode())
    special = {k: getattr(tokenizer, k, None) for k in ("bos_token", "eos_token", "pad_token", "unk_token")}
    special["len"] = len(tokenizer)
    h.update(json.dumps(special, sort_keys=True, default=str).encode())
    return h.hexdigest()[:16]
