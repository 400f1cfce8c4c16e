"""Tests on the real local Slurm cluster of slurm/local-cluster/ (the cluster fixture), all on one
pytest-xdist worker, in order (xdist_group("slurm"))."""
