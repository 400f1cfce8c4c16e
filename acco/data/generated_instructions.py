"""An embedded instruction corpus in Alpaca's schema, with answers that can be checked.

The CPU-scale stand-in for tatsu-lab/alpaca: ``generate_instructions(n, seed)`` returns ``n``
records ``{"instruction", "input", "output"}`` (``input`` empty for about half of them), drawn from
the story world of ``acco.data.stories`` (its names, animals, objects, foods and places). Every task has
one right answer, so a fine-tuned model can be scored with ``check_answer``:

========== ============================================ =====================================
task       example instruction (input)                  output
========== ============================================ =====================================
add        Add these numbers. (3 and 5)                 8
reverse    Reverse the order of these words. (cat ball)  ball cat
sort       Sort these words in alphabetical order.      bear cake kite
capitalize Rewrite this sentence in capital letters.    LILY FOUND A RED KITE IN THE PARK.
count      How many animals are in this list?           2
opposite   What is the opposite of happy?               sad
sound      What sound does a cow make?                  moo
story      Who found the kite? (Lily found a red kite   Lily
           in the park.)
========== ============================================ =====================================

Only ``random.Random(seed)`` is used: record ``i`` is the same for every ``n`` and every process.
The task of a record is recognised from its instruction (``task_of``), so records read back from a
file (``write_alpaca_json``) are checked the same way.
"""

from __future__ import annotations

import json
import os
import random
import re

from ..atomic import atomic_open
from .stories import ANIMALS, BOY_NAMES, FOODS, GIRL_NAMES, OBJECTS, PLACES

__all__ = ["TASKS", "check_answer", "generate_instructions", "task_of", "write_alpaca_json"]

_ANIMALS = tuple(dict.fromkeys(kind for kind, _, _ in ANIMALS))
_SOUNDS = tuple((kind, sound) for kind, sound, _ in ANIMALS)
_THINGS = tuple(o for o, _, _ in OBJECTS if " " not in o) + tuple(f for f, _ in FOODS if " " not in f)
_WORDS = _ANIMALS + _THINGS
_NAMES = GIRL_NAMES + BOY_NAMES
_OPPOSITES = (
    ("big", "small"),
    ("hot", "cold"),
    ("happy", "sad"),
    ("fast", "slow"),
    ("up", "down"),
    ("day", "night"),
    ("wet", "dry"),
    ("loud", "quiet"),
    ("open", "closed"),
    ("full", "empty"),
    ("in", "out"),
    ("yes", "no"),
    ("first", "last"),
    ("early", "late"),
    ("clean", "dirty"),
    ("strong", "weak"),
    ("near", "far"),
    ("push", "pull"),
    ("win", "lose"),
    ("left", "right"),
    ("thick", "thin"),
    ("rich", "poor"),
    ("sweet", "sour"),
    ("top", "bottom"),
)
# (past tense, base form) of the one-sentence stories
_VERBS = (("found", "find"), ("lost", "lose"), ("saw", "see"), ("hid", "hide"), ("left", "leave"))


def _a(phrase: str) -> str:
    return ("an " if phrase[0] in "aeiou" else "a ") + phrase


def _words(rng: random.Random, k: int, pool=_WORDS) -> list[str]:
    return rng.sample(pool, k)


def _sentence(rng: random.Random) -> tuple[str, dict]:
    name = rng.choice(_NAMES)
    obj, adjs, _ = rng.choice(OBJECTS)
    adj = rng.choice(adjs)
    place, prep, _ = rng.choice(PLACES)
    past, base = rng.choice(_VERBS)
    facts = {
        "name": name,
        "obj": obj,
        "what": _a(f"{adj} {obj}"),
        "where": f"{prep} {place}",
        "past": past,
        "base": base,
    }
    return f"{name} {past} {facts['what']} {facts['where']}.", facts


# ---- tasks: each returns (instruction, input, output); with_input chooses the variant -----------
def _add(rng, with_input):
    a, b = rng.randint(0, 20), rng.randint(0, 20)
    if with_input:
        return (
            rng.choice(("Add these numbers.", "Add the two numbers.", "What is the sum of these numbers?")),
            f"{a} and {b}",
            str(a + b),
        )
    return f"What is {a} plus {b}?", "", str(a + b)


def _reverse(rng, with_input):
    words = _words(rng, rng.randint(3, 5))
    out = " ".join(reversed(words))
    if with_input:
        return "Reverse the order of these words.", " ".join(words), out
    return f"Reverse the order of the words: {' '.join(words)}", "", out


def _sort(rng, with_input):
    words = _words(rng, rng.randint(3, 5))
    out = " ".join(sorted(words))
    if with_input:
        return "Sort these words in alphabetical order.", " ".join(words), out
    return f"Sort the words {' '.join(words)} in alphabetical order.", "", out


def _capitalize(rng, with_input):
    sentence, _ = _sentence(rng)
    if with_input:
        return "Rewrite this sentence in capital letters.", sentence, sentence.upper()
    return f"Rewrite in capital letters: {sentence}", "", sentence.upper()


def _count(rng, with_input):
    if rng.random() < 0.5:
        n_animals = rng.randint(1, 4)
        items = _words(rng, n_animals, _ANIMALS) + _words(rng, rng.randint(1, 3), _THINGS)
        rng.shuffle(items)
        what, answer = "animals", n_animals
    else:
        items = _words(rng, rng.randint(2, 6))
        what, answer = "words", len(items)
    listed = ", ".join(items)
    if with_input:
        return f"How many {what} are in this list?", listed, str(answer)
    return f"How many {what} are there in this list: {listed}?", "", str(answer)


