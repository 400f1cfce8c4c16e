"""A built Hugging Face config's sizes under one set of names, whatever the architecture calls them
(GPT-Neo `num_layers`, GPT-2 `n_layer`/`n_embd`/`n_inner`, Llama and most others
`num_hidden_layers`/`hidden_size`): the memory estimate and the dry run read a model's shape from
here, so a model of any family (model.family=auto) is sized from its own config."""

from __future__ import annotations

from dataclasses import dataclass

# the first attribute a config has, in this order (transformers' attribute_map makes the standard
# names work for most architectures; the others are the few that keep their own)
_LAYERS = ("num_hidden_layers", "num_layers", "n_layer", "n_layers")
_HIDDEN = ("hidden_size", "n_embd", "d_model")
_HEADS = ("num_attention_heads", "num_heads", "n_head")
_INTERMEDIATE = ("intermediate_size", "n_inner", "ffn_dim")


@dataclass(frozen=True)
class ModelDims:
    layers: int
    hidden: int
    heads: int
    intermediate: int  # the MLP's width (4·hidden where the config leaves it unset)
    vocab: int


def _first(config, names: tuple[str, ...]) -> int | None:
    for name in names:
        value = getattr(config, name, None)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def model_dims(config) -> ModelDims:
    """The sizes of `config` (a transformers PretrainedConfig); ValueError naming the missing one."""
    layers, hidden, heads = _first(config, _LAYERS), _first(config, _HIDDEN), _first(config, _HEADS)
    for value, names in ((layers, _LAYERS), (hidden, _HIDDEN), (heads, _HEADS)):
        if value is None:
            raise ValueError(f"{type(config).__name__} has none of {', '.join(names)}: its size cannot be read")
    assert layers is not None and hidden is not None and heads is not None
    intermediate = _first(config, _INTERMEDIATE) or 4 * hidden
    return ModelDims(layers, hidden, heads, intermediate, int(config.vocab_size))
