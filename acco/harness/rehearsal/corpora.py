"""Small local copies of the paper's datasets, in each hub repository's own layout and schema.

What ``hf download --repo-type dataset <id> --include ... --local-dir <dir>`` leaves,
with generated content (the story world of ``acco.data.stories``):

=====================  ==================================================  ========================
dataset                files (under its folder)                            fields
=====================  ==================================================  ========================
Skylion007/openwebtext ``data/train-00000-of-00001.parquet``               ``text``
roneneldan/TinyStories ``data/train-00000-of-00001.parquet``,              ``text``
                       ``data/validation-00000-of-00001.parquet``
tatsu-lab/alpaca       ``data/train-00000-of-00001.parquet``               ``instruction``, ``input``,
                                                                           ``output``, ``text``
EleutherAI/lambada_    ``default/test-00000-of-00001.parquet`` (the        ``text``
openai                 ``default`` config folder, ``test`` split)
=====================  ==================================================  ========================

OpenWebText-like documents are web pages: a headline, a dateline, several paragraphs (stories,
quotes), a closing line, paragraphs separated by blank lines. Alpaca's ``text`` is its prompt
template followed by the response, as in the hub's column. Every file is a pure function of
``(sizes, seed)``: only ``random.Random`` with string seeds is used.
"""

from __future__ import annotations

import random
from pathlib import Path

from ...atomic import atomic_write
from ...data.alpaca import format_alpaca
from ...data.generated_instructions import generate_instructions
from ...data.generated_lambada import generate_lambada_like
from ...data.stories import BOY_NAMES, GIRL_NAMES, OBJECTS, PLACES, generate_stories

__all__ = [
    "LAYOUT",
    "generate_web_documents",
    "write_alpaca",
    "write_lambada",
    "write_openwebtext",
    "write_parquet",
    "write_tinystories",
]

# dataset folder -> the files written there (relative), as the hub repositories lay them out
LAYOUT = {
    "openwebtext": ["data/train-00000-of-00001.parquet"],
    "tinystories": ["data/train-00000-of-00001.parquet", "data/validation-00000-of-00001.parquet"],
    "alpaca": ["data/train-00000-of-00001.parquet"],
    "lambada_openai": ["default/test-00000-of-00001.parquet"],
}

_SECTIONS = ("Local news", "Community", "Family", "Weekend", "Outdoors", "Opinion", "Stories")
_CLOSINGS = (
    "Share this story.",
    "Read more stories like this one in our weekend section.",
    "Comments are closed.",
    "This story was sent in by a reader.",
    "Have a story to tell? Write to us.",
)


def write_parquet(path: Path, columns: dict[str, list]) -> None:
    """One parquet file with these string columns, written under a temporary name and renamed."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path.parent.mkdir(parents=True, exist_ok=True)
    table = pa.table({k: pa.array(v, type=pa.string()) for k, v in columns.items()})
    atomic_write(path, lambda tmp: pq.write_table(table, tmp))


def _web_document(rng: random.Random, stories: list[str]) -> str:
    name = rng.choice(GIRL_NAMES + BOY_NAMES)
    place, _, details = rng.choice(PLACES)
    obj = rng.choice(OBJECTS)[0]
    headline = rng.choice(
        (
            f"{name} and the {obj} at {place}",
            f"What happened at {place} this week",
            f"A day at {place}: {rng.choice(details)} and more",
            f"{name} tells the story of the {obj}",
        )
    )
    section = rng.choice(_SECTIONS)
    paragraphs = [headline.title(), f"{section} | {place.title()}"]
    for i, story in enumerate(stories):
        paragraphs.append(story)
        if i == 0 and rng.random() < 0.6:
            paragraphs.append(
                f'"It was a day to remember," {name} said when we met {rng.choice(("at", "near"))} '
                f'{place}. "Everyone should see {rng.choice(details)} at least once."'
            )
    paragraphs.append(rng.choice(_CLOSINGS))
    return "\n\n".join(paragraphs)


def generate_web_documents(n: int, seed: int, stories_per_document: tuple[int, int] = (2, 4)) -> list[str]:
    """``n`` OpenWebText-like documents (multi-paragraph web pages), a pure function of ``(n, seed)``."""
    rng = random.Random(f"acco-rehearsal-web:{seed}")
    lo, hi = stories_per_document
    counts = [rng.randint(lo, hi) for _ in range(n)]
    pool = generate_stories(sum(counts), seed)
    docs, at = [], 0
    for k in counts:
        docs.append(_web_document(rng, pool[at : at + k]))
        at += k
    return docs


def write_openwebtext(folder: Path, n: int, seed: int) -> list[str]:
    """Skylion007/openwebtext's layout; returns the documents (the tokenizers are trained on them)."""
    docs = generate_web_documents(n, seed)
    write_parquet(folder / LAYOUT["openwebtext"][0], {"text": docs})
    return docs


def write_tinystories(folder: Path, n_train: int, n_valid: int, seed: int) -> None:
    """roneneldan/TinyStories' parquet layout: a train and a validation split."""
    stories = generate_stories(n_train + n_valid, seed + 1)  # not the web documents' stories
    write_parquet(folder / LAYOUT["tinystories"][0], {"text": stories[:n_train]})
    write_parquet(folder / LAYOUT["tinystories"][1], {"text": stories[n_train:]})


def write_alpaca(folder: Path, n: int, seed: int) -> None:
    """tatsu-lab/alpaca's layout and columns (``text`` = prompt template + response)."""
    records = generate_instructions(n, seed)
    texts = ["".join(format_alpaca(r)) for r in records]
    write_parquet(
        folder / LAYOUT["alpaca"][0],
        {
            "instruction": [r["instruction"] for r in records],
            "input": [r["input"] for r in records],
            "output": [r["output"] for r in records],
            "text": texts,
        },
    )


def write_lambada(folder: Path, n: int, seed: int) -> None:
    """EleutherAI/lambada_openai's ``default`` config, ``test`` split: passages whose last word is
    the target (names, objects and places introduced earlier in the passage)."""
    write_parquet(folder / LAYOUT["lambada_openai"][0], {"text": [r["text"] for r in generate_lambada_like(n, seed)]})
