"""Single-process evaluation: LAMBADA splitting and scoring (checked against a hand computation),
block perplexity (against the model's own loss), the LAMBADA-like generator, and instruction
accuracy with greedy generation, on tiny GPT-Neo models."""

import json
import math
import sys
from pathlib import Path

import pytest
import torch

try:
    import acco.data  # noqa: F401
except ImportError:  # plain `pytest` without the project root on sys.path
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from transformers import GPTNeoConfig, GPTNeoForCausalLM

from acco.data import (
    format_alpaca,
    generate_instructions,
    load_raw_dataset,
    load_tokenizer,
    task_of,
    train_bpe_tokenizer,
)
from acco.evaluation import (
    block_perplexity,
    evaluation_suite,
    generate_lambada_like,
    heldout_evaluation,
    instruction_accuracy,
    lambada_evaluation,
    lambada_examples,
    lambada_scores,
    write_lambada_jsonl,
)
from acco.evaluation.instruct_eval import greedy_generate


@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    path = tmp_path_factory.mktemp("tok") / "tokenizer.json"
    texts = [r["text"] for r in generate_lambada_like(300, 1)]
    texts += [format_alpaca(r)[0] + r["output"] for r in generate_instructions(300, 2)]
    train_bpe_tokenizer(texts, 500, path)
    return load_tokenizer(path)


def tiny_gptneo(vocab_size, max_positions=256, seed=0):
    torch.manual_seed(seed)
    cfg = GPTNeoConfig(
        vocab_size=vocab_size,
        hidden_size=32,
        num_layers=2,
        num_heads=2,
        intermediate_size=64,
        attention_types=[[["global", "local"], 1]],
        window_size=max_positions,
        max_position_embeddings=max_positions,
        bos_token_id=0,
        eos_token_id=0,
    )
    return GPTNeoForCausalLM(cfg)


def memorize(model, sequences, steps=200, lr=1e-2):
    """Overfit ``model`` on a few token sequences (so that its greedy predictions are known)."""
    width = max(len(s) for s in sequences)
    ids = torch.zeros((len(sequences), width), dtype=torch.long)
    labels = torch.full((len(sequences), width), -100, dtype=torch.long)
    for i, s in enumerate(sequences):
        ids[i, : len(s)] = torch.tensor(s)
        labels[i, : len(s)] = torch.tensor(s)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    for _ in range(steps):
        loss = model(input_ids=ids, labels=labels).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model


# ----------------------------------------------------------------------------------------------
# LAMBADA
# ----------------------------------------------------------------------------------------------
def test_lambada_examples_split():
    text = '"Good morning," said Lila, smiling at Maya'
    assert lambada_examples([{"text": text}]) == [('"Good morning," said Lila, smiling at', " Maya")]
    assert lambada_examples([text, "a b c"]) == [('"Good morning," said Lila, smiling at', " Maya"), ("a b", " c")]
    assert lambada_examples([{"passage": "x  y"}], text_field="passage") == [("x ", " y")]
    import datasets

    ds = datasets.Dataset.from_list([{"text": "one two three"}, {"text": "four five"}])
    assert lambada_examples(ds) == [("one two", " three"), ("four", " five")]
    with pytest.raises(ValueError, match="no field"):
        lambada_examples(ds, text_field="sentence")
    with pytest.raises(ValueError, match="no space"):
        lambada_examples(["word"])


def test_lambada_like_generator(tmp_path):
    a = generate_lambada_like(200, 3)
    assert a == generate_lambada_like(200, 3) and generate_lambada_like(20, 3) == a[:20]
    assert sum(x != y for x, y in zip(a, generate_lambada_like(200, 4))) > 150
    assert all(set(r) == {"text"} for r in a)
    starts = {r["text"].split(". ")[1].split()[0] for r in a}
    assert len(starts) >= 4  # several templates
    for context, target in lambada_examples(a):
        word = target.strip()
        assert target == " " + word and word.isalpha()  # ends with the bare word, no punctuation
        assert word in context.split() or word + "." in context.split() or word + "," in context.split()
    write_lambada_jsonl(tmp_path / "lambada_test.jsonl", 30, 3)
    lines = (tmp_path / "lambada_test.jsonl").read_text().splitlines()
    assert [json.loads(x) for x in lines] == a[:30]
    ds = load_raw_dataset(None, str(tmp_path), split="test")
    assert lambada_examples(ds) == lambada_examples(a[:30])


