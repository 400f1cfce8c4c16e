"""Tests that start processes: experiments/train.py and the other entry points, worker processes,
network namespaces (marked integration)."""
