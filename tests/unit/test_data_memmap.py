"""Pretraining data at OpenWebText scale (issue 11, defect 3): the split as a compact role array,
token files (uint16/uint32) written chunk by chunk and read through a memory map, a build whose
result does not depend on its number of tokenizer processes, and whose peak memory does not grow
with the number of tokens.

Here the tests in-process; those that start processes (marked integration) are in
tests/integration/test_data_memmap.py."""

import json
import pickle
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

try:
    import acco.data  # noqa: F401
except ImportError:  # plain `pytest` without the project root on sys.path
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from acco.data import (
    RankBatchStream,
    generate_stories,
    load_tokenizer,
    pack_documents,
    prepare_pretraining_data,
    train_bpe_tokenizer,
    write_story_jsonl,
)
from acco.data.build_blocks import _max_id
from acco.data.split import DROPPED, TRAIN, VAL, split_indices, split_roles
from acco.data.token_file import TokenBlocks, TokenFileWriter, token_dtype


# ----------------------------------------------------------------------------------------------
# split
# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "n,fraction,seed", [(0, 0.1, 0), (1, 0.5, 3), (37, 0.05, 1234), (1000, 0.1, 7), (5000, 0.3, 2), (200, 0.0, 1)]
)
def test_split_roles_is_split_indices(n, fraction, seed):
    rng = np.random.default_rng(n + seed)
    keep = np.zeros(n + n // 10 + 3, dtype=bool)  # n kept documents among dropped (empty) ones
    keep[rng.choice(len(keep), n, replace=False)] = True
    roles = split_roles(keep, fraction, seed)
    assert roles.dtype == np.uint8 and roles.shape == keep.shape
    assert (roles[~keep] == DROPPED).all()
    train_idx, val_idx = split_indices(n, fraction, seed)
    kept_roles = roles[keep]
    assert np.flatnonzero(kept_roles == TRAIN).tolist() == train_idx
    assert np.flatnonzero(kept_roles == VAL).tolist() == val_idx


# ----------------------------------------------------------------------------------------------
# token files
# ----------------------------------------------------------------------------------------------
def _random_docs(n, high, seed, max_len=40):
    g = np.random.default_rng(seed)
    return [g.integers(1, high, int(g.integers(0, max_len))).tolist() for _ in range(n)]


def _write(path, docs, dtype, eos, seq_len, chunk):
    w = TokenFileWriter(path, dtype, eos)
    for i in range(0, len(docs), chunk):
        part = docs[i : i + chunk]
        w.write(np.array([t for d in part for t in d], dtype=np.int64), np.array([len(d) for d in part]))
    return w, w.finish(seq_len)


def test_token_dtype(tmp_path):
    assert token_dtype(0) == np.dtype("<u2") and token_dtype(65535) == np.dtype("<u2")
    assert token_dtype(65536) == np.dtype("<u4") and token_dtype(2**32 - 1) == np.dtype("<u4")
    with pytest.raises(ValueError):
        token_dtype(2**32)
    # a tokenizer with more than 65536 ids needs uint32 files
    from transformers import PreTrainedTokenizerFast

    train_bpe_tokenizer(generate_stories(50, 1), 300, tmp_path / "t.json")
    tok = PreTrainedTokenizerFast(tokenizer_file=str(tmp_path / "t.json"), eos_token="<|endoftext|>")
    assert token_dtype(_max_id(tok)) == np.dtype("<u2")
    tok.add_tokens([f"<x{i}>" for i in range(65300)])
    assert _max_id(tok) == 65599 and token_dtype(_max_id(tok)) == np.dtype("<u4")


@pytest.mark.parametrize("dtype,high", [("<u2", 65535), ("<u4", 2**32 - 1)])
def test_token_file_is_the_packed_stream(tmp_path, dtype, high):
    docs = _random_docs(300, high, seed=1)
    eos, L = 0, 16
    ref = pack_documents(docs, eos, L)
    w, n_blocks = _write(tmp_path / "t.bin", docs, dtype, eos, L, chunk=7)
    assert n_blocks == ref.shape[0]
    assert w.num_docs == 300 and w.num_doc_tokens == sum(map(len, docs))
    assert w.num_stream_tokens == w.num_doc_tokens + 300
    assert (tmp_path / "t.bin").stat().st_size == n_blocks * L * np.dtype(dtype).itemsize
    blocks = TokenBlocks(tmp_path / "t.bin", dtype, n_blocks, L)
    assert torch.equal(blocks[:], ref)
    if high > 65535:
        assert int(ref.max()) > 65535  # ids beyond uint16 survive
    # a tail shorter than a block gives no block; ids that do not fit are refused
    _, none = _write(tmp_path / "short.bin", [[1, 2]], dtype, eos, L, chunk=1)
    assert none == 0 and len(TokenBlocks(tmp_path / "short.bin", dtype, 0, L)) == 0
    w = TokenFileWriter(tmp_path / "bad.bin", "<u2", eos)
    with pytest.raises(ValueError, match="outside"):
        w.write(np.array([1, 65536]), np.array([2]))
    with pytest.raises(ValueError, match="add up"):
        w.write(np.array([1, 2]), np.array([3]))
    w.abort()
    with pytest.raises(ValueError, match="damaged"):
        TokenBlocks(tmp_path / "t.bin", dtype, n_blocks + 1, L)


def test_token_blocks_behave_like_the_block_tensor(tmp_path):
    docs = _random_docs(500, 1000, seed=2)
    ref = pack_documents(docs, 0, 8)
    _, n = _write(tmp_path / "t.bin", docs, "<u2", 0, 8, chunk=50)
    blocks = TokenBlocks(tmp_path / "t.bin", "<u2", n, 8)
    assert len(blocks) == ref.shape[0] and blocks.shape == ref.shape and blocks.dim() == 2
    assert blocks.size(1) == 8 and blocks.numel() == ref.numel() and blocks.dtype == torch.long
    idx = torch.tensor([5, 0, 17, 5])
    for got, want in [
        (blocks[3], ref[3]),
        (blocks[-1], ref[-1]),
        (blocks[2:9], ref[2:9]),
        (blocks[1::3], ref[1::3]),
        (blocks[idx], ref[idx]),
        (blocks.index_select(0, idx), ref.index_select(0, idx)),
    ]:
        assert got.dtype == torch.long and torch.equal(got, want)
    # a copy: writing to it does not touch the file
    b = blocks[0:2]
    b.fill_(-1)
    assert torch.equal(blocks[0:2], ref[0:2])
    # pickles as its file name (workers of a Pool get the view, not the data)
    data = pickle.dumps(blocks)
    assert len(data) < 1000 and torch.equal(pickle.loads(data)[:], ref)
    # a rank's stream is the same on the view as on the tensor
    for rank in range(3):
        a, c = RankBatchStream(blocks, rank, 3, 4, seed=11), RankBatchStream(ref, rank, 3, 4, seed=11)
        for k in (0, 1, 7, 30):
            assert torch.equal(a.batch(k), c.batch(k))


# ----------------------------------------------------------------------------------------------
# the pipeline
# ----------------------------------------------------------------------------------------------
def test_pipeline_is_the_in_memory_packing_whatever_num_proc(tmp_path):
    n = 3000
    write_story_jsonl(tmp_path / "c.jsonl", n, 4)
    spec = {"kind": "bpe", "vocab_size": 320}
    built = {
        p: prepare_pretraining_data(
            {"path": str(tmp_path / "c.jsonl")}, spec, 32, 0.1, 3, tmp_path / f"c{p}", num_proc=p
        )
        for p in (1, 2)
    }
    one, two = built[1], built[2]
    assert torch.equal(one.train_blocks[:], two.train_blocks[:]) and torch.equal(one.val_blocks[:], two.val_blocks[:])
    meta = json.loads((Path(two.tokenizer_path).parent / "meta.json").read_text())
    assert meta["token_dtype"] == "uint16" and meta["tokenize_num_proc"] == 2 and meta["key"]["format"] == 2
    assert (Path(two.tokenizer_path).parent / "train.bin").stat().st_size == 2 * 32 * meta["num_train_blocks"]
    assert not [p for p in Path(two.tokenizer_path).parent.iterdir() if p.suffix == ".arrow" or p.is_dir()]
    # the reference: each document tokenized alone, split with split_indices, packed in memory
    tok = load_tokenizer(one.tokenizer_path)
    stories = generate_stories(n, 4)
    train_idx, val_idx = split_indices(n, 0.1, 3)
    ids = tok(stories, add_special_tokens=False)["input_ids"]
    assert torch.equal(one.train_blocks[:], pack_documents([ids[i] for i in train_idx], one.eos_id, 32))
    assert torch.equal(one.val_blocks[:], pack_documents([ids[i] for i in val_idx], one.eos_id, 32))