def _opposite(rng, with_input):
    pair = rng.choice(_OPPOSITES)
    word, opp = pair if rng.random() < 0.5 else pair[::-1]
    if with_input:
        return "Give the opposite of this word.", word, opp
    return f"What is the opposite of {word}?", "", opp


def _sound(rng, with_input):
    kind, sound = rng.choice(_SOUNDS)
    return f"What sound does {_a(kind)} make?", "", sound


def _story(rng, with_input):
    sentence, f = _sentence(rng)
    if rng.random() < 0.5:  # two characters: the question needs the right one
        other = rng.choice(_NAMES)
        while other == f["name"]:
            other = rng.choice(_NAMES)
        place = f["where"].split(" ", 1)[1]
        sentence = f"{f['name']} and {other} went to {place}. {sentence.replace(f['name'], other, 1)}"
        f = dict(f, name=other)
    q = rng.randrange(3)
    if q == 0:
        question, answer = f"Who {f['past']} the {f['obj']}?", f["name"]
    elif q == 1:
        question, answer = f"What did {f['name']} {f['base']}?", f["what"]
    else:
        question, answer = f"Where did {f['name']} {f['base']} the {f['obj']}?", f["where"]
    if with_input:
        return question, sentence, answer
    return f"Read the story and answer the question. {sentence} {question}", "", answer


TASKS = {
    "add": _add,
    "reverse": _reverse,
    "sort": _sort,
    "capitalize": _capitalize,
    "count": _count,
    "opposite": _opposite,
    "sound": _sound,
    "story": _story,
}
_KINDS = tuple(TASKS)

# Recognising the task from the instruction (tried in this order; "story" last).
_PATTERNS = (
    (
        "add",
        r"(Add these numbers\.|Add the two numbers\.|What is the sum of these numbers\?"
        r"|What is \d+ plus \d+\?)",
    ),
    ("reverse", r"Reverse the order of (these words\.|the words: .+)"),
    ("sort", r"Sort (these words|the words .+) in alphabetical order\."),
    ("capitalize", r"Rewrite (this sentence in capital letters\.|in capital letters: .+)"),
    ("count", r"How many (animals|words) (are in this list\?|are there in this list: .+\?)"),
    ("opposite", r"(Give the opposite of this word\.|What is the opposite of \w+\?)"),
    ("sound", r"What sound does an? .+ make\?"),
    ("story", r"(Read the story and answer the question\. .+|(Who|What did|Where did) .+\?)"),
)


def generate_instructions(n: int, seed: int) -> list[dict]:
    """``n`` records ``{"instruction", "input", "output"}``, a pure function of ``(n, seed)``;
    record ``i`` does not depend on ``n``."""
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    rng = random.Random(f"acco-instructions:{seed}")
    out = []
    for _ in range(n):
        kind = rng.choice(_KINDS)
        with_input = rng.random() < 0.5
        instruction, inp, output = TASKS[kind](rng, with_input)
        out.append({"instruction": instruction, "input": inp, "output": output})
    return out


def write_alpaca_json(path: str | os.PathLike, n: int, seed: int) -> None:
    """Write ``generate_instructions(n, seed)``: a JSON list like Alpaca's ``alpaca_data.json``, or
    one object a line when ``path`` ends with ``.jsonl``."""
    records = generate_instructions(n, seed)
    with atomic_open(path, "w", encoding="utf-8") as fh:
        if os.fspath(path).endswith(".jsonl"):
            for r in records:
                fh.write(json.dumps(r, ensure_ascii=False) + "\n")
        else:
            json.dump(records, fh, ensure_ascii=False, indent=2)
            fh.write("\n")


def task_of(example: dict) -> str:
    """The task of a generated record, recognised from its instruction (ValueError if none)."""
    instruction = example["instruction"]
    for kind, pattern in _PATTERNS:
        if re.fullmatch(pattern, instruction, flags=re.DOTALL):
            return kind
    raise ValueError(f"not an instruction of the embedded corpus: {instruction[:80]!r}")


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return ""


def _norm_words(text: str) -> list[str]:
    return re.sub(r"[^a-z0-9' ]+", " ", text.lower()).split()


def _no_article(words: list[str]) -> list[str]:
    return words[1:] if words[:1] in (["a"], ["an"], ["the"]) else words


def check_answer(example: dict, generated_text: str) -> bool:
    """Whether ``generated_text`` (the model's continuation after the prompt) answers ``example``.

    The first non-empty line is the answer. Numbers: its first integer; capital letters: the exact
    line (spacing aside); everything else: the words, ignoring case and punctuation (and a leading
    article for the story questions).
    """
    kind = task_of(example)
    answer, expected = _first_line(generated_text), example["output"]
    if kind in ("add", "count"):
        m = re.search(r"-?\d+", answer)
        return m is not None and int(m.group()) == int(expected)
    if kind == "capitalize":
        return " ".join(answer.split()) == " ".join(expected.split())
    got, want = _norm_words(answer), _norm_words(expected)
    if kind == "story":
        return bool(got) and _no_article(got) == _no_article(want)
    return bool(got) and got == want
