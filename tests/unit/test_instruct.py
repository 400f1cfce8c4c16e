"""Instruction data: the embedded Alpaca-schema corpus and its answer checker, the Alpaca prompt
templates, tokenized examples with loss masking (cached), and the per-rank padded stream."""

import json
import sys
from collections import Counter
from pathlib import Path

import pytest
import torch

try:
    import acco.data  # noqa: F401
except ImportError:  # plain `pytest` without the project root on sys.path
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from acco.data import (
    IGNORE_INDEX,
    InstructBatchStream,
    TokenizedExamples,
    check_answer,
    format_alpaca,
    generate_instructions,
    generate_stories,
    label_tokens,
    load_raw_dataset,
    load_tokenizer,
    prepare_instruction_data,
    task_of,
    train_bpe_tokenizer,
    write_alpaca_json,
)
from acco.data import alpaca as instruct_mod
from acco.data.generated_instructions import TASKS


# ----------------------------------------------------------------------------------------------
# templates
# ----------------------------------------------------------------------------------------------
def test_alpaca_templates_exact():
    prompt, response = format_alpaca({"instruction": "Add these numbers.", "input": "3 and 5", "output": "8"})
    assert prompt == (
        "Below is an instruction that describes a task, paired with an input that provides further context. "
        "Write a response that appropriately completes the request.\n\n"
        "### Instruction:\nAdd these numbers.\n\n### Input:\n3 and 5\n\n### Response:\n"
    )
    assert response == "8"
    expected_no_input = (
        "Below is an instruction that describes a task. "
        "Write a response that appropriately completes the request.\n\n"
        "### Instruction:\nWhat is 3 plus 5?\n\n### Response:\n"
    )
    assert format_alpaca({"instruction": "What is 3 plus 5?", "input": "", "output": "8"}) == (expected_no_input, "8")
    assert format_alpaca({"instruction": "What is 3 plus 5?", "output": "8"})[0] == expected_no_input
    assert format_alpaca({"instruction": "What is 3 plus 5?", "input": None, "output": "8"})[0] == expected_no_input


# ----------------------------------------------------------------------------------------------
# the embedded corpus
# ----------------------------------------------------------------------------------------------
def test_instruction_generator_is_deterministic(tmp_path):
    a = generate_instructions(400, 3)
    assert a == generate_instructions(400, 3) and generate_instructions(50, 3) == a[:50]
    assert sum(x != y for x, y in zip(a, generate_instructions(400, 4))) > 300
    assert all(set(r) == {"instruction", "input", "output"} and all(isinstance(v, str) for v in r.values()) for r in a)
    with_input = sum(r["input"] != "" for r in a)
    assert 100 < with_input < 300
    kinds = Counter(task_of(r) for r in a)
    assert set(kinds) == set(TASKS) and min(kinds.values()) > 20
    # both variants of a task exist (except "sound", which has no input)
    for kind in set(TASKS) - {"sound"}:
        assert {r["input"] == "" for r in a if task_of(r) == kind} == {True, False}, kind
    # answers are right
    for r in a:
        kind = task_of(r)
        if kind == "add":
            x, y = map(
                int,
                (r["input"].split(" and ") if r["input"] else r["instruction"][len("What is ") : -1].split(" plus ")),
            )
            assert int(r["output"]) == x + y
        elif kind == "sort":
            words = (
                r["input"].split()
                if r["input"]
                else r["instruction"][len("Sort the words ") :].split(" in ")[0].split()
            )
            assert r["output"].split() == sorted(words)
        elif kind == "capitalize":
            assert r["output"] == (r["input"] or r["instruction"].split(": ", 1)[1]).upper()
        elif kind == "story":
            context = r["input"] or r["instruction"]
            assert r["output"] in context

    write_alpaca_json(tmp_path / "alpaca_data.json", 30, 3)
    assert json.loads((tmp_path / "alpaca_data.json").read_text()) == a[:30]
    write_alpaca_json(tmp_path / "alpaca.jsonl", 30, 3)
    lines = (tmp_path / "alpaca.jsonl").read_text().splitlines()
    assert [json.loads(x) for x in lines] == a[:30]
    ds = load_raw_dataset(None, str(tmp_path / "alpaca_data.json"))
    assert ds.to_list() == a[:30]


