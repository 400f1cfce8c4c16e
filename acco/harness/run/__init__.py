"""A run from above its ranks: up-front validation (every layer's checks), the preflight (memory,
data), the per-rank main (worker), supervision of the workers, the disk estimate, the dry-run plan.
The front door that uses them is acco.harness.entry; what a running rank writes is acco.runtime."""
