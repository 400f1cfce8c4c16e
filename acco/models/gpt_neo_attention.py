"""GPT-Neo's eager attention without its host sync.

transformers' `GPTNeoSelfAttention._attn` builds the causal mask's fill value with
`torch.tensor(mask_value, device=attn_weights.device)` in every layer's forward: on a GPU that is a
blocking copy from pageable host memory, so the host waits for the compute stream to drain once per
layer per forward, for every method (the GPU check's host-sync part found 2 per micro-batch on a
2-layer model, 2026-12-04). `masked_fill` with a Python scalar selects the same values (and its
backward the same gradients) with no copy from the host. The rest of `_attn` is the library's
(transformers 5.17 and 5.24 alike); tests/unit/test_models.py checks outputs and gradients bit for bit
against the library's own class."""

from __future__ import annotations

import torch
from torch import nn
from transformers.models.gpt_neo.modeling_gpt_neo import GPTNeoSelfAttention


class GPTNeoSelfAttentionNoHostSync(GPTNeoSelfAttention):
    def _attn(self, query, key, value, attention_mask=None):
        # as the library: the attention weights in fp32 to avoid overflow
        query = query.to(torch.float32)
        key = key.to(torch.float32)
        attn_weights = torch.matmul(query, key.transpose(-1, -2))
        query_length, key_length = query.size(-2), key.size(-2)
        causal_mask = self.bias[:, :, key_length - query_length : key_length, :key_length]
        # the one change: a scalar fill (a kernel argument), not a tensor copied from the host
        attn_weights = attn_weights.masked_fill(~causal_mask, torch.finfo(attn_weights.dtype).min)
        if attention_mask is not None:
            attn_weights = attn_weights + attention_mask
        attn_weights = nn.functional.softmax(attn_weights, dim=-1)
        attn_weights = attn_weights.to(value.dtype)
        attn_weights = self.attn_dropout(attn_weights)
        attn_output = torch.matmul(attn_weights, value)
        return attn_output, attn_weights


def without_host_syncs(model: nn.Module) -> int:
    """Every eager GPT-Neo self-attention of `model` (the library's class itself, not the flash
    variant) made a GPTNeoSelfAttentionNoHostSync in place: same parameters, buffers and state
    dict. Returns how many were changed."""
    changed = 0
    for module in model.modules():
        if type(module) is GPTNeoSelfAttention:
            module.__class__ = GPTNeoSelfAttentionNoHostSync
            changed += 1
    return changed
