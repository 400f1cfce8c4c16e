"""Choosing the link rates: the communication/computation ratio of a point is set through the
link rate, from measurements of the sequential reference (our flat ZeRO-1 DDP, whose compute and
sync spans are separate in its trace): on an unlimited link (compute per round t_comp, fixed sync
cost t0) and at one reference rate R (sync t_R). A sync then takes t0 + S/rate with S = (t_R − t0)·R,
so the rate for ratio r is S / (r·t_comp − t0). Every point's actual ratio is measured again in the
grid and reported beside its target."""

from __future__ import annotations

from dataclasses import dataclass

MAX_RATE_MBIT = 20000.0


@dataclass
class Calibration:
    world: int
    t_comp_s: float  # compute per round (accum micro-batches)
    t0_s: float  # sync on the unlimited link
    ref_rate_mbit: float
    t_ref_s: float  # sync at the reference rate
    sent_mbit: float = 0.0  # what one rank sends per sync (ring reduce-scatter + all-gather)

    @property
    def link_work_mbit_s(self) -> float:
        """S: the sync's link-bound work, in Mbit (time x rate) — measured, but never below the
        bytes the sync sends (no link beats its rate; on a loaded machine the unlimited-link sync
        t0 is noisy and can eat most of t_R − t0)."""
        return max(1e-9, (self.t_ref_s - self.t0_s) * self.ref_rate_mbit, self.sent_mbit)

    def rate_for(self, ratio: float) -> float:
        """Link rate (Mbit/s) giving t_sync ≈ ratio · t_comp; 0 (unlimited) for ratio 0."""
        if ratio <= 0:
            return 0.0
        budget = ratio * self.t_comp_s - self.t0_s
        if budget <= 0:
            return MAX_RATE_MBIT  # the fixed cost alone exceeds the target: the fastest shaped link
        return float(min(MAX_RATE_MBIT, max(1.0, round(self.link_work_mbit_s / budget, 1))))

    def as_row(self) -> dict:
        return {
            "world": self.world,
            "t_comp_round_s": self.t_comp_s,
            "t_sync_unlimited_s": self.t0_s,
            "ref_rate_mbit": self.ref_rate_mbit,
            "t_sync_at_ref_s": self.t_ref_s,
            "sent_mbit_per_sync": self.sent_mbit,
            "link_work_mbit_s": self.link_work_mbit_s,
        }
