"""acco: ACCO (Accumulate While You Communicate) and its baselines on one sharded AdamW.

`acco.Overlapped` runs any of the methods in one's own training loop. It is imported
on first use: `import acco` itself imports nothing (acco.harness.bench is read with only a bare Python)."""

__version__ = "0.1.0"

__all__ = ["METHODS", "Overlapped", "__version__"]


def __getattr__(name: str):
    if name in ("Overlapped", "METHODS"):
        from . import api

        return getattr(api, name)
    raise AttributeError(f"module 'acco' has no attribute {name!r}")
