"""The general pretraining pipeline: a raw text dataset -> tokenizer -> constant-length blocks.

``prepare_pretraining_data(source, tokenizer, seq_len, val_fraction, seed, cache_dir)`` builds once
and caches, in ``<cache_dir>/pretrain-<key>/``:

* ``tokenizer.json`` (a BPE trained on the training documents) or ``tokenizer/`` (a copy of the
  pretrained tokenizer);
* ``blocks.pt``: ``{"train": LongTensor[n, seq_len], "val": LongTensor[m, seq_len]}``;
* ``meta.json``: the key's ingredients and the sizes.

``source``: ``{"hub_id", "path", "split", "text_field", "config_name", "max_documents",
"val_split"}`` (all optional but one of hub_id/path; defaults come from ``KNOWN_DATASETS`` for a
known hub id, else split ``train`` and field ``text``). The documents are read with
``load_raw_dataset``; with ``max_documents`` the first that many are kept; empty documents are
dropped; the validation documents are a ``val_fraction`` of them drawn with ``seed`` — or, with
``val_split``, the source's own split of that name (``val_fraction`` is then unused). Each split's
documents are joined with EOS after each one and cut into ``seq_len`` blocks (``pack_documents``).

Cache key: SHA-256 of the canonical JSON of {format version, the normalized source — with a local
``path`` replaced by its absolute path and every file's relative name, size and mtime —, the
tokenizer's identity (BPE: its vocabulary size; pretrained: its content fingerprint), seq_len,
val_fraction (None with val_split), seed}. Locking and atomic publication: ``cache.build_once``.
Blocks are loaded memory-mapped, so the workers of one machine share the pages.

Scale: the packed stream is built in memory as int64 (8 bytes a token); a full OpenWebText
(~9 B GPT-2 tokens) does not fit — use ``max_documents`` or a machine with that much memory.
"""
from __future__ import annotations

import json
import random
import shutil
import time
from pathlib import Path
from typing import Callable

import torch

from .cache import build_once, cache_key, path_fingerprint
from .packed import PackedData, pack_documents
from .sources import KNOWN_DATASETS, DataNotFoundError, available_splits, data_hint, load_raw_dataset
from .tokenizer import train_bpe_tokenizer
from .tokenizer_spec import ResolvedTokenizer, eos_id_of, materialize_tokenizer, resolve_tokenizer_spec

__all__ = ["PackedData", "normalize_source", "prepare_pretraining_data", "pretraining_cache_path",
           "source_identity", "split_indices"]

PRETRAIN_FORMAT_VERSION = 1
SOURCE_KEYS = ("hub_id", "path", "split", "text_field", "config_name", "max_documents", "val_split")


# ----------------------------------------------------------------------------------------------
# source description
# ----------------------------------------------------------------------------------------------
def normalize_source(source: dict, *, text_field_default: str | None = "text") -> dict:
    """``source`` with every key of ``SOURCE_KEYS`` present, defaults filled in, values checked."""
    source = dict(source or {})
    unknown = set(source) - set(SOURCE_KEYS)
    if unknown:
        raise ValueError(f"unknown key(s) {', '.join(sorted(unknown))} in a data source; "
                         f"allowed: {', '.join(SOURCE_KEYS)}")
    hub_id, path = source.get("hub_id") or None, source.get("path") or None
    if hub_id is None and path is None:
        raise ValueError("a data source needs a hub_id or a path")
    info = KNOWN_DATASETS.get(hub_id) if hub_id else None
    max_docs = source.get("max_documents")
    if max_docs is not None and (not isinstance(max_docs, int) or isinstance(max_docs, bool) or max_docs < 1):
        raise ValueError(f"max_documents must be a positive integer or null, got {max_docs!r}")
    text_default = info.text_field if info and info.text_field else text_field_default
    return {
        "hub_id": hub_id,
        "path": None if path is None else str(path),
        "split": source["split"] if "split" in source else (info.split if info else "train"),
        "text_field": source.get("text_field") or text_default,
        "config_name": source["config_name"] if "config_name" in source else (info.config_name if info else None),
        "max_documents": max_docs,
        "val_split": source.get("val_split") or None,
    }


