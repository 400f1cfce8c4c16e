"""Prepare the CPU-scale pretraining data: generated stories -> HF ``datasets`` -> BPE -> packed blocks.

``prepare_story_data`` builds (once) and caches, in ``<cache_dir>/stories-<hash>/``:

* ``raw/stories-XXXXX.jsonl``: the generated corpus, read back through
  ``datasets.load_dataset("json", ...)`` so the real Hugging Face loading path is exercised;
* ``tokenizer.json``: the byte-level BPE trained on the training documents only;
* ``blocks.pt``: ``{"train": LongTensor[n, seq_len], "val": LongTensor[m, seq_len]}``;
* ``meta.json``: the parameters and sizes.

Concurrency: any number of processes (the workers of one job, or several jobs) may call it at
once. The build runs under an exclusive ``fcntl.flock`` on ``<cache_dir>/stories-<hash>.lock``,
writes into a temporary folder and publishes it with one ``os.rename``; a folder named
``stories-<hash>`` is therefore always complete. The ``datasets`` library's own cache lives in the
temporary folder and is deleted with it, and only local files are read, so it works offline
(``HF_DATASETS_OFFLINE=1`` / ``HF_HUB_OFFLINE=1``).
"""
from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import json
import os
import random
import shutil
import time
import uuid
from contextlib import contextmanager
from pathlib import Path

import torch

from .packed import pack_documents
from .stories import generate_stories
from .tokenizer import EOS_TOKEN, train_bpe_tokenizer

__all__ = ["PackedData", "prepare_story_data", "story_cache_path"]

# Bump when the generator, tokenizer recipe or packing changes, so old caches are not reused.
CACHE_FORMAT_VERSION = 1
_STORIES_PER_FILE = 5000


@dataclasses.dataclass
class PackedData:
    train_blocks: torch.Tensor  # LongTensor [n_train_blocks, seq_len]
    val_blocks: torch.Tensor  # LongTensor [n_val_blocks, seq_len]
    vocab_size: int  # the tokenizer's real vocabulary size
    eos_id: int
    tokenizer_path: str


def _params(num_stories: int, seed: int, vocab_size: int, seq_len: int, val_fraction: float) -> dict:
    return {
        "format": CACHE_FORMAT_VERSION,
        "num_stories": int(num_stories),
        "seed": int(seed),
        "vocab_size": int(vocab_size),
        "seq_len": int(seq_len),
        "val_fraction": float(val_fraction),
    }


def story_cache_path(cache_dir, num_stories: int, seed: int, vocab_size: int, seq_len: int,
                     val_fraction: float = 0.05) -> Path:
    """The folder ``prepare_story_data`` uses for these parameters (it may not exist yet)."""
    key = json.dumps(_params(num_stories, seed, vocab_size, seq_len, val_fraction), sort_keys=True)
    return Path(cache_dir) / f"stories-{hashlib.sha256(key.encode()).hexdigest()[:16]}"


@contextmanager
def _exclusive_lock(path: Path):
    with open(path, "a+") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


@contextmanager
def _quiet_datasets():
    """Silence ``datasets`` progress bars for the build, restoring the caller's setting."""
    import datasets

    was_enabled = datasets.is_progress_bar_enabled()
    datasets.disable_progress_bars()
    try:
        yield
    finally:
        if was_enabled:
            datasets.enable_progress_bars()


def _load(final: Path) -> PackedData:
    meta = json.loads((final / "meta.json").read_text())
    blocks = torch.load(final / "blocks.pt", map_location="cpu", weights_only=True)
    return PackedData(
        train_blocks=blocks["train"],
        val_blocks=blocks["val"],
        vocab_size=int(meta["tokenizer_vocab_size"]),
        eos_id=int(meta["eos_id"]),
        tokenizer_path=str(final / "tokenizer.json"),
    )


