"""Raw dataset loading from local files (every format), the one-line offline errors, pretrained
tokenizers, and the general pretraining pipeline (cache reuse, validation split)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

try:
    import acco.data  # noqa: F401
except ImportError:  # plain `pytest` without the project root on sys.path
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import datasets

from acco.data import (
    DataNotFoundError,
    generate_stories,
    load_pretrained_tokenizer,
    load_raw_dataset,
    load_tokenizer,
    prepare_pretraining_data,
    prepare_story_data,
    pretraining_cache_path,
    train_bpe_tokenizer,
    write_story_jsonl,
)
from acco.data import prepare_pretraining as pretrain_mod
from acco.data import sources as sources_mod
from tests.helpers import paths

ROOT = Path(paths.ROOT)


@pytest.fixture(autouse=True)
def no_hub(monkeypatch, tmp_path):
    # never reach the network from the tests, even on a machine with internet; an empty hub cache
    monkeypatch.setattr(sources_mod, "hub_reachable", lambda timeout=3.0: False)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf_hub_cache"))


def _rows(n, tag):
    return [{"text": f"{tag} document {i}", "n": i} for i in range(n)]


def _write_jsonl(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def _write_parquet(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    datasets.Dataset.from_list(rows).to_parquet(str(path))


def _texts(ds):
    return list(ds["text"])


# ----------------------------------------------------------------------------------------------
# load_raw_dataset: formats
# ----------------------------------------------------------------------------------------------
def test_load_saved_dataset_and_dataset_dict(tmp_path):
    datasets.Dataset.from_list(_rows(5, "solo")).save_to_disk(str(tmp_path / "solo"))
    ds = load_raw_dataset(None, str(tmp_path / "solo"), split="train")
    assert isinstance(ds, datasets.Dataset) and _texts(ds) == [r["text"] for r in _rows(5, "solo")]

    dd = datasets.DatasetDict(
        {
            "train": datasets.Dataset.from_list(_rows(4, "tr")),
            "validation": datasets.Dataset.from_list(_rows(2, "va")),
            "test": datasets.Dataset.from_list(_rows(3, "te")),
        }
    )
    dd.save_to_disk(str(tmp_path / "dd"))
    assert _texts(load_raw_dataset(None, str(tmp_path / "dd"), split="test")) == [r["text"] for r in _rows(3, "te")]
    assert _texts(load_raw_dataset(None, str(tmp_path / "dd"), split="train")) == [r["text"] for r in _rows(4, "tr")]
    # "valid"/"val"/"dev" name the validation split
    assert _texts(load_raw_dataset(None, str(tmp_path / "dd"), split="valid")) == [r["text"] for r in _rows(2, "va")]
    with pytest.raises(DataNotFoundError, match="no 'extra' split.*train, validation, test"):
        load_raw_dataset(None, str(tmp_path / "dd"), split="extra")


def test_load_single_files(tmp_path):
    rows = _rows(6, "f")
    _write_jsonl(tmp_path / "a.jsonl", rows)
    (tmp_path / "b.json").write_text(json.dumps(rows))  # one JSON list, like alpaca_data.json
    _write_parquet(tmp_path / "c.parquet", rows)
    (tmp_path / "d.txt").write_text("".join(r["text"] + "\n" for r in rows))
    for name in ("a.jsonl", "b.json", "c.parquet", "d.txt"):
        ds = load_raw_dataset(None, str(tmp_path / name), split="train", cache_dir=tmp_path / "hf")
        assert _texts(ds) == [r["text"] for r in rows], name
        if name != "d.txt":
            assert list(ds["n"]) == list(range(6))
    assert load_raw_dataset(None, str(tmp_path / "d.txt")).column_names == ["text"]
    assert any((tmp_path / "hf").iterdir())  # datasets' cache went where we asked
    (tmp_path / "e.csv").write_text("text\nx\n")
    with pytest.raises(DataNotFoundError, match="unsupported data file"):
        load_raw_dataset(None, str(tmp_path / "e.csv"))


def test_load_folder_of_files(tmp_path):
    # split-named files
    _write_jsonl(tmp_path / "j" / "train.jsonl", _rows(3, "tr"))
    _write_jsonl(tmp_path / "j" / "test.jsonl", _rows(2, "te"))
    assert _texts(load_raw_dataset(None, str(tmp_path / "j"), split="test")) == ["te document 0", "te document 1"]
    assert len(load_raw_dataset(None, str(tmp_path / "j"), split="train")) == 3
    with pytest.raises(DataNotFoundError, match="no 'validation' split"):
        load_raw_dataset(None, str(tmp_path / "j"), split="validation")

    # the Hub's parquet layout: shards in order, validation apart, a .cache folder ignored
    hub = tmp_path / "hub"
    _write_parquet(hub / "data" / "train-00000-of-00002.parquet", _rows(3, "s0"))
    _write_parquet(hub / "data" / "train-00001-of-00002.parquet", _rows(2, "s1"))
    _write_parquet(hub / "data" / "validation-00000-of-00001.parquet", _rows(2, "va"))
    _write_jsonl(hub / ".cache" / "huggingface" / "train.jsonl", _rows(9, "junk"))
    (hub / "README.md").write_text("# card\n")
    train = load_raw_dataset(None, str(hub), split="train")
    assert _texts(train) == [r["text"] for r in _rows(3, "s0") + _rows(2, "s1")]
    assert _texts(load_raw_dataset(None, str(hub), split="validation")) == ["va document 0", "va document 1"]

    # a config subfolder (LAMBADA's default/test/0000.parquet next to de/test/0000.parquet)
    lam = tmp_path / "lambada"
    _write_parquet(lam / "default" / "test" / "0000.parquet", _rows(2, "en"))
    _write_parquet(lam / "de" / "test" / "0000.parquet", _rows(2, "de"))
    assert _texts(load_raw_dataset(None, str(lam), split="test", config_name="default")) == [
        "en document 0",
        "en document 1",
    ]

    # no file names a split: all files, whatever the split asked; several kinds: parquet first
    plain = tmp_path / "plain"
    _write_jsonl(plain / "part-a.jsonl", _rows(2, "a"))
    _write_jsonl(plain / "part-b.jsonl", _rows(1, "b"))
    assert _texts(load_raw_dataset(None, str(plain), split="test")) == ["a document 0", "a document 1", "b document 0"]
    (plain / "extra.txt").write_text("ignored line\n")
    _write_parquet(plain / "z.parquet", _rows(1, "pq"))
    assert _texts(load_raw_dataset(None, str(plain), split="train")) == ["pq document 0"]
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataNotFoundError, match="no data files"):
        load_raw_dataset(None, str(tmp_path / "empty"))


# ----------------------------------------------------------------------------------------------
# one-line errors
# ----------------------------------------------------------------------------------------------
def _one_line(exc_info) -> str:
    msg = str(exc_info.value)
    assert "\n" not in msg and msg == msg.strip()
    return msg


def test_missing_hub_dataset_error(tmp_path):
    with pytest.raises(DataNotFoundError) as ei:
        load_raw_dataset("roneneldan/TinyStories", None, split="train", cache_dir=tmp_path)
    msg = _one_line(ei)
    assert msg.startswith(
        f"dataset roneneldan/TinyStories is not in the Hugging Face cache {tmp_path / 'hf_hub_cache'} "
        "and the hub is not reachable: run experiments/prepare_data.py"
    )
    assert "\"hf download --repo-type dataset roneneldan/TinyStories --include 'data/*'" in msg
    assert "--local-dir data/tinystories" in msg and msg.endswith("set data.path=data/tinystories")
    assert isinstance(ei.value, ValueError)

    with pytest.raises(DataNotFoundError) as ei:
        load_raw_dataset(
            "EleutherAI/lambada_openai",
            None,
            split="test",
            config_name="default",
            cache_dir=tmp_path,
            config_key="eval.lambada.path",
        )
    msg = _one_line(ei)
    assert "EleutherAI/lambada_openai" in msg and msg.endswith("set eval.lambada.path=data/lambada_openai")
    with pytest.raises(DataNotFoundError) as ei:
        load_raw_dataset("someone/Unknown_Set", None, cache_dir=tmp_path)
    assert _one_line(ei).endswith("data.path=data/unknown_set")


def test_missing_path_error(tmp_path):
    missing = tmp_path / "nowhere" / "openwebtext"
    with pytest.raises(DataNotFoundError) as ei:
        load_raw_dataset("Skylion007/openwebtext", str(missing))
    msg = _one_line(ei)
    assert str(missing) in msg and "Skylion007/openwebtext" in msg
    assert "hf download --repo-type dataset Skylion007/openwebtext --include 'data/*'" in msg
    assert "data.path=data/openwebtext" in msg
    with pytest.raises(DataNotFoundError) as ei:
        load_raw_dataset(None, str(missing))
    assert str(missing) in _one_line(ei)
    # the pipeline reports it the same way, before building anything
    with pytest.raises(DataNotFoundError, match="not found at"):
        prepare_pretraining_data(
            {"path": str(missing)}, {"kind": "bpe", "vocab_size": 300}, 16, 0.1, 0, tmp_path / "cache"
        )
    assert not (tmp_path / "cache").exists()


def test_pretrained_tokenizer_errors_and_loading(tmp_path):
    with pytest.raises(DataNotFoundError) as ei:
        load_pretrained_tokenizer(str(tmp_path / "tok"), "EleutherAI/gpt-neo-125M")
    msg = _one_line(ei)
    assert str(tmp_path / "tok") in msg
    hf_command = (  # into the folder the config names (fig8's path is $ACCO_MODELS/gpt-neo-2.7B)
        "\"hf download EleutherAI/gpt-neo-125M --include '*.json' --include '*.txt' --include '*.model' "
        f'--local-dir {tmp_path / "tok"}"'
    )
    assert hf_command in msg and msg.endswith("copy it there (or set tokenizer.path to where it is)")
    with pytest.raises(DataNotFoundError) as ei:
        load_pretrained_tokenizer(None, "someone/not-cached-anywhere-xyz")
    msg = _one_line(ei)
    assert msg.startswith(
        f"tokenizer someone/not-cached-anywhere-xyz is not in the Hugging Face cache {tmp_path / 'hf_hub_cache'}"
    )
    (tmp_path / "junk").mkdir()
    with pytest.raises(DataNotFoundError, match="could not load a tokenizer"):
        load_pretrained_tokenizer(str(tmp_path / "junk"), None)

    # a saved tokenizer without a pad token gets pad = eos
    from transformers import PreTrainedTokenizerFast

    train_bpe_tokenizer(generate_stories(100, 0), 300, tmp_path / "t.json")
    PreTrainedTokenizerFast(tokenizer_file=str(tmp_path / "t.json"), eos_token="<|endoftext|>").save_pretrained(
        str(tmp_path / "saved")
    )
    tok = load_pretrained_tokenizer(str(tmp_path / "saved"), "EleutherAI/gpt-neo-125M")
    assert tok.pad_token == tok.eos_token == "<|endoftext|>" and tok.pad_token_id == tok.eos_token_id == 0
    assert load_tokenizer(tmp_path / "saved")("a cat")["input_ids"] == tok("a cat")["input_ids"]


@pytest.mark.integration
def test_local_loading_under_offline_environment(tmp_path):
    _write_jsonl(tmp_path / "d" / "train.jsonl", _rows(3, "x"))
    datasets.Dataset.from_list(_rows(2, "y")).save_to_disk(str(tmp_path / "saved"))
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); from acco.data import load_raw_dataset; "
        "a = load_raw_dataset(None, sys.argv[2], cache_dir=sys.argv[4]); "
        "b = load_raw_dataset(None, sys.argv[3]); print(len(a), len(b))"
    )
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", HF_HOME=str(tmp_path / "hf_home"))
    out = subprocess.run(
        [sys.executable, "-c", code, str(ROOT), str(tmp_path / "d"), str(tmp_path / "saved"), str(tmp_path / "hf")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["3", "2"]


# ----------------------------------------------------------------------------------------------
# prepare_pretraining_data
# ----------------------------------------------------------------------------------------------
BPE = {"kind": "bpe", "vocab_size": 300}


def _docs(blocks, eos):
    docs, cur = [], []
    for t in blocks[:].flatten().tolist():
        if t == eos:
            docs.append(cur)
            cur = []
        else:
            cur.append(t)
    return docs


def test_pretraining_split_and_documents(tmp_path):
    stories = generate_stories(200, 3)
    rows = [{"text": s} for s in stories[:100]] + [{"text": "   "}] + [{"text": s} for s in stories[100:]]
    _write_jsonl(tmp_path / "corpus" / "stories.jsonl", rows)
    d = prepare_pretraining_data({"path": str(tmp_path / "corpus")}, BPE, 32, 0.1, 7, tmp_path / "cache")
    assert d.train_blocks.dtype == torch.long and d.train_blocks.shape[1] == d.val_blocks.shape[1] == 32
    tok = load_tokenizer(d.tokenizer_path)
    assert d.vocab_size == len(tok) == 300 and d.eos_id == tok.eos_token_id
    train_docs = [tok.decode(x) for x in _docs(d.train_blocks, d.eos_id)]
    val_docs = [tok.decode(x) for x in _docs(d.val_blocks, d.eos_id)]
    assert 19 <= len(val_docs) <= 20 and len(train_docs) >= 179  # 20 = 10% of the 200 non-empty docs
    assert set(train_docs) | set(val_docs) <= set(stories) and not set(train_docs) & set(val_docs)
    meta = json.loads((Path(d.tokenizer_path).parent / "meta.json").read_text())
    assert meta["num_raw_docs"] == 201 and meta["num_val_docs"] == 20 and meta["num_train_docs"] == 180
    # another seed draws other validation documents
    d2 = prepare_pretraining_data({"path": str(tmp_path / "corpus")}, BPE, 32, 0.1, 8, tmp_path / "cache")
    assert set(tok.decode(x) for x in _docs(d2.val_blocks, d2.eos_id)) != set(val_docs)
    # max_documents keeps the first documents
    d3 = prepare_pretraining_data(
        {"path": str(tmp_path / "corpus"), "max_documents": 50}, BPE, 32, 0.0, 7, tmp_path / "cache"
    )
    tok3 = load_tokenizer(d3.tokenizer_path)
    assert set(tok3.decode(x) for x in _docs(d3.train_blocks, d3.eos_id)) <= set(stories[:50])
    assert d3.val_blocks.shape == (0, 32)


def test_pretraining_uses_the_sources_validation_split(tmp_path):
    stories = generate_stories(120, 4)
    _write_jsonl(tmp_path / "ts" / "data" / "train-00000-of-00001.jsonl", [{"story": s} for s in stories[:100]])
    _write_jsonl(tmp_path / "ts" / "data" / "validation-00000-of-00001.jsonl", [{"story": s} for s in stories[100:]])
    src = {"path": str(tmp_path / "ts"), "text_field": "story", "val_split": "validation"}
    d = prepare_pretraining_data(src, BPE, 16, 0.5, 0, tmp_path / "cache")
    tok = load_tokenizer(d.tokenizer_path)
    val_docs = [tok.decode(x) for x in _docs(d.val_blocks, d.eos_id)]
    assert val_docs and set(val_docs) <= set(stories[100:])
    assert val_docs == stories[100 : 100 + len(val_docs)]  # in order, not shuffled
    assert set(tok.decode(x) for x in _docs(d.train_blocks, d.eos_id)) <= set(stories[:100])
    with pytest.raises(ValueError, match="no field 'text'"):
        prepare_pretraining_data(dict(src, text_field="text"), BPE, 16, 0.0, 0, tmp_path / "cache")
    _write_jsonl(tmp_path / "single.jsonl", [{"text": s} for s in stories])
    with pytest.raises(ValueError, match="no separate splits"):
        prepare_pretraining_data(
            {"path": str(tmp_path / "single.jsonl"), "val_split": "validation"}, BPE, 16, 0.0, 0, tmp_path / "cache"
        )
    with pytest.raises(ValueError, match="unknown key"):
        prepare_pretraining_data(
            {"path": str(tmp_path / "single.jsonl"), "txt_field": "x"}, BPE, 16, 0.0, 0, tmp_path / "cache"
        )


def test_pretraining_cache_reuse_and_key(tmp_path, monkeypatch):
    path = tmp_path / "c.jsonl"
    write_story_jsonl(path, 150, 1)
    src = {"path": str(path)}
    d1 = prepare_pretraining_data(src, BPE, 32, 0.1, 0, tmp_path / "cache")
    folder = pretraining_cache_path(src, BPE, 32, 0.1, 0, tmp_path / "cache")
    assert folder.is_dir() and Path(d1.tokenizer_path).parent == folder
    mtimes = {p.name: p.stat().st_mtime_ns for p in folder.iterdir()}

    def boom(*a, **k):
        raise AssertionError("rebuilt although cached")

    monkeypatch.setattr(pretrain_mod, "_build", boom)
    d2 = prepare_pretraining_data(dict(src, split="train", text_field="text"), BPE, 32, 0.1, 0, tmp_path / "cache")
    assert torch.equal(d1.train_blocks[:], d2.train_blocks[:]) and torch.equal(d1.val_blocks[:], d2.val_blocks[:])
    assert (d1.vocab_size, d1.eos_id, d1.tokenizer_path) == (d2.vocab_size, d2.eos_id, d2.tokenizer_path)
    assert {p.name: p.stat().st_mtime_ns for p in folder.iterdir()} == mtimes
    # every ingredient of the key matters
    for args in [
        (src, BPE, 64, 0.1, 0),
        (src, BPE, 32, 0.2, 0),
        (src, BPE, 32, 0.1, 1),
        (src, {"kind": "bpe", "vocab_size": 320}, 32, 0.1, 0),
        (dict(src, max_documents=10), BPE, 32, 0.1, 0),
    ]:
        assert pretraining_cache_path(*args, tmp_path / "cache") != folder
        with pytest.raises(AssertionError, match="rebuilt"):
            prepare_pretraining_data(*args, tmp_path / "cache")
    # a changed data file is another key
    write_story_jsonl(path, 151, 1)
    assert pretraining_cache_path(src, BPE, 32, 0.1, 0, tmp_path / "cache") != folder
    assert not list((tmp_path / "cache").glob(".tmp-*"))


def test_pretraining_with_pretrained_tokenizer(tmp_path):
    from transformers import PreTrainedTokenizerFast

    train_bpe_tokenizer(generate_stories(200, 9), 320, tmp_path / "t.json")
    # like GPT-2/GPT-Neo's: <|endoftext|> is the EOS, BOS and UNK token, there is no PAD
    PreTrainedTokenizerFast(
        tokenizer_file=str(tmp_path / "t.json"),
        eos_token="<|endoftext|>",
        bos_token="<|endoftext|>",
        unk_token="<|endoftext|>",
    ).save_pretrained(str(tmp_path / "tok"))
    spec = {"kind": "pretrained", "path": str(tmp_path / "tok"), "hub_id": "EleutherAI/gpt-neo-125M"}
    write_story_jsonl(tmp_path / "c.jsonl", 80, 2)
    d = prepare_pretraining_data({"path": str(tmp_path / "c.jsonl")}, spec, 16, 0.1, 0, tmp_path / "cache")
    assert Path(d.tokenizer_path).is_dir() and d.vocab_size == 320 and d.eos_id == 0
    tok = load_tokenizer(d.tokenizer_path)
    stories = generate_stories(80, 2)
    docs = [tok.decode(x) for x in _docs(d.train_blocks, d.eos_id)]
    assert docs and set(docs) <= set(stories)
    # a copy of the same tokenizer elsewhere is the same key
    (tmp_path / "tok2").mkdir()
    for f in (tmp_path / "tok").iterdir():
        (tmp_path / "tok2" / f.name).write_bytes(f.read_bytes())
    spec2 = dict(spec, path=str(tmp_path / "tok2"))
    assert (
        pretraining_cache_path({"path": str(tmp_path / "c.jsonl")}, spec2, 16, 0.1, 0, tmp_path / "cache")
        == Path(d.tokenizer_path).parent
    )
    with pytest.raises(DataNotFoundError, match=f"--local-dir {tmp_path / 'no'}.*copy it there"):
        prepare_pretraining_data(
            {"path": str(tmp_path / "c.jsonl")}, dict(spec, path=str(tmp_path / "no")), 16, 0.1, 0, tmp_path / "cache"
        )


def test_story_data_is_the_pipeline_on_its_corpus(tmp_path):
    # the same documents, split seed and BPE give the same blocks through both entry points
    write_story_jsonl(tmp_path / "s.jsonl", 300, 5)
    a = prepare_story_data(tmp_path / "c1", num_stories=300, seed=5, vocab_size=300, seq_len=32)
    b = prepare_pretraining_data({"path": str(tmp_path / "s.jsonl")}, BPE, 32, 0.05, 5, tmp_path / "c2")
    assert torch.equal(a.train_blocks[:], b.train_blocks[:]) and torch.equal(a.val_blocks[:], b.val_blocks[:])
    assert Path(a.tokenizer_path).read_bytes() == Path(b.tokenizer_path).read_bytes()


def test_missing_model_folder_message_names_the_right_fix(tmp_path):
    from omegaconf import OmegaConf

    from acco.harness.run.preflight import check_model

    missing = tmp_path / "fig7" / "model"
    with pytest.raises(DataNotFoundError) as ei:  # one of our runs' saved models, no hub id
        check_model(OmegaConf.create({"pretrained_path": str(missing), "hub_id": None}))
    msg = _one_line(ei)
    assert msg.startswith(f"no model at {missing}") and "train.save_model=true" in msg
    assert "hf download" not in msg
    with pytest.raises(DataNotFoundError) as ei:
        check_model(OmegaConf.create({"pretrained_path": str(missing), "hub_id": "EleutherAI/gpt-neo-2.7B"}))
    assert f'"hf download EleutherAI/gpt-neo-2.7B --local-dir {missing}"' in _one_line(ei)
    missing.mkdir(parents=True)
    check_model(OmegaConf.create({"pretrained_path": str(missing), "hub_id": None}))  # present: no error
