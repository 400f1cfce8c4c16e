"""acco/models: GPT-Neo's eager attention without its per-layer host sync (the GPU check's
finding of 2026-12-04) computes exactly what the library's own class computes."""

from __future__ import annotations

import copy

import torch
from transformers import GPTNeoConfig, GPTNeoForCausalLM
from transformers.models.gpt_neo.modeling_gpt_neo import GPTNeoSelfAttention

from acco.config.experiments import compose
from acco.config.schema import typed
from acco.models import build_causal_lm
from acco.models.gpt_neo_attention import GPTNeoSelfAttentionNoHostSync, without_host_syncs


def _tiny() -> GPTNeoForCausalLM:
    torch.manual_seed(0)
    config = GPTNeoConfig(
        vocab_size=97,
        hidden_size=32,
        num_layers=2,
        num_heads=4,
        intermediate_size=64,
        max_position_embeddings=24,
        attention_types=[[["global", "local"], 1]],
        window_size=5,  # the local layer masks more than the causal triangle
    )
    return GPTNeoForCausalLM(config)


def test_the_sync_free_attention_gives_the_librarys_outputs_and_gradients_bit_for_bit():
    library = _tiny()
    ours = copy.deepcopy(library)
    assert without_host_syncs(ours) == 2
    assert all(type(m) is not GPTNeoSelfAttention for m in ours.modules())
    ids = torch.randint(0, 97, (3, 20))
    mask = torch.ones_like(ids)
    mask[0, :4] = 0  # a padded row: the additive attention mask is used too
    results = []
    for model in (library, ours):
        out = model(input_ids=ids, attention_mask=mask, labels=ids)
        out.loss.backward()
        results.append((out.logits.detach(), [p.grad.clone() for p in model.parameters()]))
    (logits_a, grads_a), (logits_b, grads_b) = results
    assert torch.equal(logits_a, logits_b)
    assert all(torch.equal(a, b) for a, b in zip(grads_a, grads_b))
    assert library.state_dict().keys() == ours.state_dict().keys()


def test_built_gpt_neo_models_use_the_sync_free_attention():
    view = typed(compose(["model=gptneo_tiny"]))
    model = build_causal_lm(view.model, vocab_size=64, eos_id=0)
    kinds = {type(m) for m in model.modules() if isinstance(m, GPTNeoSelfAttention)}
    assert kinds == {GPTNeoSelfAttentionNoHostSync}
