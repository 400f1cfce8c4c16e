"""`make bench`: the performance testbed's benchmark (experiments/bench.py is the entry point)."""
