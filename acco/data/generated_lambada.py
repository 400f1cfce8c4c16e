"""A CPU-scale stand-in for LAMBADA, in its schema (``{"text": passage}``).

Short passages from the story world of ``acco.data.stories`` whose last word can only be
predicted from earlier context: a pet's name, a friend's name, an object, a place or a food
introduced earlier, with other names around as distractors. As in LAMBADA, the passage ends with
the target word, without punctuation. Deterministic: passage ``i`` depends only on ``(seed, i)``.
"""

from __future__ import annotations

import json
import os
import random

from ..atomic import atomic_open
from .stories import BOY_NAMES, FAMILY, FOODS, GIRL_NAMES, OBJECTS, PETS, PLACES

__all__ = ["generate_lambada_like", "write_lambada_jsonl"]

_FEMALE_FAMILY = ("mom", "grandma", "big sister", "aunt")
_FOODS = tuple(f for f in FOODS if " " not in f[0])


class _Cast:
    def __init__(self, rng: random.Random):
        self.female = rng.random() < 0.5
        self.name = rng.choice(GIRL_NAMES if self.female else BOY_NAMES)
        f_female = rng.random() < 0.5
        self.friend = rng.choice(GIRL_NAMES if f_female else BOY_NAMES)
        while self.friend == self.name:
            self.friend = rng.choice(GIRL_NAMES if f_female else BOY_NAMES)
        self.he, self.his = ("she", "her") if self.female else ("he", "his")
        self.fhim = "her" if f_female else "him"
        self.place, self.prep, self.details = rng.choice(PLACES)
        self.family = rng.choice(FAMILY)
        self.famhe = "she" if self.family in _FEMALE_FAMILY else "he"


def _pet(rng: random.Random, c: _Cast) -> str:
    kind, pet = rng.choice(PETS)
    return (
        f"{c.name} had a pet {kind} named {pet}. One day, {c.name} and {c.friend} took the {kind} "
        f"to {c.place}. {c.friend} threw a stick, and the {kind} ran after it. When it came back, "
        f"{c.friend} laughed and {c.name} gave a big hug to {pet}"
    )


def _friend(rng: random.Random, c: _Cast) -> str:
    detail = rng.choice(c.details)
    return (
        f"{c.name} met a new friend named {c.friend} {c.prep} {c.place}. They played near {detail} "
        f"until the sun went down. The next morning, {c.name} went back to {c.place}, hoping to "
        f'play again. Soon {c.he} saw {c.fhim} by the gate and waved. "Good morning," said '
        f"{c.name}, smiling at {c.friend}"
    )


def _object(rng: random.Random, c: _Cast) -> str:
    obj, adjs, verb = rng.choice(OBJECTS)
    adj = rng.choice(adjs)
    return (
        f"{c.name} loved {c.his} {adj} {obj} more than anything. {c.he.capitalize()} took it "
        f"everywhere. One day, {c.friend} came to {c.place} and asked if {c.he} could {verb} it "
        f"too. {c.name} thought for a moment. Then {c.he} smiled and gave {c.friend} the {adj} {obj}"
    )


def _place(rng: random.Random, c: _Cast) -> str:
    detail = rng.choice(c.details)
    return (
        f"{c.name} wanted to go to {c.place} to see {detail}. {c.his.capitalize()} {c.family} "
        f"said it was too late and that they would go tomorrow. {c.name} could not sleep. The next "
        f"day, they got up early, and at last they went to {c.place}"
    )


def _food(rng: random.Random, c: _Cast) -> str:
    food, adj = rng.choice(_FOODS)
    article = "an" if adj[0] in "aeiou" else "a"
    return (
        f"{c.name}'s {c.family} brought home {article} {adj} {food}. {c.name} wanted to eat it right "
        f"away, but {c.famhe} said to wait for {c.friend}. When {c.friend} came, they sat down "
        f"together, and everyone got a piece of the {food}"
    )


_TEMPLATES = (_pet, _friend, _object, _place, _food)


def generate_lambada_like(n: int, seed: int) -> list[dict]:
    """``n`` records ``{"text": passage}``, a pure function of ``(n, seed)``; record ``i`` does not
    depend on ``n``."""
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    rng = random.Random(f"acco-lambada-like:{seed}")
    out = []
    for _ in range(n):
        template = rng.choice(_TEMPLATES)
        out.append({"text": template(rng, _Cast(rng))})
    return out


def write_lambada_jsonl(path: str | os.PathLike, n: int, seed: int) -> None:
    """Write ``generate_lambada_like(n, seed)`` one JSON object a line (LAMBADA's jsonl schema)."""
    with atomic_open(path, "w", encoding="utf-8") as fh:
        for record in generate_lambada_like(n, seed):
            fh.write(json.dumps(record, ensure_ascii=False) + "\n")
