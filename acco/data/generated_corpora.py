"""Embedded, generated corpora written as files in the cache, so the CPU scale reads them through
the same loaders (`datasets`) as the real datasets."""

from __future__ import annotations

import os

from .cache import build_once

WRITERS: dict[str, object] = {}


def _writers():
    if not WRITERS:
        from . import write_story_jsonl
        from .generated_instructions import write_alpaca_json
        from .generated_lambada import write_lambada_jsonl

        WRITERS.update(
            {
                "stories": (write_story_jsonl, "stories.jsonl"),
                "instructions": (write_alpaca_json, "alpaca_data.json"),
                "lambada_like": (write_lambada_jsonl, "lambada_test.jsonl"),
            }
        )
    return WRITERS


def generator_names() -> tuple[str, ...]:
    """Every value a source's `generator` may take (data.source, final_eval.lambada_source)."""
    return tuple(_writers())


def generated_source(source: dict, seed: int, cache_dir: str) -> dict:
    """A source dict naming a `generator` becomes one naming the generated file (written once)."""
    kind = source.get("generator")
    if not kind:
        return {k: v for k, v in source.items() if k not in ("generator", "num_stories", "num_examples")}
    writers = _writers()
    if kind not in writers:
        raise ValueError(f"unknown generator {kind!r}; choose one of {', '.join(writers)}")
    write, filename = writers[kind]
    n = int(source.get("num_examples") or source.get("num_stories") or 1000)
    name = f"generated-{kind}-{n}-{seed}"
    build_once(cache_dir, name, lambda tmp: write(os.path.join(tmp, filename), n, seed), lambda p: p)
    return {"hub_id": None, "path": os.path.join(cache_dir, name, filename), "split": None}
