"""Table 1 of the paper: model-state memory per replica, bytes per parameter, as a function of K
(bytes of optimizer state per parameter; 12 for AdamW: fp32 master, m, v) and N (workers), with
bf16 parameters, gradients and buffers (2 bytes). The analysis's tables set them beside the paper's
numbers and the runs' measurements; acco/harness/simulation and acco/harness/bench use them for memory per GPU."""

from __future__ import annotations

# method: (bytes per parameter as a function of K and N, formula, what is counted)
TABLE1_FORMULAS = {
    "ddp": (lambda K, N: 2 + 2 + K, "(2 + 2 + K)Ψ", "bf16 params + bf16 grads + full AdamW state"),
    "zero1": (lambda K, N: 2 + 2 + K / N, "(2 + 2 + K/N)Ψ", "optimizer state sharded over N"),
    "zero2": (lambda K, N: 2 + (2 + K) / N, "(2 + (2 + K)/N)Ψ", "optimizer state and grads sharded"),
    "zero3": (lambda K, N: (2 + 2 + K) / N, "(2 + 2 + K)Ψ/N", "everything sharded"),
    "diloco": (lambda K, N: 2 + 2 + K + 4, "(2 + 2 + K + 4)Ψ", "unsharded inner AdamW + one fp32 outer vector"),
    "slowmo": (lambda K, N: 2 + 2 + K + 4, "(2 + 2 + K + 4)Ψ", "unsharded inner AdamW + one fp32 outer vector"),
    "co2": (lambda K, N: 2 + 2 + K + 8, "(2 + 2 + K + 8)Ψ", "unsharded inner AdamW + two fp32 outer vectors"),
    "dpu": (lambda K, N: 2 + 2 + 2 + K / N, "(2 + 2 + 2 + K/N)Ψ", "ZeRO-1 + one bf16 buffer"),
    "wp": (lambda K, N: 2 + 2 + 2 + K / N, "(2 + 2 + 2 + K/N)Ψ", "ZeRO-1 + one bf16 buffer"),
    "acco": (lambda K, N: 2 + 2 + 2 + K / N, "(2 + 2 + 2 + K/N)Ψ", "ZeRO-1 + one bf16 buffer"),
}
TABLE1_NAMES = {
    "ddp": "DDP",
    "zero1": "ZeRO-1",
    "zero2": "ZeRO-2",
    "zero3": "ZeRO-3",
    "diloco": "DiLoCo",
    "slowmo": "SlowMo",
    "co2": "CO2",
    "dpu": "DPU",
    "wp": "WP",
    "acco": "ACCO",
}
