"""The build core shared by the pretraining pipelines (``prepare_pretraining_data``, ``prepare_story_data``): raw
documents -> tokenizer -> token ids in parallel -> packed token files, in memory bounded by a batch.

``build_packed(out, segments, field, tok, seq_len, ...)`` takes the raw ``datasets.Dataset``s of a
build, each with the role of each document (``split.TRAIN`` / ``VAL`` / ``DROPPED``), and writes in
``out``:

1. the tokenizer: a BPE trained on the TRAIN documents, streamed to ``tokenizers``' trainer (which
   keeps word counts: its memory grows with the number of distinct words, not with the corpus),
   or a copy of the pretrained one;
2. the token ids of every document: ``Dataset.map(batched=True, num_proc=...)`` writing them to an
   Arrow file in ``out`` (on disk, ``uint16``/``uint32``); ``num_proc`` processes each tokenize a
   contiguous shard with one thread;
3. ``train.bin`` / ``val.bin`` (``token_file``): one pass over those Arrow files, batch by batch,
   appends each TRAIN (VAL) document's ids and EOS, documents in their order, to the token file;
   the Arrow files are then deleted.

Memory: nothing proportional to the number of tokens is held, only batches (``BATCH_DOCS``
documents of text, ``TOKENIZE_BATCH_DOCS`` in a tokenizer process, ``PACK_BATCH_DOCS`` of ids) and
per-document arrays (the roles: 1 byte a document). The peak is therefore the interpreter and its
libraries plus a few batches per process, whatever the corpus size (``tests/integration/test_data_memmap.py``
measures it: the same within a few MB for 3 M and 12.7 M tokens). The Arrow files are read through
``datasets``' memory maps: the pages read stay mapped as page cache (they count in RSS) but are
clean and reclaimable, which is how ``datasets`` handles corpora larger than the memory. (Before
this, ``datasets`` converts raw jsonl/parquet files to Arrow in the calling process, one file
chunk or row group at a time; the C allocator keeps some of that memory, growing slowly with the
text converted: +22 / +61 / +110 MB for 7 / 28 / 110 MB of text. A ``save_to_disk`` source is
Arrow already.)

The result does not depend on ``num_proc`` (the shards are contiguous and concatenated in order).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from .packed import PackedData
from .split import TRAIN, VAL
from .token_file import TokenBlocks, TokenFileWriter, token_dtype
from .tokenizer import train_bpe_tokenizer
from .tokenizer_spec import ResolvedTokenizer, eos_id_of, materialize_tokenizer

__all__ = [
    "BATCH_DOCS",
    "DOCS_PER_PROCESS",
    "PACK_BATCH_DOCS",
    "TOKENIZE_BATCH_DOCS",
    "build_packed",
    "default_num_proc",
    "load_packed",
    "nonempty_mask",
    "stage_timer",
    "usable_cpus",
]

BATCH_DOCS = 1000  # documents of text per batch read (split, tokenizer training)
# Documents per tokenization batch: the tokenizer's output for a batch is a Python structure of
# ~100 bytes a token (an OpenWebText document: ~1100 tokens), held by each tokenizer process.
TOKENIZE_BATCH_DOCS = 100
# Documents per packing batch: small buffers, which the allocators reuse from batch to batch
# (with 1000 documents, some tens of MB more stayed allocated after the pass).
PACK_BATCH_DOCS = 100
# Below this many documents per process, starting processes costs more than it saves.
DOCS_PER_PROCESS = 5000
SPLIT_FILES = {TRAIN: "train.bin", VAL: "val.bin"}


def usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def default_num_proc(n_docs: int) -> int:
    """The CPUs this process may use, but at least ``DOCS_PER_PROCESS`` documents a process."""
    return max(1, min(usable_cpus(), n_docs // DOCS_PER_PROCESS))


def nonempty_mask(ds, field: str) -> np.ndarray:
    """``bool`` per document: its ``field`` is a string with something else than whitespace."""
    keep = np.empty(len(ds), dtype=bool)
    start = 0
    for batch in ds.select_columns([field]).iter(batch_size=BATCH_DOCS):
        texts = batch[field]
        keep[start : start + len(texts)] = [t is not None and bool(t.strip()) for t in texts]
        start += len(texts)
    return keep


def _texts_of(segments, field: str, role: int) -> Callable[[], Iterator[str]]:
    def gen():
        for ds, roles in segments:
            start = 0
            for batch in ds.select_columns([field]).iter(batch_size=BATCH_DOCS):
                texts = batch[field]
                mine = roles[start : start + len(texts)] == role
                start += len(texts)
                yield from (t for t, m in zip(texts, mine) if m)

    return gen


@contextlib.contextmanager
def _one_thread_per_process():
    """Tokenizer processes forked by ``datasets`` each use one thread: they are as many as the
    CPUs, and ``tokenizers`` would otherwise start a thread pool of all the CPUs in each."""
    saved = os.environ.get("TOKENIZERS_PARALLELISM")
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("TOKENIZERS_PARALLELISM", None)
        else:
            os.environ["TOKENIZERS_PARALLELISM"] = saved


def tokenize_to_arrow(ds, tokenizer, field: str, dtype: np.dtype, cache_file: Path, num_proc: int):
    """``ds`` with one column ``input_ids`` (no special tokens) stored as ``dtype`` in ``cache_file``
    (``num_proc`` > 1: one file per shard, named by ``datasets`` after it)."""
    import datasets

    def encode(batch):
        texts = [t if t is not None else "" for t in batch[field]]  # None: a dropped document
        return {
            "input_ids": tokenizer(
                texts, add_special_tokens=False, return_attention_mask=False, return_token_type_ids=False, verbose=False
            )["input_ids"]
        }

    features = datasets.Features({"input_ids": datasets.List(datasets.Value(dtype.name))})
    num_proc = max(1, min(num_proc, len(ds)))
    context = _one_thread_per_process() if num_proc > 1 else contextlib.nullcontext()
    # unique per build and segment, short enough for datasets' per-shard suffixes (64 characters)
    fingerprint = "acco-tok-" + hashlib.sha256(os.fsencode(cache_file)).hexdigest()[:16]
    with context:
        return ds.map(
            encode,
            batched=True,
            batch_size=TOKENIZE_BATCH_DOCS,
            remove_columns=ds.column_names,
            features=features,
            cache_file_name=str(cache_file),
            load_from_cache_file=False,
            num_proc=num_proc if num_proc > 1 else None,
            new_fingerprint=fingerprint,
        )


def pack_into(tok_ds, roles: np.ndarray, writers: dict) -> None:
    """Append every document of ``tok_ds`` whose role has a writer to that writer, in order."""
    import pyarrow as pa
    import pyarrow.compute as pc

    start = 0
    for table in tok_ds.with_format("arrow").iter(batch_size=PACK_BATCH_DOCS):
        ids = table.column("input_ids")
        batch_roles = roles[start : start + table.num_rows]
        start += table.num_rows
        for role, writer in writers.items():
            mine = batch_roles == role
            if not mine.any():
                continue
            docs = ids.filter(pa.array(mine))
            writer.write(pc.list_flatten(docs).to_numpy(), pc.list_value_length(docs).to_numpy())
    if start != len(roles):
        raise RuntimeError(f"tokenized {start} documents, expected {len(roles)}")


def _max_id(tokenizer) -> int:
    return max(len(tokenizer) - 1, max(tokenizer.get_vocab().values()))


def build_packed(
    out: Path,
    segments: list,
    field: str,
    tok: ResolvedTokenizer,
    seq_len: int,
    lap: Callable[[str], None],
    train_fn=train_bpe_tokenizer,
    num_proc: int | None = None,
) -> dict:
    """Tokenizer, token ids, ``train.bin`` and ``val.bin`` in ``out`` (see the module docstring).

    ``segments``: ``[(dataset, roles), ...]``, the documents in stream order. Returns the meta
    entries describing the result (``lap`` is called after each stage).
    """
    tokenizer, tok_file = materialize_tokenizer(tok, _texts_of(segments, field, TRAIN), out, train_fn=train_fn)
    eos_id = eos_id_of(tokenizer)
    dtype = token_dtype(max(_max_id(tokenizer), eos_id))
    lap("train_tokenizer")
    n_docs = sum(len(ds) for ds, _ in segments)
    procs = default_num_proc(n_docs) if num_proc is None else int(num_proc)
    if procs < 1:
        raise ValueError(f"num_proc must be >= 1, got {num_proc}")
    writers = {role: TokenFileWriter(out / name, dtype, eos_id) for role, name in SPLIT_FILES.items()}
    try:
        for i, (ds, roles) in enumerate(segments):
            if len(ds) == 0:  # .map would not even create the column
                continue
            arrow_dir = out / f"tokens-{i}"
            arrow_dir.mkdir()
            tok_ds = tokenize_to_arrow(ds, tokenizer, field, dtype, arrow_dir / "ids.arrow", procs)
            lap(f"tokenize_{i}")
            pack_into(tok_ds, roles, writers)
            del tok_ds
            shutil.rmtree(arrow_dir)
            lap(f"pack_{i}")
    except BaseException:
        for w in writers.values():
            w.abort()
        raise
    n_blocks = {role: w.finish(seq_len) for role, w in writers.items()}
    train, val = writers[TRAIN], writers[VAL]
    return {
        "tokenizer_file": tok_file,
        "tokenizer_vocab_size": len(tokenizer),
        "eos_id": int(eos_id),
        "eos_token": tokenizer.convert_ids_to_tokens(eos_id),
        "seq_len": int(seq_len),
        "token_dtype": dtype.name,
        "tokenize_num_proc": procs,
        "num_train_docs": train.num_docs,
        "num_val_docs": val.num_docs,
        "num_train_tokens": train.num_doc_tokens,  # without the EOS separators
        "num_val_tokens": val.num_doc_tokens,
        "num_train_blocks": n_blocks[TRAIN],
        "num_val_blocks": n_blocks[VAL],
    }


def load_packed(final: Path) -> PackedData:
    meta = json.loads((final / "meta.json").read_text())
    seq_len, dtype = int(meta["seq_len"]), np.dtype(meta["token_dtype"]).newbyteorder("<")
    return PackedData(
        train_blocks=TokenBlocks(final / SPLIT_FILES[TRAIN], dtype, meta["num_train_blocks"], seq_len),
        val_blocks=TokenBlocks(final / SPLIT_FILES[VAL], dtype, meta["num_val_blocks"], seq_len),
        vocab_size=int(meta["tokenizer_vocab_size"]),
        eos_id=int(meta["eos_id"]),
        tokenizer_path=str(final / meta.get("tokenizer_file", "tokenizer.json")),
    )


def stage_timer():
    """``(lap, timings, t0)``: ``lap(stage)`` records the seconds since the previous lap."""
    t0 = time.perf_counter()
    timings: dict[str, float] = {}

    def lap(stage: str) -> None:
        timings[stage] = round(time.perf_counter() - t0 - sum(timings.values()), 3)

    return lap, timings, t0
