"""Tests of the CPU-scale data pipeline (acco/data): corpus, tokenizer, packing, rank streams and
the cached, concurrency-safe preparation."""

import hashlib
import json
import multiprocessing as mp
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

try:
    import acco.data  # noqa: F401
except ImportError:  # plain `pytest` without the project root on sys.path
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from acco.data import (
    EOS_TOKEN,
    PackedData,
    RankBatchStream,
    generate_stories,
    load_tokenizer,
    pack_documents,
    prepare_story_data,
    story_cache_path,
    train_bpe_tokenizer,
    write_story_jsonl,
)
from acco.data import prepare_stories as prepare_mod
from acco.data import stories as stories_mod
from tests.helpers import paths

ROOT = Path(paths.ROOT)
SENT_RE = re.compile(r'(?<=[.!?"])\s+')


def _sha(t: torch.Tensor) -> str:
    return hashlib.sha256(t.contiguous().numpy().tobytes()).hexdigest()


# ----------------------------------------------------------------------------------------------
# corpus
# ----------------------------------------------------------------------------------------------
def test_stories_deterministic_and_seed_dependent():
    a = generate_stories(300, 7)
    assert a == generate_stories(300, 7)
    assert len(a) == 300 and all(isinstance(s, str) and s for s in a)
    b = generate_stories(300, 8)
    assert sum(x != y for x, y in zip(a, b)) > 290
    # story i does not depend on n
    assert generate_stories(40, 7) == a[:40]


