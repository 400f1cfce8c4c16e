"""A small GPT-Neo saved as a pretrained model folder, standing in for ``models/gpt-neo-2.7B``.

The folder is what ``hf download EleutherAI/gpt-neo-2.7B --local-dir ...`` leaves, at a tiny size:
``config.json`` (GPTNeoConfig), the weights (``model.safetensors``), ``generation_config.json`` and
the GPT-Neo-format tokenizer; fig8's fine-tuning loads it through ``model.pretrained_path`` and
``data.tokenizer.path`` exactly as it would load the real one. Its weights are a seeded
initialisation, not a trained model: the rehearsal checks the code paths, not the losses.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

__all__ = ["GPT_NEO_SHAPE", "save_gpt_neo_model"]

# the stand-in's shape (GPT-Neo 2.7B: hidden 2560, 32 layers, 20 heads, 2048 positions)
GPT_NEO_SHAPE: dict[str, Any] = {
    "hidden_size": 64,
    "num_layers": 2,
    "num_heads": 4,
    "max_position_embeddings": 256,
    "attention_types": [[["global", "local"], 1]],
    "window_size": 256,
}


def save_gpt_neo_model(tokenizer_dir: Path, out: Path, seed: int = 0) -> None:
    """A seeded GPT-Neo of ``GPT_NEO_SHAPE`` with the vocabulary of the tokenizer saved in
    ``tokenizer_dir``, saved in ``out`` with a copy of that tokenizer's files beside it."""
    import torch
    from transformers import AutoTokenizer, GPTNeoConfig, GPTNeoForCausalLM
    from transformers.utils import logging as hf_logging

    tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_dir), local_files_only=True)
    eos = tokenizer.eos_token_id
    config = GPTNeoConfig(
        vocab_size=len(tokenizer),
        bos_token_id=eos,
        eos_token_id=eos,
        embed_dropout=0.0,
        attention_dropout=0.0,
        resid_dropout=0.0,
        **GPT_NEO_SHAPE,
    )
    torch.manual_seed(seed)
    model = GPTNeoForCausalLM(config)
    hf_logging.disable_progress_bar()  # "Writing model shards" for one small file
    model.save_pretrained(str(out))
    for f in sorted(Path(tokenizer_dir).iterdir()):
        shutil.copyfile(f, out / f.name)
