"""Models and references that need no training run: the single-process reference of each method,
the ACCO theory check, the cost model, memory estimates and the dry-run plan."""