@pytest.mark.integration
def test_stories_identical_in_another_process():
    code = (
        "import hashlib, sys; sys.path.insert(0, sys.argv[1]); "
        "from acco.data.stories import generate_stories; "
        "print(hashlib.sha256('\\x00'.join(generate_stories(200, 3)).encode()).hexdigest())"
    )
    env = dict(os.environ, PYTHONHASHSEED="12345")
    out = subprocess.run(
        [sys.executable, "-c", code, str(ROOT)], env=env, capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == hashlib.sha256("\x00".join(generate_stories(200, 3)).encode()).hexdigest()


def test_stories_have_structure_and_variety():
    stories = generate_stories(1000, 0)
    assert len(set(stories)) == 1000
    sentences = {s for x in stories for s in SENT_RE.split(x)}
    assert len(sentences) > 3000
    words = [w for x in stories for w in re.findall(r"[A-Za-z']+", x)]
    vocab = set(words)
    # varied, yet a small closed vocabulary (learnable, not noise)
    assert 300 < len(vocab) < 3000 and len(words) > 50 * len(vocab)
    n_words = [len(x.split()) for x in stories]
    assert 60 < sum(n_words) / len(n_words) < 250 and min(n_words) > 30
    names = set(stories_mod.GIRL_NAMES) | set(stories_mod.BOY_NAMES)
    used = {w for w in vocab if w in names}
    assert len(used) > 30
    dialogue = sum('"' in x for x in stories)
    assert dialogue > 900
    plots = sum(("learned" in x or "knew that" in x) for x in stories)
    assert plots == 1000  # every story ends with a moral
    emotions = set(stories_mod.HAPPY) | set(stories_mod.SAD)
    assert sum(any(e in x.split() or e + "." in x for e in emotions) for x in stories) > 800
    for x in stories[:200]:
        # the main character (named in the first sentence or two) recurs in the story
        hero = next(w for w in re.findall(r"[A-Z][a-z]+", x) if w in names)
        assert x.count(hero) >= 3, x


def test_write_story_jsonl(tmp_path):
    p = tmp_path / "s.jsonl"
    write_story_jsonl(p, 25, 11)
    lines = p.read_text(encoding="utf-8").splitlines()
    assert [json.loads(line) for line in lines] == [{"text": t} for t in generate_stories(25, 11)]


# ----------------------------------------------------------------------------------------------
# tokenizer
# ----------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def small_corpus():
    return generate_stories(500, 1)


def test_tokenizer_training_is_deterministic(tmp_path, small_corpus):
    train_bpe_tokenizer(small_corpus, 400, tmp_path / "a.json")
    train_bpe_tokenizer(iter(small_corpus), 400, tmp_path / "b.json")
    a, b = (tmp_path / "a.json").read_bytes(), (tmp_path / "b.json").read_bytes()
    assert a == b
    train_bpe_tokenizer(generate_stories(500, 2), 400, tmp_path / "c.json")
    assert (tmp_path / "c.json").read_bytes() != a


def test_tokenizer_round_trip_and_eos(tmp_path, small_corpus):
    path = tmp_path / "tokenizer.json"
    train_bpe_tokenizer(small_corpus, 400, path)
    tok = load_tokenizer(path)
    assert len(tok) == 400
    assert tok.eos_token == EOS_TOKEN and tok.eos_token_id == 0
    assert tok.convert_tokens_to_ids(EOS_TOKEN) == tok.eos_token_id
    n_bytes = n_tokens = 0
    for text in small_corpus[:50] + ['Hello, wörld! 😀\n\n  tabs\tand "quotes"']:
        ids = tok(text, add_special_tokens=False)["input_ids"]
        assert tok.eos_token_id not in ids
        assert tok.decode(ids) == text
        n_bytes += len(text.encode())
        n_tokens += len(ids)
    assert n_tokens < 0.6 * n_bytes  # merges were learned
    assert tok(EOS_TOKEN, add_special_tokens=False)["input_ids"] == [tok.eos_token_id]


def test_tokenizer_rejects_too_small_vocab(tmp_path, small_corpus):
    with pytest.raises(ValueError, match="vocab_size"):
        train_bpe_tokenizer(small_corpus, 200, tmp_path / "t.json")


# ----------------------------------------------------------------------------------------------
# packing
# ----------------------------------------------------------------------------------------------
def test_pack_documents():
    g = torch.Generator().manual_seed(0)
    docs = [torch.randint(1, 100, (int(n),), generator=g).tolist() for n in torch.randint(0, 40, (57,), generator=g)]
    eos, L = 0, 16
    blocks = pack_documents(docs, eos, L)
    stream = [t for d in docs for t in d + [eos]]
    assert blocks.dtype == torch.long and blocks.shape == (len(stream) // L, L)
    assert blocks.flatten().tolist() == stream[: blocks.numel()]
    # EOS exactly after each document (documents never contain the EOS id)
    ends = []
    acc = 0
    for d in docs:
        acc += len(d) + 1
        ends.append(acc - 1)
    flat = blocks.flatten()
    assert (flat == eos).nonzero().flatten().tolist() == [e for e in ends if e < blocks.numel()]
    # a generator of documents works the same, tiny inputs give an empty [0, L] tensor
    assert torch.equal(pack_documents(iter(docs), eos, L), blocks)
    assert pack_documents([[1, 2]], eos, L).shape == (0, L)
    assert pack_documents([list(range(1, 16))], eos, L).tolist() == [list(range(1, 16)) + [eos]]


# ----------------------------------------------------------------------------------------------
# rank streams
# ----------------------------------------------------------------------------------------------
def _id_blocks(n, L=4):
    # block i holds the value i in every position, so batches reveal which blocks they contain
    return torch.arange(n).unsqueeze(1).repeat(1, L)


def _ids(batch):
    assert (batch == batch[:, :1]).all()
    return batch[:, 0].tolist()


def test_rank_streams_are_disjoint_and_cover_equal_shards():
    blocks, W, B = _id_blocks(103), 4, 5
    seen = []
    for r in range(W):
        s = RankBatchStream(blocks, r, W, B, seed=3)
        assert s.blocks_per_rank == 25 and s.batches_per_epoch == 5
        ids = [i for k in range(s.batches_per_epoch) for i in _ids(s.batch(k))]
        assert len(ids) == len(set(ids)) == 25  # one epoch visits each owned block once
        assert all(i % W == r for i in ids) and max(ids) < 100
        seen.append(set(ids))
    assert set.union(*seen) == set(range(100))


def test_rank_stream_batch_is_pure():
    blocks = _id_blocks(64, L=3)
    a = RankBatchStream(blocks, 1, 2, 4, seed=9)
    seq = [a.batch(k) for k in range(20)]
    b = RankBatchStream(blocks, 1, 2, 4, seed=9)
    for k in (17, 3, 11, 0, 19, 3):  # random access, crossing epochs back and forth
        assert torch.equal(b.batch(k), seq[k])
    it = iter(RankBatchStream(blocks, 1, 2, 4, seed=9))
    for k in range(20):
        assert torch.equal(next(it), seq[k])
    assert seq[0].shape == (4, 3) and seq[0].dtype == torch.long
    # returned batches are copies: mutating one does not change the stream
    seq[0].fill_(-1)
    assert torch.equal(b.batch(0), a.batch(0)) and (a.batch(0) >= 0).all()
    # other seeds / ranks give other orders
    assert [_ids(RankBatchStream(blocks, 1, 2, 4, seed=10).batch(k)) for k in range(8)] != [_ids(x) for x in seq[:8]]


def test_rank_stream_reshuffles_every_epoch():
    blocks = _id_blocks(48)
    s = RankBatchStream(blocks, 0, 2, 4, seed=0)
    E = s.batches_per_epoch
    assert E == 6
    epochs = [[i for k in range(e * E, (e + 1) * E) for i in _ids(s.batch(k))] for e in range(3)]
    assert all(sorted(ep) == list(range(0, 48, 2)) for ep in epochs)
    assert epochs[0] != epochs[1] and epochs[1] != epochs[2] and epochs[0] != epochs[2]
    # the permutation depends on the rank too, not only on the rank's index set
    s1 = RankBatchStream(blocks, 1, 2, 4, seed=0)
    e1 = [(i - 1) // 2 for k in range(E) for i in _ids(s1.batch(k))]
    assert e1 != [i // 2 for i in epochs[0]]


def test_rank_stream_pinned_order():
    # guards reproducibility of recorded runs: a change of the shuffle changes every experiment
    s = RankBatchStream(_id_blocks(40), 2, 4, 3, seed=1234)
    got = [_ids(s.batch(k)) for k in (0, 1, 3, 7)]
    assert s.batches_per_epoch == 3
    assert got == [[38, 10, 30], [14, 2, 6], [2, 14, 18], [18, 6, 38]]


def test_rank_stream_errors():
    blocks = _id_blocks(10)
    with pytest.raises(ValueError, match="micro_batch_size"):
        RankBatchStream(blocks, 0, 4, 3, seed=0)  # 2 blocks per rank < 3
    RankBatchStream(blocks, 3, 4, 2, seed=0)  # exactly enough
    with pytest.raises(ValueError):
        RankBatchStream(blocks, 4, 4, 1, seed=0)
    with pytest.raises(ValueError):
        RankBatchStream(blocks[0], 0, 1, 1, seed=0)


# ----------------------------------------------------------------------------------------------
# prepare_story_data
# ----------------------------------------------------------------------------------------------
SMALL = dict(num_stories=400, seed=5, vocab_size=300, seq_len=32)


def _docs_in(blocks, eos_id: int) -> list[list[int]]:
    """The complete documents of a packed stream (the first one starts at 0; the cut-off tail is dropped)."""
    flat = blocks[:].flatten().tolist()
    docs, cur = [], []
    for t in flat:
        if t == eos_id:
            docs.append(cur)
            cur = []
        else:
            cur.append(t)
    return docs


def test_prepare_story_data_split_and_tokenizer(tmp_path, monkeypatch):
    seen_texts = []
    real_train = prepare_mod.train_bpe_tokenizer

    def spy(texts, vocab_size, out_path):
        texts = list(texts)
        seen_texts.extend(texts)
        return real_train(texts, vocab_size, out_path)

    monkeypatch.setattr(prepare_mod, "train_bpe_tokenizer", spy)
    d = prepare_story_data(tmp_path, **SMALL)
    assert isinstance(d, PackedData)
    assert d.train_blocks.dtype == d.val_blocks.dtype == torch.long
    assert d.train_blocks.shape[1] == d.val_blocks.shape[1] == 32
    assert d.vocab_size == 300 and d.eos_id == 0
    tok = load_tokenizer(d.tokenizer_path)
    assert len(tok) == d.vocab_size and tok.eos_token_id == d.eos_id
    assert Path(d.tokenizer_path).parent == story_cache_path(tmp_path, **SMALL)

    stories = generate_stories(SMALL["num_stories"], SMALL["seed"])
    train_docs = [tok.decode(x) for x in _docs_in(d.train_blocks, d.eos_id)]
    val_docs = [tok.decode(x) for x in _docs_in(d.val_blocks, d.eos_id)]
    n_val = round(0.05 * SMALL["num_stories"])
    assert n_val - 1 <= len(val_docs) <= n_val  # at most the last document is cut off
    assert len(train_docs) >= SMALL["num_stories"] - n_val - 1
    assert set(val_docs) <= set(stories) and set(train_docs) <= set(stories)
    assert not set(val_docs) & set(train_docs)
    # the tokenizer saw exactly the training documents
    assert len(seen_texts) == SMALL["num_stories"] - n_val
    assert set(train_docs) <= set(seen_texts) and not set(val_docs) & set(seen_texts)
    ratio = d.val_blocks.shape[0] / (d.train_blocks.shape[0] + d.val_blocks.shape[0])
    assert 0.03 < ratio < 0.07
    meta = json.loads((story_cache_path(tmp_path, **SMALL) / "meta.json").read_text())
    assert meta["num_val_docs"] == n_val and meta["num_train_blocks"] == d.train_blocks.shape[0]


def test_prepare_story_data_uses_cache(tmp_path, monkeypatch):
    d1 = prepare_story_data(tmp_path, **SMALL)
    folder = story_cache_path(tmp_path, **SMALL)
    mtimes = {p.name: p.stat().st_mtime_ns for p in folder.iterdir()}

    def boom(*a, **k):
        raise AssertionError("regenerated although cached")

    monkeypatch.setattr(prepare_mod, "generate_stories", boom)
    monkeypatch.setattr(prepare_mod, "_build", boom)
    d2 = prepare_story_data(tmp_path, **SMALL)
    assert torch.equal(d1.train_blocks[:], d2.train_blocks[:]) and torch.equal(d1.val_blocks[:], d2.val_blocks[:])
    assert (d1.vocab_size, d1.eos_id, d1.tokenizer_path) == (d2.vocab_size, d2.eos_id, d2.tokenizer_path)
    assert {p.name: p.stat().st_mtime_ns for p in folder.iterdir()} == mtimes
    # other parameters are another cache entry (and would need a build)
    with pytest.raises(AssertionError, match="regenerated"):
        prepare_story_data(tmp_path, **dict(SMALL, seq_len=64))
    assert story_cache_path(tmp_path, **dict(SMALL, seq_len=64)) != folder
    assert not story_cache_path(tmp_path, **dict(SMALL, seq_len=64)).exists()
    assert not list(tmp_path.glob(".tmp-*"))  # the failed build left nothing behind


def test_prepare_story_data_removes_stale_temporary_folder(tmp_path):
    folder = story_cache_path(tmp_path, **SMALL)
    stale = tmp_path / f".tmp-{folder.name}-99999-deadbeef"
    (stale / "raw").mkdir(parents=True)
    prepare_story_data(tmp_path, **SMALL)
    assert not stale.exists() and folder.is_dir()


@pytest.mark.integration
def test_prepare_story_data_concurrent_processes(tmp_path, monkeypatch):
    # offline, with a private HF home: the build must not need the hub nor write a cache there
    hf_home = tmp_path / "hf_home"
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(hf_home))
    monkeypatch.setenv("HF_DATASETS_CACHE", str(hf_home / "datasets"))
    cache = tmp_path / "cache"
    ctx = mp.get_context("spawn")
    with ctx.Pool(3) as pool:
        results = pool.starmap(prepare_story_data, [(str(cache), *SMALL.values())] * 3)
    assert len(results) == 3
    ref = prepare_story_data(cache, **SMALL)
    for r in results:
        assert _sha(r.train_blocks[:]) == _sha(ref.train_blocks[:])
        assert _sha(r.val_blocks[:]) == _sha(ref.val_blocks[:])
        assert (r.vocab_size, r.eos_id, r.tokenizer_path) == (ref.vocab_size, ref.eos_id, ref.tokenizer_path)
    entries = sorted(p.name for p in cache.iterdir())
    folder = story_cache_path(cache, **SMALL).name
    assert entries == [folder, f"{folder}.lock"]
    assert not hf_home.exists() or not any(hf_home.rglob("*"))


def test_prepare_story_data_without_validation(tmp_path):
    d = prepare_story_data(tmp_path, **dict(SMALL, num_stories=100), val_fraction=0.0)
    assert d.val_blocks.shape == (0, SMALL["seq_len"]) and d.train_blocks.shape[0] > 0
    with pytest.raises(ValueError, match="val_fraction"):
        prepare_story_data(tmp_path, **SMALL, val_fraction=1.0)
