"""Model sizes for the simulator: parameter counts from the architectures' shapes, FLOPs per token.

Parameter counts (Ψ) from the shapes, not quoted totals:
    GPT-Neo (tied embeddings, learned positions, biases):  V·h + p·h + L·(12h² + 13h) + 2h
    Llama-2 (untied embeddings, RMSNorm, SwiGLU, GQA):      2·V·h + L·(2h² + 2·h·h_kv + 3·h·i + 2h) + h
which give 125.2M, 1.32B, 2.65B (GPT-Neo 125M, 1.3B, 2.7B) and 6.74B, 13.0B, 69.0B (Llama-2 7B,
13B, 70B) — the published sizes. Compute per micro-batch is 6·Ψ·tokens FLOPs (forward + backward,
the attention's s² term left out, as in Kaplan et al.'s C ≈ 6ND) at a stated MFU of the GPU's
peak. Default micro-batches: GPT-Neo 125M 24×1024 tokens (the paper's fig7), 2.7B 4×2048, the
Llama models 1×4096 (the paper's fig4). Llama 3.1 8B (8.03B, 128k vocabulary, 2×8192 tokens per
micro-batch) is torchtitan's published benchmark model (the validation's throughput rows).

One's own model (`custom`): its parameter count, layers and tokens per micro-batch are inputs; a
measured step time can replace the FLOPs (sweep.Scenario.step_time_s). A micro-batch's time splits
into forward and backward as the FLOPs do (2·Ψ and 4·Ψ per token: FORWARD_SHARE = 1/3, Kaplan et al.
2020's count); what overlaps layer by layer (FSDP's prefetch, layer-wise fragments) uses `layers`.
"""

from __future__ import annotations

from dataclasses import dataclass

from acco.analytic.overlap import BACKWARD_SHARE

# of a micro-batch's forward + backward FLOPs (2Ψ of 6Ψ per token): the backward overlap rule's
# share, the other way round (one split of a micro-batch for the simulator and the virtual clock)
FORWARD_SHARE = 1.0 - BACKWARD_SHARE


@dataclass(frozen=True)
class ModelSpec:
    name: str
    family: str  # gptneo | llama
    hidden: int
    layers: int
    vocab: int
    intermediate: int = 0  # llama's SwiGLU width (GPT-Neo: 4h)
    kv_hidden: int = 0  # llama's key/value width (grouped-query attention); 0: = hidden
    positions: int = 2048  # GPT-Neo's learned position embeddings
    micro_batch: int = 1  # sequences per micro-batch (default for this size)
    seq_len: int = 2048
    param_count: float = 0.0  # a custom model's Ψ (0: from the shapes)

    @property
    def params(self) -> float:
        if self.param_count:
            return float(self.param_count)
        h, L, V = self.hidden, self.layers, self.vocab
        if self.family == "gptneo":
            return V * h + self.positions * h + L * (12 * h * h + 13 * h) + 2 * h
        kv = self.kv_hidden or h
        return 2 * V * h + L * (2 * h * h + 2 * h * kv + 3 * h * self.intermediate + 2 * h) + h

    @property
    def tokens(self) -> int:
        """Tokens per micro-batch."""
        return self.micro_batch * self.seq_len

    def flops_per_micro_batch(self, tokens: int | None = None) -> float:
        return 6.0 * self.params * (self.tokens if tokens is None else tokens)


MODELS = {
    "125m": ModelSpec("GPT-Neo 125M", "gptneo", 768, 12, 50257, micro_batch=24, seq_len=1024),
    "1.3b": ModelSpec("GPT-Neo 1.3B", "gptneo", 2048, 24, 50257, micro_batch=8, seq_len=2048),
    "2.7b": ModelSpec("GPT-Neo 2.7B", "gptneo", 2560, 32, 50257, micro_batch=4, seq_len=2048),
    "7b": ModelSpec("Llama-2 7B", "llama", 4096, 32, 32000, 11008, micro_batch=1, seq_len=4096),
    "13b": ModelSpec("Llama-2 13B", "llama", 5120, 40, 32000, 13824, micro_batch=1, seq_len=4096),
    "70b": ModelSpec("Llama-2 70B", "llama", 8192, 80, 32000, 28672, kv_hidden=1024, micro_batch=1, seq_len=4096),
    "llama3-8b": ModelSpec(
        "Llama 3.1 8B", "llama", 4096, 32, 128256, 14336, kv_hidden=1024, micro_batch=2, seq_len=8192
    ),
}


def custom(params: float, layers: int, micro_batch: int = 1, seq_len: int = 2048, name: str = "") -> ModelSpec:
    """A model given by its parameter count and layers (and tokens per micro-batch)."""
    if params <= 0 or layers < 1:
        raise ValueError(f"a custom model needs params > 0 and layers >= 1 (got {params:g}, {layers})")
    return ModelSpec(
        name or f"custom {params / 1e9:.3g}B",
        "custom",
        0,
        int(layers),
        0,
        micro_batch=int(micro_batch),
        seq_len=int(seq_len),
        param_count=float(params),
    )


def model(name: str) -> ModelSpec:
    key = str(name).lower()
    if key not in MODELS:
        raise ValueError(f"unknown model {name!r}: use one of {', '.join(MODELS)}")
    return MODELS[key]