def _hand_scores(model, tok, context, target, limit=None):
    ctx = tok(context, add_special_tokens=False)["input_ids"]
    whole = tok(context + target, add_special_tokens=False)["input_ids"]
    cont = whole[len(ctx) :]
    full = ctx + cont
    if limit is not None:
        full = full[-(limit + 1) :]
    inp = full[:-1]
    was_training = model.training
    model.eval()  # GPT-Neo has dropout: compare in eval mode
    with torch.no_grad():
        logp = torch.log_softmax(model(input_ids=torch.tensor([inp])).logits[0].double(), -1)
    model.train(was_training)
    first = len(inp) - len(cont)
    ll = sum(float(logp[first + j, t]) for j, t in enumerate(cont))
    greedy = all(int(logp[first + j].argmax()) == t for j, t in enumerate(cont))
    return ll, greedy


def test_lambada_scores_equal_a_hand_computation(tok):
    records = generate_lambada_like(6, 5)
    examples = lambada_examples(records)
    model = tiny_gptneo(len(tok))
    memorize(model, [tok(records[0]["text"])["input_ids"]], steps=150)
    model.train()
    # one example
    ll0, greedy0 = _hand_scores(model, tok, *examples[0])
    one = lambada_scores(model, tok, examples[:1], "cpu")
    assert one["examples"] == 1 and greedy0 and one["accuracy"] == 1.0
    assert one["perplexity"] == pytest.approx(math.exp(-ll0), rel=1e-5)
    assert model.training  # the training flag is restored
    # several examples of different lengths, batched with padding or not
    hand = [_hand_scores(model, tok, c, t) for c, t in examples]
    assert any(g for _, g in hand) and not all(g for _, g in hand)
    for bs in (1, 4, 8):
        s = lambada_scores(model, tok, examples, "cpu", batch_size=bs)
        assert s["examples"] == 6
        assert s["perplexity"] == pytest.approx(math.exp(-sum(ll for ll, _ in hand) / 6), rel=1e-5)
        assert s["accuracy"] == sum(g for _, g in hand) / 6
    # a context longer than the model's window keeps its last tokens
    short = tiny_gptneo(len(tok), max_positions=24, seed=1)
    ll, g = _hand_scores(short, tok, *examples[1], limit=24)
    s = lambada_scores(short, tok, examples[1:2], "cpu")
    assert s["perplexity"] == pytest.approx(math.exp(-ll), rel=1e-5) and s["accuracy"] == float(g)
    with pytest.raises(ValueError):
        lambada_scores(model, tok, [], "cpu")


