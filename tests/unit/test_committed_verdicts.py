"""No verdict in a committed generated document rests on a zero-width interval (issue 49): a
virtual-clock run has no noise of its own, so its seeds' interval can collapse to a point; such a gap
is a verdict only once widened by the clock's validated error, and has none outside its range."""

from __future__ import annotations

import csv
import os
import re

import pytest

from tests.helpers.paths import ROOT

COMMITTED = os.path.join(ROOT, "results", "cpu")
DECIDED = ("matches", "better", "worse")
# "[-13.0, -13.0]": an interval whose two ends print alike
POINT = re.compile(r"\[\s*(-?[\d.]+)\s*,\s*(-?[\d.]+)\s*\]")


def decided_on_a_point(row: str) -> bool:
    """A table row that prints a point interval and a decided verdict in one of its cells, unless the
    row says the point has no verdict (its cells may still name the verdict the paper expects)."""
    if "outside the validated range" in row:
        return False
    points = [m for m in POINT.finditer(row) if float(m.group(1)) == float(m.group(2))]
    cells = [c.strip().strip("*").strip() for c in row.split("|")]
    return bool(points) and any(c in DECIDED for c in cells)


def test_the_rule_catches_a_point_interval():
    assert decided_on_a_point("| fig7 | -13.0 % [-13.0, -13.0] (n = 3) | **better** |")
    assert not decided_on_a_point("| fig7 | -13.0 % [-18.1, -7.9] (n = 3), ±5.1 model error | **better** |")
    no_verdict = "| fig7 | -13.0 % [-13.0, -13.0] (n = 3) | better | **outside the validated range** |"
    assert not decided_on_a_point(no_verdict)


def test_claims_csv_decides_nothing_on_a_zero_width_interval():
    path = os.path.join(COMMITTED, "claims.csv")
    assert os.path.exists(path), "results/cpu/claims.csv missing: make figures writes it"
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    assert rows
    bad = [
        f"{r['experiment']}: {r['claim']}"
        for r in rows
        if r["verdict"] in DECIDED
        and not float(r["hi_pct"]) > float(r["lo_pct"])
        and not float(r["model_error_pct"] or 0) > 0
    ]
    assert not bad, bad


@pytest.mark.parametrize("name", ["REPORT.md", "claims.md", "details.md"])
def test_no_markdown_row_decides_on_a_point_interval(name):
    path = os.path.join(COMMITTED, name)
    assert os.path.exists(path), f"results/cpu/{name} missing: make figures writes it"
    with open(path) as f:
        rows = [line for line in f if line.startswith("|")]
    bad = [row[:160] for row in rows if decided_on_a_point(row)]
    assert not bad, bad
