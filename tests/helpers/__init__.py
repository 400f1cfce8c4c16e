"""What the tests share: the repository's paths, running the real entry point (runs.py), the skip
conditions (run_if.py), the gradient oracle, the local Slurm cluster, and the stand-ins that test
runs load by name (task=tests.helpers.oracle:..., a pickled tests.helpers.requeue_probe). Test files
import from here, never from conftest.py or from one another (tests/unit/test_test_imports.py).

Imports nothing: a Slurm job unpickles tests.helpers.requeue_probe without torch."""