def source_identity(src: dict, config_key: str = "data.path") -> dict:
    """The JSON-able identity of a normalized source: a local path becomes its fingerprint."""
    ident = dict(src)
    if src["path"] is not None:
        p = Path(src["path"]).expanduser()
        if not p.exists():
            what = f"dataset {src['hub_id']}" if src["hub_id"] else "dataset"
            raise DataNotFoundError(f"{what} not found at {src['path']} (no such file or folder): "
                                    f"{data_hint(src['hub_id'], config_key)}")
        ident["path"] = path_fingerprint(p)
    return ident


def _load_split(src: dict, split: str | None, cache_dir: Path):
    return load_raw_dataset(src["hub_id"], src["path"], split=split, config_name=src["config_name"],
                            cache_dir=cache_dir)


def load_source_splits(src: dict, hf_cache: Path):
    """``(train_ds, val_ds or None)`` of a normalized source (``val_ds`` only with ``val_split``)."""
    if src["val_split"] is not None and src["path"] is not None:
        if available_splits(src["path"], src["config_name"]) is None:
            raise ValueError(f"{src['path']} has no separate splits, so val_split="
                             f"{src['val_split']!r} cannot be used: drop val_split (val_fraction is then used)")
    train = _load_split(src, src["split"], hf_cache)
    if src["max_documents"] is not None and src["max_documents"] < len(train):
        train = train.select(range(src["max_documents"]))
    val = None if src["val_split"] is None else _load_split(src, src["val_split"], hf_cache)
    return train, val


def split_indices(n: int, val_fraction: float, seed: int) -> tuple[list[int], list[int]]:
    """Document-level split: ``round(val_fraction * n)`` validation documents drawn with ``seed``;
    both index lists sorted (the story pipeline's split, unchanged)."""
    order = list(range(n))
    random.Random(f"acco-val-split:{seed}").shuffle(order)
    n_val = int(round(val_fraction * n))
    return sorted(order[n_val:]), sorted(order[:n_val])


# ----------------------------------------------------------------------------------------------
# shared build core (also used by prepare_story_data)
# ----------------------------------------------------------------------------------------------
def _texts(ds, field: str):
    def gen():
        for batch in ds.iter(batch_size=1000):
            yield from batch[field]
    return gen


def tokenize_column(ds, tokenizer, field: str, tag: str):
    """The token ids of every document of ``ds[field]`` (no special tokens), in order."""
    if len(ds) == 0:  # .map would not even create the column
        return []

    def encode(batch):
        return {"input_ids": tokenizer(batch[field], add_special_tokens=False, verbose=False)["input_ids"]}

    return ds.map(encode, batched=True, batch_size=1000, remove_columns=ds.column_names,
                  keep_in_memory=True, new_fingerprint=f"acco-tok-{tag}")["input_ids"]


def build_packed(out: Path, train_ds, val_ds, field: str, tok: ResolvedTokenizer, seq_len: int,
                 lap: Callable[[str], None], tag: str, train_fn=train_bpe_tokenizer) -> dict:
    """Tokenizer (trained on ``train_ds`` for a BPE), tokenize, pack, save ``blocks.pt`` in ``out``.

    Returns the meta entries describing the result (``lap`` is called after each stage).
    """
    tokenizer, tok_file = materialize_tokenizer(tok, _texts(train_ds, field), out, train_fn=train_fn)
    eos_id = eos_id_of(tokenizer)
    lap("train_tokenizer")
    train_ids = tokenize_column(train_ds, tokenizer, field, f"train-{tag}")
    val_ids = tokenize_column(val_ds, tokenizer, field, f"val-{tag}")
    n_tokens = {"train": sum(len(d) for d in train_ids), "val": sum(len(d) for d in val_ids)}
    train_blocks = pack_documents(train_ids, eos_id, seq_len)
    val_blocks = pack_documents(val_ids, eos_id, seq_len)
    lap("tokenize_and_pack")
    torch.save({"train": train_blocks, "val": val_blocks}, out / "blocks.pt")
    return {
        "tokenizer_file": tok_file,
        "tokenizer_vocab_size": len(tokenizer),
        "eos_id": int(eos_id),
        "eos_token": tokenizer.convert_ids_to_tokens(eos_id),
        "num_train_docs": len(train_ds),
        "num_val_docs": len(val_ds),
        "num_train_tokens": n_tokens["train"],  # without the EOS separators
        "num_val_tokens": n_tokens["val"],
        "num_train_blocks": int(train_blocks.shape[0]),
        "num_val_blocks": int(val_blocks.shape[0]),
    }


