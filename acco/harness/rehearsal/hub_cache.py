"""The rehearsal's stand-ins as the hub client caches them, so a rehearsal can name the paper's hub ids.

The hub is unreachable here; what a login node's ``experiments/prepare_data.py`` (``hf download``
without ``--local-dir``) would leave in the hub cache is written directly, in the client's layout
(huggingface_hub's cache: ``<type>s--<org>--<name>/blobs/<sha256>``, ``snapshots/<revision>/<file>``
a relative symbolic link to its blob, ``refs/main`` holding the revision). The jobs then resolve the
hub ids there with ``HF_HUB_OFFLINE=1`` (``HF_HUB_CACHE`` pointing at the folder) through the same
code as on a cluster: huggingface_hub's ``snapshot_download(local_files_only=True)`` for datasets,
transformers' ``from_pretrained(<id>, local_files_only=True)`` for tokenizers.

The revision is the SHA-1 of the repository's file names and contents: a pure function of them.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from ...data.cache import _visible

__all__ = ["HUB_REPOS", "write_hub_cache", "write_hub_repo"]

# hub id -> (repository type, the rehearsal folder (make.FOLDERS key) holding its stand-in files)
HUB_REPOS = {
    "Skylion007/openwebtext": ("dataset", "openwebtext"),
    "roneneldan/TinyStories": ("dataset", "tinystories"),
    "tatsu-lab/alpaca": ("dataset", "alpaca"),
    "EleutherAI/lambada_openai": ("dataset", "lambada_openai"),
    "EleutherAI/gpt-neo-125M": ("model", "gpt_neo_tokenizer"),
    "meta-llama/Llama-2-7b-hf": ("model", "llama_tokenizer"),
    "EleutherAI/gpt-neo-2.7B": ("model", "gpt_neo_model"),
}


def _model_config(family: str, vocab_size: int) -> bytes:
    """The ``config.json`` a model repository carries beside its tokenizer: transformers reads it
    first when a tokenizer is named by hub id (the rehearsal's model shapes, conf/experiment/*/rehearsal.yaml)."""
    from transformers import GPTNeoConfig, LlamaConfig, PretrainedConfig

    config: PretrainedConfig
    if family == "llama":
        config = LlamaConfig(
            vocab_size=vocab_size, hidden_size=64, intermediate_size=172, num_hidden_layers=2, num_attention_heads=4
        )
    else:
        eos = vocab_size - 1  # the GPT-Neo-format tokenizer's <|endoftext|>
        config = GPTNeoConfig(
            vocab_size=vocab_size,
            hidden_size=64,
            num_layers=2,
            num_heads=4,
            attention_types=[[["global", "local"], 1]],
            bos_token_id=eos,
            eos_token_id=eos,
        )
    return config.to_json_string().encode()


def write_hub_repo(hub_cache: Path, repo_id: str, repo_type: str, files: dict[str, bytes]) -> Path:
    """``files`` (relative name -> content) as ``repo_id``'s main revision in ``hub_cache``;
    returns the snapshot folder."""
    digests = {rel: hashlib.sha256(data).hexdigest() for rel, data in sorted(files.items())}
    revision = hashlib.sha1("".join(f"{rel}\0{d}\n" for rel, d in digests.items()).encode()).hexdigest()
    repo = hub_cache / f"{repo_type}s--{repo_id.replace('/', '--')}"
    snapshot = repo / "snapshots" / revision
    (repo / "blobs").mkdir(parents=True, exist_ok=True)
    for rel, digest in digests.items():
        blob = repo / "blobs" / digest
        if not blob.exists():
            blob.write_bytes(files[rel])
        link = snapshot / rel
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(blob, link.parent))
    (repo / "refs").mkdir(exist_ok=True)
    (repo / "refs" / "main").write_text(revision)
    return snapshot


def _read_folder(source: Path) -> dict[str, bytes]:
    return {
        f.relative_to(source).as_posix(): f.read_bytes()
        for f in sorted(source.rglob("*"))
        if f.is_file() and _visible(f.relative_to(source))
    }


def write_hub_cache(hub_cache: Path, root: Path, folders: dict[str, str], vocab: dict[str, int]) -> None:
    """``HUB_REPOS``' stand-ins (under ``root``, at ``folders``' paths) into ``hub_cache``; a tokenizer
    folder standing in for a model repository gets the ``config.json`` of a model of ``vocab``'s size
    for its family (``gpt_neo``, ``llama``)."""
    for repo_id, (repo_type, folder) in HUB_REPOS.items():
        files = _read_folder(root / folders[folder])
        if folder.endswith("_tokenizer"):
            family = folder[: -len("_tokenizer")]
            files["config.json"] = _model_config(family, vocab[family])
        write_hub_repo(hub_cache, repo_id, repo_type, files)
