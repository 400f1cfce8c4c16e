"""Instruction fine-tuning data (Alpaca): prompt template, tokenized examples, per-rank stream.

Template: Stanford Alpaca's two prompts (with and without an ``input``), followed by the response
and EOS. The prompts end with ``"### Response:\\n"`` as in the Alpaca README and in the ``text``
column of tatsu-lab/alpaca (stanford_alpaca's ``train.py`` omits that final newline).

``prepare_instruction_data(source, tokenizer, max_len, val_fraction, seed, cache_dir,
response_only_loss)`` builds once and caches, in ``<cache_dir>/instruct-<key>/``:

* ``examples.pt``: per split the flat ``input_ids`` and ``labels`` (int64) and the ``offsets``;
* ``val_records.json``: the raw validation records (to score generations with ``check_answer``);
* ``tokenizer/``: the tokenizer used (``save_pretrained``); ``meta.json``.

An example is ``input_ids = prompt + response + [EOS]`` truncated to ``max_len`` (the prompt is
tokenized with the tokenizer's own special tokens, e.g. a BOS for Llama; the response without;
tokenizing them apart makes the prompt/response boundary exact). ``labels`` equal ``input_ids``,
with the prompt positions set to -100 when ``response_only_loss``; examples left with no label
(a prompt of ``max_len`` tokens or more) are dropped and counted in ``meta.json``. The model shifts
the labels itself (Hugging Face convention).

Cache key: SHA-256 of {format, template, the source's identity (a local path by its files' names,
sizes and mtimes), the tokenizer's content fingerprint (class, serialized vocabulary/merges/
normalizer/post-processor, special tokens, size — not its name or path), max_len, val_fraction
(None with val_split), seed, response_only_loss}. Locked and published atomically like the others.

Loss normalization: ``InstructBatchStream`` micro-batches have different numbers of label tokens;
a Hugging Face model's ``loss`` is the mean over the label tokens of *that* micro-batch, so
averaging micro-batch losses weights tokens of short batches more than a mean over all tokens of a
step would (as in stanford_alpaca's Trainer). ``label_tokens(batch)`` gives the count, for callers
that want to weight micro-batches by it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import time
from pathlib import Path

import torch

from .cache import build_once, cache_key
from .packed import MicroBatchStream, epoch_order
from .prepare_pretraining import load_source_splits, locate_source, normalize_source, source_identity, split_indices
from .tokenizer import load_tokenizer, tokenizer_fingerprint
from .tokenizer_spec import eos_id_of, resolve_tokenizer_spec

__all__ = [
    "ALPACA_PROMPT_INPUT",
    "ALPACA_PROMPT_NO_INPUT",
    "IGNORE_INDEX",
    "InstructBatchStream",
    "InstructData",
    "TokenizedExamples",
    "format_alpaca",
    "label_tokens",
    "prepare_instruction_data",
]

IGNORE_INDEX = -100
INSTRUCT_FORMAT_VERSION = 1
TEMPLATE_NAME = "alpaca"

ALPACA_PROMPT_INPUT = (
    "Below is an instruction that describes a task, paired with an input that provides further context. "
    "Write a response that appropriately completes the request.\n\n"
    "### Instruction:\n{instruction}\n\n### Input:\n{input}\n\n### Response:\n"
)
ALPACA_PROMPT_NO_INPUT = (
    "Below is an instruction that describes a task. "
    "Write a response that appropriately completes the request.\n\n"
    "### Instruction:\n{instruction}\n\n### Response:\n"
)


def format_alpaca(example: dict) -> tuple[str, str]:
    """``(prompt, response)`` of an Alpaca record; the no-input prompt when ``input`` is empty."""
    inp = example.get("input") or ""
    template = ALPACA_PROMPT_INPUT if inp != "" else ALPACA_PROMPT_NO_INPUT
    return template.format(instruction=example["instruction"], input=inp), example["output"]


# ----------------------------------------------------------------------------------------------
# tokenized examples
# ----------------------------------------------------------------------------------------------
class TokenizedExamples:
    """Variable-length examples stored flat: example ``i`` is ``[offsets[i], offsets[i+1])``."""

    def __init__(self, input_ids: torch.Tensor, labels: torch.Tensor, offsets: torch.Tensor, pad_id: int):
        if input_ids.shape != labels.shape or offsets[-1].item() != input_ids.numel():
            raise ValueError("input_ids, labels and offsets do not match")
        self.input_ids, self.labels, self.offsets, self.pad_id = input_ids, labels, offsets, int(pad_id)

    @classmethod
    def from_lists(cls, ids: list[list[int]], labels: list[list[int]], pad_id: int) -> TokenizedExamples:
        lengths = torch.tensor([0] + [len(x) for x in ids], dtype=torch.long)
        flat_ids = torch.tensor([t for x in ids for t in x], dtype=torch.long)
        flat_labels = torch.tensor([t for x in labels for t in x], dtype=torch.long)
        return cls(flat_ids, flat_labels, torch.cumsum(lengths, 0), pad_id)

    def __len__(self) -> int:
        return self.offsets.numel() - 1

    def __getitem__(self, i: int) -> dict:
        if not -len(self) <= i < len(self):
            raise IndexError(i)
        i %= len(self)
        a, b = self.offsets[i].item(), self.offsets[i + 1].item()
        return {"input_ids": self.input_ids[a:b], "labels": self.labels[a:b]}

    def lengths(self) -> torch.Tensor:
        return self.offsets[1:] - self.offsets[:-1]

    def state(self) -> dict:
        return {"input_ids": self.input_ids, "labels": self.labels, "offsets": self.offsets}


@dataclasses.dataclass
class InstructData:
    train: TokenizedExamples
    val: TokenizedExamples
    val_records: list[dict]  # the raw validation records, in the order of ``val`` (before drops)
    pad_id: int
    eos_id: int
    vocab_size: int
    tokenizer_path: str  # a saved tokenizer folder (load_tokenizer / AutoTokenizer read it)
    response_only_loss: bool


def _as_tokenizer(tokenizer):
    if isinstance(tokenizer, (str, os.PathLike)):
        return load_tokenizer(tokenizer)
    if isinstance(tokenizer, dict):
        resolved = resolve_tokenizer_spec(tokenizer)
        if resolved.tokenizer is None:
            raise ValueError(
                "instruction data needs an existing tokenizer: give a tokenizer, a path or "
                "a {'kind': 'pretrained', ...} spec"
            )
        return resolved.tokenizer
    return tokenizer


def _pad_id(tok) -> int:
    return int(tok.pad_token_id) if tok.pad_token_id is not None else eos_id_of(tok)


def _encode(tok, records: list[dict], max_len: int, response_only_loss: bool):
    eos = eos_id_of(tok)
    ids_out, labels_out, dropped = [], [], 0
    for start in range(0, len(records), 1000):
        chunk = records[start : start + 1000]
        pairs = [format_alpaca(r) for r in chunk]
        prompts = tok([p for p, _ in pairs], verbose=False)["input_ids"]
        responses = tok([r for _, r in pairs], add_special_tokens=False, verbose=False)["input_ids"]
        for p, r in zip(prompts, responses):
            ids = (list(p) + list(r) + [eos])[:max_len]
            labels = list(ids)
            if response_only_loss:
                n_prompt = min(len(p), len(ids))
                labels[:n_prompt] = [IGNORE_INDEX] * n_prompt
                if n_prompt == len(ids):
                    dropped += 1
                    continue
            ids_out.append(ids)
            labels_out.append(labels)
    return ids_out, labels_out, dropped


def _records(ds) -> list[dict]:
    missing = {"instruction", "output"} - set(ds.column_names)
    if missing:
        raise ValueError(
            f"instruction data needs the fields instruction, input, output; missing "
            f"{', '.join(sorted(missing))} (columns: {', '.join(ds.column_names)})"
        )
    has_input = "input" in ds.column_names
    return [
        {"instruction": r["instruction"], "input": (r["input"] or "") if has_input else "", "output": r["output"]}
        for r in ds
    ]


def _build(
    tmp: Path,
    name: str,
    src: dict,
    tok,
    key: dict,
    max_len: int,
    val_fraction: float,
    seed: int,
    response_only_loss: bool,
) -> None:
    t0 = time.perf_counter()
    hf_cache = tmp / "hf_cache"
    train_ds, val_ds = load_source_splits(src, hf_cache)
    train_records = _records(train_ds)
    if val_ds is None:
        train_idx, val_idx = split_indices(len(train_records), val_fraction, seed)
        val_records = [train_records[i] for i in val_idx]
        train_records = [train_records[i] for i in train_idx]
    else:
        val_records = _records(val_ds)
    del train_ds, val_ds
    shutil.rmtree(hf_cache, ignore_errors=True)
    pad = _pad_id(tok)
    splits, dropped = {}, {}
    for split, recs in (("train", train_records), ("val", val_records)):
        ids, labels, dropped[split] = _encode(tok, recs, max_len, response_only_loss)
        splits[split] = TokenizedExamples.from_lists(ids, labels, pad)
    if len(splits["train"]) == 0:
        raise ValueError(f"no training example left (max_len={max_len} is shorter than every prompt)")
    torch.save({k: v.state() for k, v in splits.items()}, tmp / "examples.pt")
    (tmp / "val_records.json").write_text(json.dumps(val_records, ensure_ascii=False) + "\n")
    tok.save_pretrained(os.fspath(tmp / "tokenizer"))
    meta = {
        "key": key,
        "cache_name": name,
        "pad_id": pad,
        "eos_id": eos_id_of(tok),
        "tokenizer_vocab_size": len(tok),
        "response_only_loss": response_only_loss,
        "num_train_examples": len(splits["train"]),
        "num_val_examples": len(splits["val"]),
        "num_dropped": dropped,
        "num_train_tokens": int(splits["train"].input_ids.numel()),
        "num_train_label_tokens": int((splits["train"].labels != IGNORE_INDEX).sum()),
        "max_example_tokens": int(splits["train"].lengths().max()),
        "build_seconds": round(time.perf_counter() - t0, 3),
    }
    (tmp / "meta.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")


def _load(final: Path) -> InstructData:
    meta = json.loads((final / "meta.json").read_text())
    state = torch.load(final / "examples.pt", map_location="cpu", weights_only=True)
    pad = int(meta["pad_id"])
    return InstructData(
        train=TokenizedExamples(**state["train"], pad_id=pad),
        val=TokenizedExamples(**state["val"], pad_id=pad),
        val_records=json.loads((final / "val_records.json").read_text()),
        pad_id=pad,
        eos_id=int(meta["eos_id"]),
        vocab_size=int(meta["tokenizer_vocab_size"]),
        tokenizer_path=str(final / "tokenizer"),
        response_only_loss=bool(meta["response_only_loss"]),
    )


def instruction_cache_key(
    source: dict, tokenizer, max_len: int, val_fraction: float, seed: int, response_only_loss: bool
) -> dict:
    src = normalize_source(source, text_field_default=None)
    tok = _as_tokenizer(tokenizer)
    return {
        "format": INSTRUCT_FORMAT_VERSION,
        "template": TEMPLATE_NAME,
        "source": source_identity(src),
        "tokenizer": tokenizer_fingerprint(tok),
        "max_len": int(max_len),
        "val_fraction": None if src["val_split"] else float(val_fraction),
        "seed": int(seed),
        "response_only_loss": bool(response_only_loss),
    }


def prepare_instruction_data(
    source: dict, tokenizer, max_len: int, val_fraction: float, seed: int, cache_dir, response_only_loss: bool = True
) -> InstructData:
    """Tokenized Alpaca-style train/validation examples, built once and cached (module docstring).

    ``tokenizer``: a loaded tokenizer, a path (``tokenizer.json`` or a saved folder) or a
    ``{"kind": "pretrained", ...}`` spec. ``source``: as for ``prepare_pretraining_data``
    (``hub_id``/``path``/``split``/``config_name``/``max_documents``/``val_split``).
    """
    if not 0.0 <= val_fraction < 1.0:
        raise ValueError(f"val_fraction must be in [0, 1), got {val_fraction}")
    if max_len < 2:
        raise ValueError(f"max_len must be >= 2, got {max_len}")
    src = locate_source(normalize_source(source, text_field_default=None))
    tok = _as_tokenizer(tokenizer)
    key = instruction_cache_key(src, tok, max_len, val_fraction, seed, response_only_loss)
    name = f"instruct-{cache_key(key)}"
    return build_once(
        cache_dir,
        name,
        lambda tmp: _build(tmp, name, src, tok, key, max_len, val_fraction, seed, bool(response_only_loss)),
        _load,
    )


# ----------------------------------------------------------------------------------------------
# per-rank stream
# ----------------------------------------------------------------------------------------------
def label_tokens(batch: dict) -> int:
    """The number of tokens a micro-batch's loss is averaged over (labels != -100, after the shift)."""
    return int((batch["labels"][:, 1:] != IGNORE_INDEX).sum())