def _build(tmp: Path, params: dict) -> None:
    import datasets

    from .tokenizer import load_tokenizer

    t0 = time.perf_counter()
    timings: dict[str, float] = {}

    def lap(stage: str) -> None:
        timings[stage] = round(time.perf_counter() - t0 - sum(timings.values()), 3)

    num_stories, seed = params["num_stories"], params["seed"]
    seq_len, val_fraction = params["seq_len"], params["val_fraction"]

    # 1. the corpus as jsonl shards (story i is the same whatever the shard size)
    raw = tmp / "raw"
    raw.mkdir(parents=True)
    stories = generate_stories(num_stories, seed)
    files = []
    for start in range(0, num_stories, _STORIES_PER_FILE):
        path = raw / f"stories-{start // _STORIES_PER_FILE:05d}.jsonl"
        with open(path, "w", encoding="utf-8") as fh:
            for text in stories[start:start + _STORIES_PER_FILE]:
                fh.write(json.dumps({"text": text}, ensure_ascii=False) + "\n")
        files.append(str(path))
    del stories
    lap("generate")

    # 2. read back through the Hugging Face loader; its cache stays inside the temporary folder
    hf_cache = tmp / "hf_cache"
    ds = datasets.load_dataset("json", data_files=files, split="train", cache_dir=str(hf_cache))
    if len(ds) != num_stories:
        raise RuntimeError(f"datasets read {len(ds)} stories back, expected {num_stories}")
    lap("load_dataset")

    # 3. document-level train/validation split with a fixed seed
    order = list(range(num_stories))
    random.Random(f"acco-val-split:{seed}").shuffle(order)
    n_val = int(round(val_fraction * num_stories))
    val_idx = sorted(order[:n_val])
    train_idx = sorted(order[n_val:])
    train_ds, val_ds = ds.select(train_idx), ds.select(val_idx)
    lap("split")

    # 4. tokenizer trained on the training documents only
    tok_path = tmp / "tokenizer.json"
    train_bpe_tokenizer(train_ds["text"], params["vocab_size"], tok_path)
    tokenizer = load_tokenizer(tok_path)
    eos_id = tokenizer.convert_tokens_to_ids(EOS_TOKEN)
    lap("train_tokenizer")

    # 5. tokenize (batched .map, in memory: nothing more is written) and pack each split
    def encode(batch):
        return {"input_ids": tokenizer(batch["text"], add_special_tokens=False)["input_ids"]}

    def tokenize(split_ds, name):
        if len(split_ds) == 0:  # val_fraction=0: .map would not even create the column
            return {"input_ids": []}
        return split_ds.map(encode, batched=True, batch_size=1000, remove_columns=["text"],
                            keep_in_memory=True, new_fingerprint=f"acco-tok-{name}-{tmp.name}")

    train_ids = tokenize(train_ds, "train")["input_ids"]
    val_ids = tokenize(val_ds, "val")["input_ids"]
    n_tokens = {"train": sum(len(d) for d in train_ids), "val": sum(len(d) for d in val_ids)}
    train_blocks = pack_documents(train_ids, eos_id, seq_len)
    val_blocks = pack_documents(val_ids, eos_id, seq_len)
    del ds, train_ds, val_ds
    shutil.rmtree(hf_cache, ignore_errors=True)
    lap("tokenize_and_pack")

    # 6. save
    torch.save({"train": train_blocks, "val": val_blocks}, tmp / "blocks.pt")
    meta = dict(params)
    meta.update({
        "tokenizer_vocab_size": len(tokenizer),
        "eos_id": int(eos_id),
        "eos_token": EOS_TOKEN,
        "num_train_docs": len(train_idx),
        "num_val_docs": len(val_idx),
        "num_train_tokens": n_tokens["train"],  # without the EOS separators
        "num_val_tokens": n_tokens["val"],
        "num_train_blocks": int(train_blocks.shape[0]),
        "num_val_blocks": int(val_blocks.shape[0]),
        "build_seconds": round(time.perf_counter() - t0, 3),
        "build_stage_seconds": timings,
    })
    (tmp / "meta.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")


def prepare_story_data(cache_dir, num_stories: int, seed: int, vocab_size: int, seq_len: int,
                       val_fraction: float = 0.05) -> PackedData:
    """Generate, tokenize and pack the embedded story corpus, or load it from ``cache_dir``.

    Idempotent and safe to call from several processes at once (see the module docstring).
    """
    if num_stories < 1:
        raise ValueError(f"num_stories must be >= 1, got {num_stories}")
    if not 0.0 <= val_fraction < 1.0:
        raise ValueError(f"val_fraction must be in [0, 1), got {val_fraction}")
    if seq_len < 1:
        raise ValueError(f"seq_len must be >= 1, got {seq_len}")
    params = _params(num_stories, seed, vocab_size, seq_len, val_fraction)
    cache_dir = Path(cache_dir)
    final = story_cache_path(cache_dir, num_stories, seed, vocab_size, seq_len, val_fraction)
    if final.is_dir():  # published folders are always complete
        return _load(final)

    cache_dir.mkdir(parents=True, exist_ok=True)
    with _exclusive_lock(cache_dir / f"{final.name}.lock"):
        if final.is_dir():  # another process built it while we waited
            return _load(final)
        # we hold the lock: temporary folders of this key are leftovers of a crashed build
        for stale in cache_dir.glob(f".tmp-{final.name}-*"):
            shutil.rmtree(stale, ignore_errors=True)
        tmp = cache_dir / f".tmp-{final.name}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        tmp.mkdir()
        try:
            with _quiet_datasets():
                _build(tmp, params)
            os.rename(tmp, final)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    return _load(final)
