"""One rank's training: the trainer, its budget and precision, checkpoints, and what the ranks do
after the last step."""
