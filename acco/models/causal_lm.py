"""Hugging Face causal LMs built from a config in `conf/model/` (GPT-Neo, Llama), or loaded from a
local pretrained checkpoint. No distribution code here."""

from __future__ import annotations

import os

import torch
from omegaconf import DictConfig
from transformers import AutoModelForCausalLM, GPTNeoConfig, GPTNeoForCausalLM, LlamaConfig, LlamaForCausalLM

from ..config.plain import plain
from .gpt_neo_attention import without_host_syncs

FAMILIES = {"gpt_neo": (GPTNeoConfig, GPTNeoForCausalLM), "llama": (LlamaConfig, LlamaForCausalLM)}


def hf_config(model_cfg: DictConfig | dict, vocab_size: int | None = None, eos_id: int | None = None):
    """`model_cfg`: a run's model section, or plain {family, config} (acco.train.memory)."""
    family = model_cfg["family"]
    if family not in FAMILIES:
        raise ValueError(f"unknown model family {family!r}; choose one of {', '.join(FAMILIES)}")
    fields = dict(plain(model_cfg["config"]))  # Hugging Face takes plain values
    if vocab_size is not None and fields.get("vocab_size") is None:
        fields["vocab_size"] = vocab_size
    if eos_id is not None:
        fields.setdefault("bos_token_id", eos_id)
        fields.setdefault("eos_token_id", eos_id)
    if family == "gpt_neo" and "attention_types" in fields:
        # YAML gives lists; GPT-Neo wants [[["global", "local"], repeat], ...]
        fields["attention_types"] = [[list(kinds), int(rep)] for kinds, rep in fields["attention_types"]]
    return FAMILIES[family][0](**fields)


def build_causal_lm(
    model_cfg: DictConfig, vocab_size: int | None = None, eos_id: int | None = None, seed: int = 0
) -> torch.nn.Module:
    """A freshly initialised model (same weights on every rank for the same seed), or the
    pretrained weights at `model_cfg.pretrained_path`."""
    path = model_cfg.pretrained_path
    if path:
        if not os.path.isdir(path):
            hub_id = model_cfg.hub_id or "the model"
            raise FileNotFoundError(
                f"pretrained model not found at {path}: download {hub_id} (e.g. `hf "
                f"download {hub_id} --local-dir {path}`) on a machine with internet and copy it there"
            )
        model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True, dtype=torch.float32)
    else:
        torch.manual_seed(seed)
        model = FAMILIES[model_cfg.family][1](hf_config(model_cfg, vocab_size, eos_id))
    without_host_syncs(model)  # GPT-Neo's eager attention syncs the host in every layer's forward
    return model