# ----------------------------------------------------------------------------------------------
# block perplexity
# ----------------------------------------------------------------------------------------------
def test_block_perplexity_equals_the_models_loss():
    model = tiny_gptneo(97)
    blocks = torch.randint(0, 97, (5, 16), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        hf_loss = model(input_ids=blocks, labels=blocks).loss.item()
    for bs in (1, 2, 8):  # uneven last batch included
        r = block_perplexity(model, blocks, "cpu", batch_size=bs)
        assert r["tokens"] == 5 * 15
        assert r["loss"] == pytest.approx(hf_loss, rel=1e-5)
        assert r["perplexity"] == pytest.approx(math.exp(hf_loss), rel=1e-5)
    assert model.training
    # a model that knows the blocks has a lower perplexity
    memorize(model, blocks.tolist(), steps=60)
    assert block_perplexity(model, blocks, "cpu")["perplexity"] < r["perplexity"] / 2
    with pytest.raises(ValueError):
        block_perplexity(model, blocks[0], "cpu")
    with pytest.raises(ValueError):
        block_perplexity(model, blocks[:0], "cpu")


# ----------------------------------------------------------------------------------------------
# shared evaluations: N shards' sums added = one process
# ----------------------------------------------------------------------------------------------
def _added(evaluation, model, num_shards):
    """What acco/train/post_training.py's all-reduce computes, added here in float64."""
    parts = [evaluation.partial(model, shard, num_shards) for shard in range(num_shards)]
    return evaluation.finish({key: sum(p[key] for p in parts) for key in parts[0]})


def test_sharded_evaluations_add_up_to_the_single_process_scores(tok):
    records = generate_lambada_like(11, 6)
    examples = lambada_examples(records)
    model = tiny_gptneo(len(tok))
    memorize(model, [tok(records[0]["text"])["input_ids"], tok(records[3]["text"])["input_ids"]], steps=150)
    blocks = torch.randint(0, len(tok), (7, 16), generator=torch.Generator().manual_seed(1))
    suite = evaluation_suite(
        {
            "heldout": heldout_evaluation(blocks, "cpu", batch_size=3),
            "lambada": lambada_evaluation(tok, examples, "cpu", batch_size=4),
        }
    )
    single = {"heldout": block_perplexity(model, blocks, "cpu"), "lambada": lambada_scores(model, tok, examples, "cpu")}
    assert 0 < single["lambada"]["accuracy"] < 1  # some examples right, some wrong: the counts matter
    for n in (1, 2, 3, 5, 12):  # 12 > 11 examples > 7 blocks: some shards are empty
        got = suite(model) if n == 1 else _added(suite, model, n)
        assert got["heldout"]["tokens"] == 7 * 15 and got["lambada"]["examples"] == 11
        assert got["lambada"]["accuracy"] == single["lambada"]["accuracy"]
        for name, key in (("heldout", "loss"), ("heldout", "perplexity"), ("lambada", "perplexity")):
            assert got[name][key] == pytest.approx(single[name][key], rel=1e-6), (n, name, key)
    with pytest.raises(ValueError, match="no LAMBADA examples"):  # when it is built, not when it runs
        lambada_evaluation(tok, [], "cpu")


def test_the_final_evaluation_reads_lambada_when_it_is_built(tok, tmp_path):
    """Issue 29 (2): LAMBADA is read when the task is built, before step 1 — not at the end of a
    long run, where a compute node without the hub used to fail the run after all its training."""
    from acco.config.experiments import compose
    from acco.config.schema import typed
    from acco.tasks.lm import lambada_final_eval

    path = tmp_path / "lambada_test.jsonl"
    write_lambada_jsonl(path, 6, 3)
    cfg = typed(
        compose(["final_eval.lambada=true", "final_eval.heldout=false", f"final_eval.lambada_source.path={path}"])
    )
    evaluation = lambada_final_eval(cfg, tok, [], "cpu")
    path.unlink()  # gone by the end of the run: the evaluation needs nothing more from disk
    assert evaluation(tiny_gptneo(len(tok)))["lambada"]["examples"] == 6
    with pytest.raises(Exception, match="not found at"):  # missing when built: fails then
        lambada_final_eval(cfg, tok, [], "cpu")


# ----------------------------------------------------------------------------------------------
# instruction accuracy
# ----------------------------------------------------------------------------------------------
def test_instruction_accuracy_with_greedy_generation(tok):
    records = generate_instructions(200, 8)
    add = next(r for r in records if task_of(r) == "add")
    opp = next(r for r in records if task_of(r) == "opposite")
    seqs = [
        tok(format_alpaca(r)[0])["input_ids"]
        + tok(r["output"], add_special_tokens=False)["input_ids"]
        + [tok.eos_token_id]
        for r in (add, opp)
    ]
    model = memorize(tiny_gptneo(len(tok)), seqs, steps=200)
    model.eval()
    # the cached greedy loop equals recomputing the whole sequence at every step
    prompt = tok(format_alpaca(add)[0])["input_ids"]
    with torch.no_grad():
        fast = greedy_generate(model, prompt, 8, None, "cpu")
        slow, ids = [], list(prompt)
        for _ in range(8):
            nxt = int(model(input_ids=torch.tensor([ids])).logits[0, -1].argmax())
            slow.append(nxt)
            ids.append(nxt)
    assert fast == slow
    with torch.no_grad():
        answer = greedy_generate(model, prompt, 16, tok.eos_token_id, "cpu")
    assert tok.decode(answer) == add["output"]  # memorized, and stopped at EOS

    wrong = dict(add, output=str(int(add["output"]) + 1))
    model.train()
    assert instruction_accuracy(model, tok, [add, opp], "cpu") == 1.0
    assert instruction_accuracy(model, tok, [add, opp, wrong], "cpu") == pytest.approx(2 / 3)
    assert instruction_accuracy(model, tok, [wrong], "cpu") == 0.0
    assert model.training
    with pytest.raises(ValueError):
        instruction_accuracy(model, tok, [], "cpu")