def test_check_answer_accepts_right_and_rejects_wrong():
    records = generate_instructions(600, 11)
    by_kind = {}
    for r in records:
        by_kind.setdefault(task_of(r), []).append(r)
    for kind, recs in by_kind.items():
        for r in recs[:20]:
            assert check_answer(r, r["output"]), (kind, r)
            assert check_answer(r, "\n " + r["output"] + "\n\n### Instruction:\nmore"), (kind, r)
            wrong = next(x["output"] for x in recs if x["output"] != r["output"])
            assert not check_answer(r, wrong), (kind, r, wrong)
            assert not check_answer(r, ""), (kind, r)
    add = next(r for r in by_kind["add"])
    assert check_answer(add, f"{add['output']}.") and not check_answer(add, str(int(add["output"]) + 1))
    cap = by_kind["capitalize"][0]
    assert not check_answer(cap, cap["output"].lower())
    rev = by_kind["reverse"][0]
    assert check_answer(rev, rev["output"].upper() + ".")
    assert not check_answer(rev, " ".join(reversed(rev["output"].split())))
    who = next(r for r in by_kind["story"] if r["output"][0].isupper())
    assert check_answer(who, who["output"].lower() + ".")
    what = next(r for r in by_kind["story"] if r["output"].startswith(("a ", "an ")))
    assert check_answer(what, what["output"].split(" ", 1)[1]) and check_answer(
        what, "the " + what["output"].split(" ", 1)[1]
    )
    assert not check_answer(what, what["output"] + " and a ball")
    with pytest.raises(ValueError, match="not an instruction"):
        check_answer({"instruction": "Give three tips for staying healthy.", "input": "", "output": "x"}, "x")


# ----------------------------------------------------------------------------------------------
# tokenized examples
# ----------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tok_path(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tok")
    texts = generate_stories(200, 0) + [format_alpaca(r)[0] + r["output"] for r in generate_instructions(300, 99)]
    train_bpe_tokenizer(texts, 600, folder / "tokenizer.json")
    return str(folder / "tokenizer.json")


@pytest.fixture(scope="module")
def alpaca_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("alpaca") / "alpaca_data.json"
    write_alpaca_json(path, 120, 5)
    return str(path)


def _manual(tok, record, max_len, response_only):
    prompt, response = format_alpaca(record)
    p = tok(prompt)["input_ids"]
    ids = (p + tok(response, add_special_tokens=False)["input_ids"] + [tok.eos_token_id])[:max_len]
    labels = list(ids)
    if response_only:
        labels[: len(p)] = [IGNORE_INDEX] * min(len(p), len(ids))
    return ids, labels, len(p)


def test_instruction_examples_and_loss_masking(tmp_path, tok_path, alpaca_file):
    tok = load_tokenizer(tok_path)
    records = json.loads(Path(alpaca_file).read_text())
    src = {"path": alpaca_file}
    for response_only in (True, False):
        d = prepare_instruction_data(src, tok_path, 512, 0.1, 0, tmp_path / "cache", response_only_loss=response_only)
        assert len(d.train) == 108 and len(d.val) == 12 and len(d.val_records) == 12
        assert d.pad_id == d.eos_id == tok.eos_token_id and d.vocab_size == len(tok)
        assert d.response_only_loss is response_only
        train_records = [r for r in records if r not in d.val_records]
        assert len(train_records) == 108
        for i, r in enumerate(train_records):
            ids, labels, n_prompt = _manual(tok, r, 512, response_only)
            ex = d.train[i]
            assert ex["input_ids"].tolist() == ids and ex["labels"].tolist() == labels
            masked = (ex["labels"] == IGNORE_INDEX).nonzero().flatten().tolist()
            assert masked == (list(range(n_prompt)) if response_only else [])
            assert ex["input_ids"][-1].item() == tok.eos_token_id
            assert tok.decode(ex["input_ids"][n_prompt:-1].tolist()) == r["output"]
        loaded = load_tokenizer(d.tokenizer_path)
        assert loaded("Who found the kite?")["input_ids"] == tok("Who found the kite?")["input_ids"]

    # truncation to max_len; examples left without any label are dropped
    d = prepare_instruction_data(src, tok, 60, 0.1, 0, tmp_path / "cache", response_only_loss=True)
    assert int(d.train.lengths().max()) == 60  # some were cut
    meta = json.loads((Path(d.tokenizer_path).parent / "meta.json").read_text())
    assert 0 < meta["num_dropped"]["train"] == 108 - len(d.train) < 108
    for i in range(len(d.train)):
        assert (d.train[i]["labels"] != IGNORE_INDEX).any()


