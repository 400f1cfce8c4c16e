from .causal_lm import build_causal_lm

__all__ = ["build_causal_lm"]
