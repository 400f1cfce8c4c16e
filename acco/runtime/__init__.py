"""What a running rank and its launcher use, below the trainer: the run folder's files (metrics,
summary, failures), its lock, the progress bar and log, the step watchdog, the process group's
set-up, a write that finds the disk full. acco/harness/run/ (above train/) starts, drives and checks runs."""
