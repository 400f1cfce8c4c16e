"""model.family=auto: any causal LM transformers knows, built from conf/model/<name>.yaml's
model_type and fields; its shape (layers, width, parameters) read from the built config, whatever
names the architecture gives its sizes."""

from __future__ import annotations

import pytest
from omegaconf import DictConfig, OmegaConf
from transformers import GPT2Config

from acco.config.experiments import compose
from acco.config.plain import plain
from acco.models.causal_lm import build_causal_lm, hf_config
from acco.models.dimensions import model_dims
from acco.train.memory import model_shape


def plain_view(cfg: dict) -> DictConfig:
    """The model section as build_causal_lm reads it (a DictConfig)."""
    return OmegaConf.create(plain(cfg["model"]))


def test_qwen2_tiny_is_built_by_the_auto_classes():
    cfg = compose(["model=qwen2_tiny"])
    config = hf_config(cfg["model"], vocab_size=384, eos_id=0)
    assert type(config).__name__ == "Qwen2Config" and config.vocab_size == 384 and config.eos_token_id == 0
    model = build_causal_lm(plain_view(cfg), vocab_size=384, eos_id=0, seed=3)
    again = build_causal_lm(plain_view(cfg), vocab_size=384, eos_id=0, seed=3)
    assert type(model).__name__ == "Qwen2ForCausalLM"
    assert all((a == b).all() for a, b in zip(model.state_dict().values(), again.state_dict().values()))


def test_the_shape_comes_from_the_built_model():
    cfg = compose(["model=qwen2_tiny", "data.tokenizer.vocab_size=384"])
    shape = model_shape(cfg)
    model = build_causal_lm(plain_view(cfg), vocab_size=384, eos_id=0)
    assert shape.params == sum(p.numel() for p in model.parameters())  # tied embeddings once
    assert (shape.layers, shape.hidden, shape.heads, shape.intermediate) == (2, 128, 4, 344)
    assert shape.gated_mlp and shape.vocab == 384
    neo = model_shape(compose(["model=gptneo_tiny", "data.tokenizer.vocab_size=384"]))
    assert not neo.gated_mlp and (neo.layers, neo.intermediate) == (2, 512)
    assert model_shape(compose(["model=llama_tiny", "data.tokenizer.vocab_size=384"])).gated_mlp


def test_sizes_under_any_architecture_s_names():
    dims = model_dims(GPT2Config(n_layer=3, n_embd=96, n_head=4, vocab_size=50))  # n_inner unset: 4h
    assert (dims.layers, dims.hidden, dims.heads, dims.intermediate, dims.vocab) == (3, 96, 4, 384, 50)


def test_an_unknown_model_type_names_the_types():
    with pytest.raises(ValueError, match="model.config.model_type='qwen' is not a causal LM .*qwen2"):
        hf_config({"family": "auto", "config": {"model_type": "qwen"}})