def test_instruction_cache_reuse(tmp_path, tok_path, alpaca_file, monkeypatch):
    src = {"path": alpaca_file}
    d1 = prepare_instruction_data(src, tok_path, 256, 0.1, 0, tmp_path, response_only_loss=True)
    folder = Path(d1.tokenizer_path).parent

    def boom(*a, **k):
        raise AssertionError("rebuilt although cached")

    monkeypatch.setattr(instruct_mod, "_build", boom)
    # the same tokenizer given as an object is the same key
    d2 = prepare_instruction_data(src, load_tokenizer(tok_path), 256, 0.1, 0, tmp_path, response_only_loss=True)
    assert Path(d2.tokenizer_path).parent == folder
    assert torch.equal(d1.train.input_ids, d2.train.input_ids) and torch.equal(d1.val.labels, d2.val.labels)
    assert d1.val_records == d2.val_records
    for change in [dict(response_only_loss=False), dict(max_len=128), dict(seed=1), dict(val_fraction=0.2)]:
        kw = dict(
            source=src,
            tokenizer=tok_path,
            max_len=256,
            val_fraction=0.1,
            seed=0,
            cache_dir=tmp_path,
            response_only_loss=True,
        )
        kw.update(change)
        with pytest.raises(AssertionError, match="rebuilt"):
            prepare_instruction_data(**kw)


# ----------------------------------------------------------------------------------------------
# the stream
# ----------------------------------------------------------------------------------------------
def _examples(n=37, pad=0):
    g = torch.Generator().manual_seed(0)
    ids, labels = [], []
    for i in range(n):
        length = int(torch.randint(3, 20, (1,), generator=g))
        x = [1000 + i] * length  # example i is recognisable by its tokens
        ids.append(x)
        labels.append([IGNORE_INDEX] * (length // 2) + x[length // 2 :])
    return TokenizedExamples.from_lists(ids, labels, pad_id=pad)


def _which(batch):
    return [int(row[0]) - 1000 for row in batch["input_ids"]]


def test_stream_pads_to_the_longest_in_the_batch():
    ex = _examples(pad=7)
    s = InstructBatchStream(ex, 0, 1, 5, seed=0)
    widths = set()
    for k in range(12):
        b = s.batch(k)
        idx = _which(b)
        lengths = [len(ex[i]["input_ids"]) for i in idx]
        assert b["input_ids"].shape == b["labels"].shape == b["attention_mask"].shape == (5, max(lengths))
        widths.add(max(lengths))
        for row, (i, n) in enumerate(zip(idx, lengths)):
            assert b["input_ids"][row, :n].tolist() == ex[i]["input_ids"].tolist()
            assert b["labels"][row, :n].tolist() == ex[i]["labels"].tolist()
            assert (b["input_ids"][row, n:] == 7).all() and (b["labels"][row, n:] == IGNORE_INDEX).all()
            assert b["attention_mask"][row].tolist() == [1] * n + [0] * (max(lengths) - n)
        assert label_tokens(b) == int((b["labels"][:, 1:] != IGNORE_INDEX).sum())
        assert all(v.dtype == torch.long for v in b.values())
    assert len(widths) > 1  # variable width: padded per micro-batch, not to a global length


def test_stream_is_pure_and_ranks_are_disjoint():
    ex = _examples(n=41)
    W, B = 3, 4
    seen = []
    for r in range(W):
        s = InstructBatchStream(ex, r, W, B, seed=5)
        assert s.examples_per_rank == 13 and s.batches_per_epoch == 3
        epoch0 = [i for k in range(3) for i in _which(s.batch(k))]
        assert len(set(epoch0)) == 12 and all(i % W == r and i < 39 for i in epoch0)
        epoch1 = [i for k in range(3, 6) for i in _which(s.batch(k))]
        assert epoch1 != epoch0  # reshuffled every epoch
        seen.append(set(epoch0) | set(epoch1))
        fresh = InstructBatchStream(ex, r, W, B, seed=5)
        for k in (5, 0, 4, 1, 5):  # random access equals sequential access
            assert all(torch.equal(fresh.batch(k)[key], s.batch(k)[key]) for key in ("input_ids", "labels"))
        it = iter(InstructBatchStream(ex, r, W, B, seed=5))
        assert _which(next(it)) == _which(s.batch(0)) and _which(next(it)) == _which(s.batch(1))
    assert not (seen[0] & seen[1]) and not (seen[1] & seen[2]) and not (seen[0] & seen[2])
    other = InstructBatchStream(ex, 0, W, B, seed=6)
    assert [_which(other.batch(k)) for k in range(3)] != [
        _which(InstructBatchStream(ex, 0, W, B, seed=5).batch(k)) for k in range(3)
    ]
    with pytest.raises(ValueError, match="micro_batch_size"):
        InstructBatchStream(ex, 0, 4, 11, seed=0)
    with pytest.raises(ValueError, match="pad_id"):
        InstructBatchStream([{"input_ids": [1], "labels": [1]}] * 4, 0, 1, 2, seed=0)
    lists = [{"input_ids": [1, 2, 3][:n], "labels": [1, 2, 3][:n]} for n in (1, 2, 3, 3)]
    b = InstructBatchStream(lists, 0, 1, 4, seed=0, pad_id=9).batch(0)
    assert b["input_ids"].shape == (4, 3) and (b["input_ids"] == 9).sum() == 3
