"""Prepare the CPU-scale pretraining data: generated stories -> HF ``datasets`` -> BPE -> packed blocks.

``prepare_story_data`` builds (once) and caches, in ``<cache_dir>/stories-<hash>/``:

* ``raw/stories-XXXXX.jsonl``: the generated corpus, read back through ``load_raw_dataset`` (i.e.
  ``datasets.load_dataset("json", ...)``) so the real Hugging Face loading path is exercised;
* ``tokenizer.json``: the byte-level BPE trained on the training documents only;
* ``train.bin`` / ``val.bin``: the packed token streams (``uint16``), read as ``TokenBlocks``;
* ``meta.json``: the parameters and sizes.

It is the special case of the general pipeline (``prepare_pretraining_data``) where the source is the generated
corpus and the tokenizer ``{"kind": "bpe", "vocab_size": vocab_size}``: the same document-level
split, tokenizer training, tokenization and packing (``build_blocks.build_packed``), with its own
cache key (the generator's parameters, see ``story_cache_path``). The blocks' token values are
those of the in-memory packing of format 1 (same split, tokenizer and order).

Concurrency: any number of processes (the workers of one job, or several jobs) may call it at
once. The build runs under an exclusive ``fcntl.flock`` on ``<cache_dir>/stories-<hash>.lock``,
writes into a temporary folder and publishes it with one ``os.rename`` (``cache.build_once``); a
folder named ``stories-<hash>`` is therefore always complete. The ``datasets`` library's own cache
lives in the temporary folder and is deleted with it, and only local files are read, so it works
offline (``HF_DATASETS_OFFLINE=1`` / ``HF_HUB_OFFLINE=1``).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from pathlib import Path

from .build_blocks import build_packed, load_packed, nonempty_mask, stage_timer
from .cache import build_once
from .packed import PackedData
from .sources import load_raw_dataset
from .split import split_roles
from .stories import generate_stories
from .tokenizer import train_bpe_tokenizer
from .tokenizer_spec import resolve_tokenizer_spec

__all__ = ["PackedData", "prepare_story_data", "story_cache_path"]

# Bump when the generator, tokenizer recipe or packing changes, so old caches are not reused.
# 2: token files (train.bin/val.bin) instead of blocks.pt.
CACHE_FORMAT_VERSION = 2
_STORIES_PER_FILE = 5000


def _params(num_stories: int, seed: int, vocab_size: int, seq_len: int, val_fraction: float) -> dict:
    return {
        "format": CACHE_FORMAT_VERSION,
        "num_stories": int(num_stories),
        "seed": int(seed),
        "vocab_size": int(vocab_size),
        "seq_len": int(seq_len),
        "val_fraction": float(val_fraction),
    }


def story_cache_path(
    cache_dir, num_stories: int, seed: int, vocab_size: int, seq_len: int, val_fraction: float = 0.05
) -> Path:
    """The folder ``prepare_story_data`` uses for these parameters (it may not exist yet)."""
    key = json.dumps(_params(num_stories, seed, vocab_size, seq_len, val_fraction), sort_keys=True)
    return Path(cache_dir) / f"stories-{hashlib.sha256(key.encode()).hexdigest()[:16]}"


def _load(final: Path) -> PackedData:
    return load_packed(final)


def _build(tmp: Path, params: dict, num_proc: int | None = None) -> None:
    lap, timings, t0 = stage_timer()
    num_stories, seed = params["num_stories"], params["seed"]

    # 1. the corpus as jsonl shards (story i is the same whatever the shard size)
    raw = tmp / "raw"
    raw.mkdir(parents=True)
    stories = generate_stories(num_stories, seed)
    for start in range(0, num_stories, _STORIES_PER_FILE):
        path = raw / f"stories-{start // _STORIES_PER_FILE:05d}.jsonl"
        with open(path, "w", encoding="utf-8") as fh:
            for text in stories[start : start + _STORIES_PER_FILE]:
                fh.write(json.dumps({"text": text}, ensure_ascii=False) + "\n")
    del stories
    lap("generate")

    # 2. read back through the Hugging Face loader; its cache stays inside the temporary folder
    hf_cache = tmp / "hf_cache"
    ds = load_raw_dataset(None, str(raw), split="train", cache_dir=hf_cache)
    if len(ds) != num_stories:
        raise RuntimeError(f"datasets read {len(ds)} stories back, expected {num_stories}")
    lap("load_dataset")

    # 3. document-level train/validation split with a fixed seed (the stories are never empty)
    roles = split_roles(nonempty_mask(ds, "text"), params["val_fraction"], seed)
    lap("split")

    # 4-5. tokenizer trained on the training documents only; tokenize and pack each split
    tok = resolve_tokenizer_spec({"kind": "bpe", "vocab_size": params["vocab_size"]})
    built = build_packed(
        tmp, [(ds, roles)], "text", tok, params["seq_len"], lap, train_fn=train_bpe_tokenizer, num_proc=num_proc
    )
    del ds
    shutil.rmtree(hf_cache, ignore_errors=True)

    # 6. save
    meta = dict(params)
    meta.update(built)
    meta.update({"build_seconds": round(time.perf_counter() - t0, 3), "build_stage_seconds": timings})
    (tmp / "meta.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")


def prepare_story_data(
    cache_dir,
    num_stories: int,
    seed: int,
    vocab_size: int,
    seq_len: int,
    val_fraction: float = 0.05,
    num_proc: int | None = None,
) -> PackedData:
    """Generate, tokenize and pack the embedded story corpus, or load it from ``cache_dir``.

    ``num_proc``: tokenizer processes (None: ``build_blocks.default_num_proc``; the result does
    not depend on it). Idempotent and safe to call from several processes at once (see the module
    docstring).
    """
    if num_stories < 1:
        raise ValueError(f"num_stories must be >= 1, got {num_stories}")
    if not 0.0 <= val_fraction < 1.0:
        raise ValueError(f"val_fraction must be in [0, 1), got {val_fraction}")
    if seq_len < 1:
        raise ValueError(f"seq_len must be >= 1, got {seq_len}")
    params = _params(num_stories, seed, vocab_size, seq_len, val_fraction)
    final = story_cache_path(cache_dir, num_stories, seed, vocab_size, seq_len, val_fraction)
    # _build and _load are looked up at call time (tests replace them)
    return build_once(cache_dir, final.name, lambda tmp: _build(tmp, params, num_proc), lambda f: _load(f))
