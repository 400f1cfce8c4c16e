"""A stand-in for the round engine that a schedule of rounds drives (tests of the registry and of
methods defined elsewhere)."""

from acco.engine.sync import SyncKind


class RecordingEngine:
    """Stands in for acco/engine/rounds.py's RoundEngine: counts the rounds of compute and records
    the kinds of sync the schedule launches."""

    def __init__(self):
        self.rounds = 0
        self.kinds: set[str] = set()

    def prologue(self, label: str = "") -> None:
        pass  # the first round's compute, before step 0: not a step's

    def sequential_round(self):
        self.rounds += 1
        self.kinds.add(SyncKind.COMMIT.value)

    def overlapped_round(self, kind: SyncKind, label: str):
        self.rounds += 1
        self.kinds.add(kind.value)

    accumulating_round = overlapped_round

    def communicate_only(self, kind: SyncKind):
        self.kinds.add(kind.value)
