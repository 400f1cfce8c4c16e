"""Per-worker slowdown factors: how much longer than its nominal time a worker's compute takes in
one round (one inner step for the local methods). Every factor is ≥ 0 and multiplies the
micro-batch time of that worker in that round.

    none        1 everywhere
    lognormal   exp(σZ − σ²/2), Z ~ N(0, 1) independent per worker and per round (mean 1): positively
                skewed noise from many multiplicative causes (queueing, clocks, memory, OS jitter)
    tail        1, except with probability p a round of a worker takes `factor`× longer: the rare slow
                events that a synchronous step amplifies with fan-out (N workers: P(some worker slow)
                = 1 − (1−p)^N)
    slow_node   the g GPUs of node 0 are `factor`× slower in every round (a persistent fail-slow)

Sources for these shapes:
  - J. Dean, L. A. Barroso, "The Tail at Scale", Communications of the ACM 56(2), 2013: rare slow
    events at one server become the common case of a request that waits for all of many servers.
  - J. Lin et al., "Understanding Stragglers in Large Model Training Using What-if Analysis",
    OSDI 2025 (arXiv:2505.05713): a five-month trace of ByteDance's LLM training cluster; stragglers
    are frequent, not only hardware failures, with temporal and spatial patterns; their method
    simulates the straggler-free run and contrasts it with the real one, as this simulator does.
  - T. Wu et al., "FALCON: Pinpointing and Mitigating Stragglers for Large-Scale Hybrid-Parallel
    Training", arXiv:2410.12588, 2024: fail-slows from CPU/GPU computation and cross-node networking,
    lasting from tens of seconds to nearly ten hours in a >10,000-GPU production cluster (the
    persistent slow node).
  - The log-normal as a model of skewed task times (a product of many independent multiplicative
    delays): J. Bayardo, "The effect of barriers on completion times" (blog post, julian.bayardo.info).
The parameters (σ, p, factor) are inputs, not fitted to those traces.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

KINDS = ("none", "lognormal", "tail", "slow_node")


@dataclass(frozen=True)
class Stragglers:
    kind: str = "none"
    sigma: float = 0.0  # lognormal
    p: float = 0.0  # tail: probability a worker's round is slow
    factor: float = 1.0  # tail and slow_node: how many times slower

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"unknown straggler kind {self.kind!r}: use one of {', '.join(KINDS)}")
        if self.sigma < 0 or not 0 <= self.p <= 1 or self.factor <= 0:
            raise ValueError(f"straggler parameters out of range: sigma={self.sigma} p={self.p} factor={self.factor}")

    def describe(self) -> str:
        return {
            "none": "no stragglers",
            "lognormal": f"log-normal per round, σ={self.sigma:g}",
            "tail": f"rare slow rounds: p={self.p:g}, {self.factor:g}x",
            "slow_node": f"one node {self.factor:g}x slower",
        }[self.kind]

    def factors(
        self, rng: np.random.Generator, rounds: int, batch: int, workers: int, gpus_per_node: int
    ) -> np.ndarray:
        """Slowdown factors of shape (rounds, batch, workers)."""
        shape = (rounds, batch, workers)
        if self.kind == "lognormal" and self.sigma > 0:
            return np.exp(self.sigma * rng.standard_normal(shape) - 0.5 * self.sigma**2)
        if self.kind == "tail" and self.p > 0:
            return np.where(rng.random(shape) < self.p, self.factor, 1.0)
        out = np.ones(shape)
        if self.kind == "slow_node":
            out[..., : min(gpus_per_node, workers)] = self.factor
        return out


def parse(text: str) -> Stragglers:
    """'none' | 'lognormal:0.1' | 'tail:0.01:3' | 'slow_node:2' (the CLI's --stragglers)."""
    parts = str(text).split(":")
    kind, args = parts[0], parts[1:]
    try:
        values = [float(a) for a in args]
    except ValueError:
        raise ValueError(f"bad --stragglers {text!r}: numbers after the kind, e.g. lognormal:0.1") from None
    need = {"none": 0, "lognormal": 1, "tail": 2, "slow_node": 1}
    if kind not in need:
        raise ValueError(
            f"unknown straggler kind {kind!r}: use none, lognormal:SIGMA, tail:P:FACTOR or slow_node:FACTOR"
        )
    if len(values) != need[kind]:
        raise ValueError(f"bad --stragglers {text!r}: none, lognormal:SIGMA, tail:P:FACTOR or slow_node:FACTOR")
    if kind == "lognormal":
        return Stragglers(kind, sigma=values[0])
    if kind == "tail":
        return Stragglers(kind, p=values[0], factor=values[1])
    if kind == "slow_node":
        return Stragglers(kind, factor=values[0])
    return Stragglers()
