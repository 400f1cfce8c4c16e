"""Starting and supervising a run: the entry point's work, the launchers, the per-rank main, the
watchdog, the run folder's lock and files, progress."""
