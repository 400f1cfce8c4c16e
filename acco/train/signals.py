"""Checkpoint signals: a signal asks for a checkpoint and a clean exit, which happens at the next
step boundary that every rank agrees on (the trainer's `at_step_boundary`). Each rank's
signal travels as a vote in the step's own count all-reduce, so agreeing costs no barrier."""

from __future__ import annotations

import os
import signal
import threading

# the signals that ask for a checkpoint and a clean exit: sbatch --signal=USR1, submitit's USR2,
# SIGTERM (scancel, preemption, the local launcher forwarding its own)
CHECKPOINT_SIGNALS = (signal.SIGUSR1, signal.SIGUSR2, signal.SIGTERM)


class Preempted(Exception):
    """Raised on every rank after the checkpoint a signal asked for has been written."""

    def __init__(self, step: int, signum: int, path: str | None):
        super().__init__(f"{signal.Signals(signum).name} at step {step}; checkpoint {path}")
        self.step, self.signum, self.path = step, signum, path


class SignalLatch:
    """Remembers a checkpoint signal from the moment the worker starts (a signal during start-up
    must not kill it); the trainer acts on it at the next step boundary, on every rank."""

    signum = 0
    previous: dict = {}

    @classmethod
    def install(cls) -> None:
        if threading.current_thread() is not threading.main_thread() or cls.previous:
            return

        def note(signum, frame):
            cls.signum = cls.signum or signum

        for sig in CHECKPOINT_SIGNALS:
            cls.previous[sig] = signal.signal(sig, note)

    @classmethod
    def install_if_rank(cls, environ=None) -> None:
        """At the very start of the entry point, in a process that will be one rank of an srun step
        or of torchrun: Slurm sends its time-limit signal up to a minute early, and one that came
        while Python was still importing killed the rank (seen on the local cluster: "task 1: User
        defined signal 1", the job failed instead of requeued). Not in a launcher of our own (its
        own handlers forward the signals to its workers)."""
        environ = os.environ if environ is None else environ
        if "SLURM_STEP_ID" in environ or "TORCHELASTIC_RUN_ID" in environ:
            cls.install()

    @classmethod
    def votes(cls) -> list[float]:
        """This rank's vote for each checkpoint signal (1 for the one it got), sent with the counts."""
        return [float(cls.signum == sig) for sig in CHECKPOINT_SIGNALS]

    @staticmethod
    def agreed(vote_sums: tuple[float, ...]) -> int:
        """The signal every rank acts on: the highest one any rank got (0: none)."""
        return max((int(sig) for sig, n in zip(CHECKPOINT_SIGNALS, vote_sums) if n > 0), default=0)

    @classmethod
    def uninstall(cls) -> None:
        for sig, handler in cls.previous.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)

    @classmethod
    def previous_handler(cls, signum: int):
        """What the signal did before (submitit's handler requeues the job on USR2)."""
        return cls.previous.get(signum)
