"""The general pretraining pipeline: a raw text dataset -> tokenizer -> constant-length blocks.

``prepare_pretraining_data(source, tokenizer, seq_len, val_fraction, seed, cache_dir, num_proc)``
builds once and caches, in ``<cache_dir>/pretrain-<key>/``:

* ``tokenizer.json`` (a BPE trained on the training documents) or ``tokenizer/`` (a copy of the
  pretrained tokenizer);
* ``train.bin`` / ``val.bin``: the packed token streams (``token_file``: ``uint16`` ids when the
  vocabulary fits, else ``uint32``), read back as ``TokenBlocks`` ``[n, seq_len]`` through a
  memory map, so the workers of one machine share the pages;
* ``meta.json``: the key's ingredients, the token dtype and the sizes.

``source``: ``{"hub_id", "path", "split", "text_field", "config_name", "max_documents",
"val_split"}`` (all optional but one of hub_id/path; defaults come from ``KNOWN_DATASETS`` for a
known hub id, else split ``train`` and field ``text``). The documents are read with
``load_raw_dataset``; with ``max_documents`` the first that many are kept; empty documents are
dropped; the validation documents are a ``val_fraction`` of them drawn with ``seed``
(``split.split_roles``) — or, with ``val_split``, the source's own split of that name
(``val_fraction`` is then unused). Each split's documents are joined with EOS after each one and
cut into ``seq_len`` blocks.

Scale: the build streams (``build_blocks``): the documents are tokenized by ``num_proc`` processes
(default: the CPUs this process may use) into Arrow files on disk and packed batch by batch into
the token files, so its memory does not grow with the number of tokens (a full OpenWebText, ~9 B
GPT-2 tokens, needs ~18 GB of disk for the token files, as much again for the Arrow token ids while
building, and datasets' Arrow copy of the text when the source is not a saved dataset). What does
grow with the corpus is O(documents): ~14 bytes a document while splitting, 1 byte a document
after.

A hub id without a ``path`` is read from its snapshot folder in the hub cache (``locate_source``;
``sources.locate_hub_dataset``), like a local copy.

Cache key: SHA-256 of the canonical JSON of {format version, the normalized source, the tokenizer's
identity (BPE: its vocabulary size; pretrained: its content fingerprint), seq_len, val_fraction
(None with val_split), seed}; ``num_proc`` does not change the result and is not part of it. In
the source, what is read stands for where it is read from (``source_identity``):

* a source with a hub id: the hub id and the relative name and size of each file read
  (``sources.source_files``), not where they lie — the hub cache's snapshot, a ``hf download
  --local-dir`` copy of it or the same files elsewhere give one key, so switching a config from the
  hub id to ``data.source.path`` keeps the tokenized cache, while another copy under the same hub id
  (the rehearsal's small stand-ins) has other sizes and its own key;
* a local ``path`` alone: its absolute path and every file's relative name, size and mtime, so
  editing or replacing a file of one's own gives another key.

Locking and atomic publication: ``cache.build_once``.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import numpy as np

from .build_blocks import build_packed, load_packed, nonempty_mask, stage_timer
from .cache import build_once, cache_key, path_fingerprint
from .packed import PackedData
from .sources import (
    KNOWN_DATASETS,
    DataNotFoundError,
    available_splits,
    data_hint,
    load_raw_dataset,
    locate_hub_dataset,
    source_files,
)
from .split import TRAIN, VAL, split_indices, split_roles
from .tokenizer_spec import ResolvedTokenizer, resolve_tokenizer_spec

__all__ = [
    "PackedData",
    "locate_source",
    "normalize_source",
    "prepare_pretraining_data",
    "pretraining_cache_path",
    "source_identity",
    "split_indices",
]

# 2: token files (train.bin/val.bin, uint16/uint32) instead of blocks.pt
PRETRAIN_FORMAT_VERSION = 2
SOURCE_KEYS = ("hub_id", "path", "split", "text_field", "config_name", "max_documents", "val_split")


# ----------------------------------------------------------------------------------------------
# source description
# ----------------------------------------------------------------------------------------------
def normalize_source(source: dict, *, text_field_default: str | None = "text") -> dict:
    """``source`` with every key of ``SOURCE_KEYS`` present, defaults filled in, values checked."""
    source = dict(source or {})
    unknown = set(source) - set(SOURCE_KEYS)
    if unknown:
        raise ValueError(
            f"unknown key(s) {', '.join(sorted(unknown))} in a data source; allowed: {', '.join(SOURCE_KEYS)}"
        )
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


def locate_source(src: dict, config_key: str = "data.source.path") -> dict:
    """A normalized source whose data is on disk: a hub id without a path gets its snapshot folder in
    the hub cache as its path (downloaded there when missing and the hub is reachable)."""
    if src["path"] is None and src["hub_id"]:
        return dict(src, path=str(locate_hub_dataset(src["hub_id"], config_key)))
    return src


def source_identity(src: dict, config_key: str = "data.path") -> dict:
    """The JSON-able identity of a normalized source (see the module docstring, *Cache key*)."""
    src = locate_source(src, config_key)
    ident = dict(src)
    p = Path(src["path"]).expanduser()
    if not p.exists():
        what = f"dataset {src['hub_id']}" if src["hub_id"] else "dataset"
        raise DataNotFoundError(
            f"{what} not found at {src['path']} (no such file or folder): {data_hint(src['hub_id'], config_key)}"
        )
    if src["hub_id"]:  # what is read, not where the copy lies
        ident["path"] = {"files": source_files(p, [src["split"], src["val_split"]], src["config_name"])}
    else:
        ident["path"] = path_fingerprint(p)
    return ident


def _load_split(src: dict, split: str | None, cache_dir: Path):
    return load_raw_dataset(
        src["hub_id"], src["path"], split=split, config_name=src["config_name"], cache_dir=cache_dir
    )


def load_source_splits(src: dict, hf_cache: Path):
    """``(train_ds, val_ds or None)`` of a normalized source (``val_ds`` only with ``val_split``)."""
    if src["val_split"] is not None and src["path"] is not None:
        if available_splits(src["path"], src["config_name"]) is None:
            raise ValueError(
                f"{src['path']} has no separate splits, so val_split="
                f"{src['val_split']!r} cannot be used: drop val_split (val_fraction is then used)"
            )
    train = _load_split(src, src["split"], hf_cache)
    if src["max_documents"] is not None and src["max_documents"] < len(train):
        train = train.select(range(src["max_documents"]))
    val = None if src["val_split"] is None else _load_split(src, src["val_split"], hf_cache)
    return train, val


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


def pretraining_cache_path(
    source: dict, tokenizer: dict, seq_len: int, val_fraction: float, seed: int, cache_dir
) -> Path:
    """The folder ``prepare_pretraining_data`` uses for these arguments (it may not exist yet)."""
    src = locate_source(normalize_source(source))
    key = _key(src, resolve_tokenizer_spec(tokenizer), seq_len, val_fraction, seed)
    return Path(cache_dir) / f"pretrain-{cache_key(key)}"


def source_segments(src: dict, hf_cache: Path, val_fraction: float, seed: int) -> list:
    """``[(dataset, roles), ...]`` of a normalized source: its training split with every document's
    role (``split_roles``), or with ``val_split`` the training split (TRAIN) then the validation
    split (VAL); empty documents are DROPPED."""
    field = src["text_field"]
    train_ds, val_ds = load_source_splits(src, hf_cache)
    for ds in (train_ds, val_ds):
        if ds is not None and field not in ds.column_names:
            raise ValueError(
                f"the data has no field {field!r} (columns: {', '.join(ds.column_names)}): set the source's text_field"
            )
    if val_ds is None:
        segments = [(train_ds, split_roles(nonempty_mask(train_ds, field), val_fraction, seed))]
    else:
        segments = [
            (train_ds, nonempty_mask(train_ds, field).astype(np.uint8) * np.uint8(TRAIN)),
            (val_ds, nonempty_mask(val_ds, field).astype(np.uint8) * np.uint8(VAL)),
        ]
    if not any((roles == TRAIN).any() for _, roles in segments):
        raise ValueError(f"no training documents in {src['path'] or src['hub_id']}")
    return segments


def _build(
    tmp: Path,
    name: str,
    src: dict,
    tok: ResolvedTokenizer,
    key: dict,
    seq_len: int,
    val_fraction: float,
    seed: int,
    num_proc: int | None,
) -> None:
    lap, timings, t0 = stage_timer()
    hf_cache = tmp / "hf_cache"
    segments = source_segments(src, hf_cache, val_fraction, seed)
    lap("load_and_split")
    meta = {"key": key, "cache_name": name, "num_raw_docs": len(segments[0][0])}
    meta.update(build_packed(tmp, segments, src["text_field"], tok, seq_len, lap, num_proc=num_proc))
    del segments
    shutil.rmtree(hf_cache, ignore_errors=True)
    meta.update({"build_seconds": round(time.perf_counter() - t0, 3), "build_stage_seconds": timings})
    (tmp / "meta.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")


def prepare_pretraining_data(
    source: dict, tokenizer: dict, seq_len: int, val_fraction: float, seed: int, cache_dir, num_proc: int | None = None
) -> PackedData:
    """Load, tokenize and pack a text dataset, or load the result from ``cache_dir``.

    ``num_proc``: tokenizer processes (None: ``build_blocks.default_num_proc``). Idempotent and
    safe to call from several processes at once (see the module docstring).
    """
    _check(seq_len, val_fraction)
    src = locate_source(normalize_source(source))
    tok = resolve_tokenizer_spec(tokenizer)
    key = _key(src, tok, seq_len, val_fraction, seed)
    name = f"pretrain-{cache_key(key)}"
    return build_once(
        cache_dir,
        name,
        lambda tmp: _build(tmp, name, src, tok, key, seq_len, val_fraction, seed, num_proc),
        load_packed,
    )