class InstructBatchStream(MicroBatchStream):
    """The micro-batches of one data-parallel rank over variable-length examples.

    Sharding and order as ``RankBatchStream``: rank ``r`` owns the examples ``r, r + W, ...``
    (``n // W`` each, disjoint), visited in a new order every epoch drawn from ``(seed, epoch,
    rank)``. ``batch(k)`` is a pure function of ``(rank, k, seed)``: ``input_ids`` right-padded with
    the pad id to the longest example of that micro-batch, ``attention_mask`` (1 on real tokens),
    ``labels`` (-100 on padding). See the module docstring on the loss normalization.
    """

    def __init__(
        self, examples, rank: int, world_size: int, micro_batch_size: int, seed: int, pad_id: int | None = None
    ):
        self.check_rank(rank, world_size, micro_batch_size)
        pad_id = getattr(examples, "pad_id", None) if pad_id is None else pad_id
        if pad_id is None:
            raise ValueError("pad_id is needed when the examples do not carry one")
        n = len(examples)
        per_rank = n // world_size
        if per_rank < micro_batch_size:
            raise ValueError(
                f"rank {rank} would own {per_rank} examples ({n} over {world_size} ranks), "
                f"fewer than micro_batch_size={micro_batch_size}"
            )
        self.examples, self.pad_id = examples, int(pad_id)
        self.rank, self.world_size, self.micro_batch_size, self.seed = rank, world_size, micro_batch_size, seed
        self.examples_per_rank = per_rank
        self.batches_per_epoch = per_rank // micro_batch_size
        self.indices = list(range(rank, per_rank * world_size, world_size))
        self._epoch = -1
        self._order: list[int] = []  # set for epoch 0 at the first batch

    def batch_indices(self, k: int) -> list[int]:
        """The global indices of the examples of micro-batch ``k``."""
        if k < 0:
            raise ValueError(f"batch index must be >= 0, got {k}")
        epoch, j = divmod(k, self.batches_per_epoch)
        if epoch != self._epoch:
            self._order = epoch_order(self.examples_per_rank, self.seed, epoch, self.rank)
            self._epoch = epoch
        picked = self._order[j * self.micro_batch_size : (j + 1) * self.micro_batch_size]
        return [self.indices[i] for i in picked]

    def batch(self, k: int) -> dict:
        items = [self.examples[i] for i in self.batch_indices(k)]
        width = max(len(x["input_ids"]) for x in items)
        b = len(items)
        input_ids = torch.full((b, width), self.pad_id, dtype=torch.long)
        labels = torch.full((b, width), IGNORE_INDEX, dtype=torch.long)
        attention_mask = torch.zeros((b, width), dtype=torch.long)
        for row, x in enumerate(items):
            n = len(x["input_ids"])
            input_ids[row, :n] = torch.as_tensor(x["input_ids"], dtype=torch.long)
            labels[row, :n] = torch.as_tensor(x["labels"], dtype=torch.long)
            attention_mask[row, :n] = 1
        return {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels}

    def __repr__(self) -> str:
        return (
            f"InstructBatchStream(rank={self.rank}, world_size={self.world_size}, "
            f"micro_batch_size={self.micro_batch_size}, seed={self.seed}, "
            f"examples_per_rank={self.examples_per_rank}, batches_per_epoch={self.batches_per_epoch})"
        )