def stage_timer():
    """``(lap, timings, t0)``: ``lap(stage)`` records the seconds since the previous lap."""
    t0 = time.perf_counter()
    timings: dict[str, float] = {}

    def lap(stage: str) -> None:
        timings[stage] = round(time.perf_counter() - t0 - sum(timings.values()), 3)

    return lap, timings, t0


def load_packed(final: Path) -> PackedData:
    meta = json.loads((final / "meta.json").read_text())
    blocks = torch.load(final / "blocks.pt", map_location="cpu", weights_only=True, mmap=True)
    return PackedData(
        train_blocks=blocks["train"],
        val_blocks=blocks["val"],
        vocab_size=int(meta["tokenizer_vocab_size"]),
        eos_id=int(meta["eos_id"]),
        tokenizer_path=str(final / meta.get("tokenizer_file", "tokenizer.json")),
    )


# ----------------------------------------------------------------------------------------------
# the general pipeline
# ----------------------------------------------------------------------------------------------
def _check(seq_len: int, val_fraction: float) -> None:
    if not 0.0 <= val_fraction < 1.0:
        raise ValueError(f"val_fraction must be in [0, 1), got {val_fraction}")
    if seq_len < 1:
        raise ValueError(f"seq_len must be >= 1, got {seq_len}")


def _key(src: dict, tok: ResolvedTokenizer, seq_len: int, val_fraction: float, seed: int) -> dict:
    return {
        "format": PRETRAIN_FORMAT_VERSION,
        "source": source_identity(src),
        "tokenizer": tok.identity,
        "seq_len": int(seq_len),
        "val_fraction": None if src["val_split"] else float(val_fraction),
        "seed": int(seed),
    }


def pretraining_cache_path(source: dict, tokenizer: dict, seq_len: int, val_fraction: float, seed: int,
                           cache_dir) -> Path:
    """The folder ``prepare_pretraining_data`` uses for these arguments (it may not exist yet)."""
    src = normalize_source(source)
    key = _key(src, resolve_tokenizer_spec(tokenizer), seq_len, val_fraction, seed)
    return Path(cache_dir) / f"pretrain-{cache_key(key)}"


def _not_empty(field: str):
    def keep(batch):
        return [t is not None and bool(t.strip()) for t in batch[field]]
    return keep


def _build(tmp: Path, name: str, src: dict, tok: ResolvedTokenizer, key: dict, seq_len: int,
           val_fraction: float, seed: int) -> None:
    lap, timings, t0 = stage_timer()
    hf_cache = tmp / "hf_cache"
    field = src["text_field"]
    train_ds, val_ds = load_source_splits(src, hf_cache)
    for ds in (train_ds, val_ds):
        if ds is not None and field not in ds.column_names:
            raise ValueError(f"the data has no field {field!r} (columns: {', '.join(ds.column_names)}): "
                             f"set the source's text_field")
    n_raw = len(train_ds)
    train_ds = train_ds.filter(_not_empty(field), batched=True, keep_in_memory=True)
    if val_ds is None:
        train_idx, val_idx = split_indices(len(train_ds), val_fraction, seed)
        train_ds, val_ds = train_ds.select(train_idx), train_ds.select(val_idx)
    else:
        val_ds = val_ds.filter(_not_empty(field), batched=True, keep_in_memory=True)
    if len(train_ds) == 0:
        raise ValueError(f"no training documents in {src['path'] or src['hub_id']}")
    lap("load_and_split")
    meta = {"key": key, "cache_name": name, "num_raw_docs": n_raw}
    meta.update(build_packed(tmp, train_ds, val_ds, field, tok, seq_len, lap, tag=tmp.name))
    del train_ds, val_ds
    shutil.rmtree(hf_cache, ignore_errors=True)
    meta.update({"build_seconds": round(time.perf_counter() - t0, 3), "build_stage_seconds": timings})
    (tmp / "meta.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")


def prepare_pretraining_data(source: dict, tokenizer: dict, seq_len: int, val_fraction: float, seed: int,
                             cache_dir) -> PackedData:
    """Load, tokenize and pack a text dataset, or load the result from ``cache_dir``.

    Idempotent and safe to call from several processes at once (see the module docstring).
    """
    _check(seq_len, val_fraction)
    src = normalize_source(source)
    tok = resolve_tokenizer_spec(tokenizer)
    key = _key(src, tok, seq_len, val_fraction, seed)
    name = f"pretrain-{cache_key(key)}"
    return build_once(cache_dir, name,
                      lambda tmp: _build(tmp, name, src, tok, key, seq_len, val_fraction, seed), load_packed)
