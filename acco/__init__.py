"""acco: ACCO (Accumulate While You Communicate) and its baselines on one sharded AdamW."""

__version__ = "0.1.0"
