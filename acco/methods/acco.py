"""ACCO: two rounds per committed step, an estimate (a tentative step from the first half's
gradients) and a commit (the step from both halves'), each synced while the next round computes."""

from .spec import FLAT, MethodSpec

SPEC = MethodSpec(
    name="acco",
    label="ACCO",
    backend=FLAT,
    schedule="acco",
    sync_kinds=("estimate", "commit"),
    table1_row="acco",
    rounds_per_step=2,
    carries_gradients=True,
    overlapped=True,
    tentative_step=True,
    reference="acco",
)
