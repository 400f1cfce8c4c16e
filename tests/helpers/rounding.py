"""Equal up to rounding: how the tests compare a distributed run's parameters with the reference's."""

from __future__ import annotations


def rounding_mismatch(actual, expected, rtol: float = 1e-4, atol: float = 2e-6, bound: float = 2e-5) -> str | None:
    """Why two parameter vectors are not equal up to rounding, or None when they are. A different
    summation order changes a gradient in its last bits; a few steps of AdamW can turn that into an
    update-sized difference in the odd element whose second moment is tiny (seen: 1 element of
    126,336 off by 3e-6). So: every element within `bound` (1 % of a 2e-3 step), and at most 1 in
    10,000 outside rtol/atol. Different update rules miss both by far."""
    diff = (actual - expected).abs()
    outside = diff > atol + rtol * expected.abs()
    if float(diff.max()) > bound:
        return f"largest difference {float(diff.max()):.3g} > {bound:g}"
    if int(outside.sum()) > max(1, actual.numel() // 10_000):
        return f"{int(outside.sum())} of {actual.numel()} elements outside rtol={rtol:g}, atol={atol:g}"
    return None
