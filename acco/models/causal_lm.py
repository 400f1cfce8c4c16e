"""Hugging Face causal LMs built from a config in `conf/model/` (GPT-Neo, Llama, or any architecture
transformers knows with `family: auto` and `config.model_type`), or loaded from a local pretrained
checkpoint. No distribution code here."""

from __future__ import annotations

import os

import torch
from omegaconf import DictConfig
from transformers import (
    AutoConfig,
    AutoModelForCausalLM,
    GPTNeoConfig,
    GPTNeoForCausalLM,
    LlamaConfig,
    LlamaForCausalLM,
)

from ..config.plain import plain
from .gpt_neo_attention import without_host_syncs

FAMILIES = {"gpt_neo": (GPTNeoConfig, GPTNeoForCausalLM), "llama": (LlamaConfig, LlamaForCausalLM)}
# any causal LM transformers knows, named by model.config.model_type (built offline from its fields)
AUTO = "auto"


def family_names() -> tuple[str, ...]:
    """Every value model.family may take."""
    return (*FAMILIES, AUTO)


def causal_lm_types() -> tuple[str, ...]:
    """The model types transformers can build a causal LM for (model.family=auto's choices)."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    return tuple(sorted(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES))


def hf_config(model_cfg: DictConfig | dict, vocab_size: int | None = None, eos_id: int | None = None):
    """`model_cfg`: a run's model section, or plain {family, config} (acco.train.memory)."""
    family = model_cfg["family"]
    if family not in family_names():
        raise ValueError(f"unknown model family {family!r}; choose one of {', '.join(family_names())}")
    fields = dict(plain(model_cfg["config"]))  # Hugging Face takes plain values
    if vocab_size is not None and fields.get("vocab_size") is None:
        fields["vocab_size"] = vocab_size
    if eos_id is not None:
        fields.setdefault("bos_token_id", eos_id)
        fields.setdefault("eos_token_id", eos_id)
    if family == "gpt_neo" and "attention_types" in fields:
        # YAML gives lists; GPT-Neo wants [[["global", "local"], repeat], ...]
        fields["attention_types"] = [[list(kinds), int(rep)] for kinds, rep in fields["attention_types"]]
    if family == AUTO:
        model_type = fields.pop("model_type", None)
        if model_type not in causal_lm_types():
            raise ValueError(
                f"model.config.model_type={model_type!r} is not a causal LM transformers knows; "
                f"choose one of {', '.join(causal_lm_types())}"
            )
        return AutoConfig.for_model(model_type, **fields)
    return FAMILIES[family][0](**fields)


def fresh_model(family: str, config) -> torch.nn.Module:
    """An initialised model of `family` from its built config (the caller seeds, or picks the device)."""
    if family == AUTO:
        return AutoModelForCausalLM.from_config(config)
    return FAMILIES[family][1](config)


def build_causal_lm(
    model_cfg: DictConfig, vocab_size: int | None = None, eos_id: int | None = None, seed: int = 0
) -> torch.nn.Module:
    """A freshly initialised model (same weights on every rank for the same seed), or the
    pretrained weights at `model_cfg.pretrained_path`."""
    path = model_cfg.pretrained_path
    model: torch.nn.Module
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
        model = fresh_model(model_cfg.family, hf_config(model_cfg, vocab_size, eos_id))
    without_host_syncs(model)  # GPT-Neo's eager attention syncs the host in every layer's forward
    return model
