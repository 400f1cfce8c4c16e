"""Write the rehearsal's local data, tokenizers and pretrained model under one folder (default
``data/rehearsal``), where a user would put downloaded copies:

    data/rehearsal/
      openwebtext/data/train-00000-of-00001.parquet                 Skylion007/openwebtext
      tinystories/data/{train,validation}-00000-of-00001.parquet    roneneldan/TinyStories
      alpaca/data/train-00000-of-00001.parquet                      tatsu-lab/alpaca
      lambada_openai/default/test-00000-of-00001.parquet            EleutherAI/lambada_openai
      tokenizers/gpt-neo/     GPT-Neo-format tokenizer (EleutherAI/gpt-neo-125M's stand-in)
      tokenizers/llama-2/     Llama-2-format tokenizer (meta-llama/Llama-2-7b-hf's stand-in)
      models/gpt-neo-small/   a pretrained-model folder with its tokenizer (EleutherAI/gpt-neo-2.7B's stand-in)
      hub/                    all of the above under the paper's hub ids, as the hub client caches them
                              (hub_cache): HF_HUB_CACHE=data/rehearsal/hub
      rehearsal.json          what was written and with which sizes (written last)

Deterministic and idempotent: a folder whose ``rehearsal.json`` matches the requested format,
seed and sizes is left alone; otherwise everything is built in a temporary sibling folder and put
in place with one rename, under a lock (concurrent callers build it once).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from . import corpora
from .hub_cache import write_hub_cache
from .model_folder import GPT_NEO_SHAPE, save_gpt_neo_model
from .tokenizer_folders import save_gpt_neo_tokenizer, save_llama_tokenizer

__all__ = ["DEFAULT_SIZES", "FOLDERS", "FORMAT", "MANIFEST", "make_rehearsal_data", "read_manifest"]

FORMAT = 2  # 2: the hub cache (hub/)
MANIFEST = "rehearsal.json"
DEFAULT_SIZES = {
    "openwebtext_documents": 400,  # ~1 MB of text, ~0.4M tokens with the 1024-id tokenizer
    "tinystories_train": 2000,
    "tinystories_validation": 200,
    "alpaca_examples": 1000,
    "lambada_passages": 200,
    "gpt_neo_vocab": 1024,  # GPT-Neo: 50257
    "llama_vocab": 768,  # Llama-2: 32000
}
FOLDERS = {
    "openwebtext": "openwebtext",
    "tinystories": "tinystories",
    "alpaca": "alpaca",
    "lambada_openai": "lambada_openai",
    "gpt_neo_tokenizer": "tokenizers/gpt-neo",
    "llama_tokenizer": "tokenizers/llama-2",
    "gpt_neo_model": "models/gpt-neo-small",
    "hub_cache": "hub",
}


def read_manifest(out: str | os.PathLike) -> dict | None:
    try:
        return json.loads((Path(out) / MANIFEST).read_text())
    except (OSError, ValueError):
        return None


def _manifest(out: str | os.PathLike) -> dict:
    """The manifest of a folder found up to date (so it has one)."""
    manifest = read_manifest(out)
    assert manifest is not None, out
    return manifest


def _up_to_date(out: Path, seed: int, sizes: dict) -> bool:
    m = read_manifest(out)
    if not m:
        return False
    return m.get("format") == FORMAT and m.get("seed") == seed and m.get("sizes") == sizes


def _build(tmp: Path, seed: int, sizes: dict) -> dict:
    docs = corpora.write_openwebtext(tmp / FOLDERS["openwebtext"], sizes["openwebtext_documents"], seed)
    corpora.write_tinystories(
        tmp / FOLDERS["tinystories"], sizes["tinystories_train"], sizes["tinystories_validation"], seed
    )
    corpora.write_alpaca(tmp / FOLDERS["alpaca"], sizes["alpaca_examples"], seed)
    corpora.write_lambada(tmp / FOLDERS["lambada_openai"], sizes["lambada_passages"], seed)
    neo = save_gpt_neo_tokenizer(docs, sizes["gpt_neo_vocab"], tmp / FOLDERS["gpt_neo_tokenizer"])
    llama = save_llama_tokenizer(docs, sizes["llama_vocab"], tmp / FOLDERS["llama_tokenizer"])
    save_gpt_neo_model(tmp / FOLDERS["gpt_neo_tokenizer"], tmp / FOLDERS["gpt_neo_model"], seed)
    write_hub_cache(tmp / FOLDERS["hub_cache"], tmp, FOLDERS, {"gpt_neo": len(neo), "llama": len(llama)})
    files = sorted(str(p.relative_to(tmp)) for p in tmp.rglob("*") if p.is_file())
    return {
        "format": FORMAT,
        "seed": seed,
        "sizes": sizes,
        "folders": FOLDERS,
        "tokenizer_vocab": {"gpt_neo": len(neo), "llama": len(llama)},
        "gpt_neo_model": dict(GPT_NEO_SHAPE, vocab_size=len(neo)),
        "files": files,
    }


def make_rehearsal_data(
    out: str | os.PathLike = "data/rehearsal", seed: int = 0, sizes: dict | None = None, force: bool = False, log=print
) -> dict:
    """Write (or keep) the rehearsal data in ``out``; returns its manifest."""
    from ...data.cache import exclusive_lock

    sizes = {**DEFAULT_SIZES, **(sizes or {})}
    unknown = set(sizes) - set(DEFAULT_SIZES)
    if unknown:
        raise ValueError(f"unknown size(s) {', '.join(sorted(unknown))}; known: {', '.join(DEFAULT_SIZES)}")
    out = Path(out)
    if not force and _up_to_date(out, seed, sizes):
        log(f"rehearsal data up to date: {out}")
        return _manifest(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with exclusive_lock(out.parent / f".{out.name}.lock"):
        if not force and _up_to_date(out, seed, sizes):  # built by another caller meanwhile
            return _manifest(out)
        tmp = out.parent / f".{out.name}.tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        try:
            manifest = _build(tmp, seed, sizes)
            (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
            if out.exists():
                shutil.rmtree(out)
            os.rename(tmp, out)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    log(f"wrote rehearsal data: {out} ({len(manifest['files'])} files)")
    return manifest
