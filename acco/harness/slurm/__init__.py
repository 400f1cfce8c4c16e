"""Slurm: submitit dispatch, generated sbatch scripts, job status."""
