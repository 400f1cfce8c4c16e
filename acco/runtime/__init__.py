"""What a running rank uses and writes, below the trainer (the library's; acco.Overlapped's too): the
run folder's files (metrics, summary, failures), the progress bar and log, the step watchdog, the
training process group's settings, a write that finds the disk full. The harness above
(acco/harness/) starts, drives and checks runs."""
