"""The analysis package (figures and tables from a results folder), on small real runs copied into
tests/fixtures/results (config.yaml, metrics.csv, summary.json; trace.json for the fig4 runs and
one ACCO run). Plots are checked through their matplotlib objects, not pixels.

Here the tests that start processes (marked integration); the in-process ones are in
tests/unit/test_analysis.py."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest  # noqa: E402

from tests.helpers.paths import FIXTURE_RESULTS as FIXTURES
from tests.helpers.paths import ROOT


@pytest.mark.integration
def test_make_figures_cli_skips_gracefully(tmp_path):
    shutil.copytree(os.path.join(FIXTURES, "cpu", "fig6"), tmp_path / "cpu" / "fig6")
    proc = subprocess.run(
        [
            sys.executable,
            os.path.join(ROOT, "analysis", "make_figures.py"),
            str(tmp_path),
            "--only",
            "fig6,fig9,table2,table3",
            "--no-timelines",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert f"wrote {tmp_path}/cpu/fig6/figures/fig6.png" in proc.stdout
    for fid in ("fig9", "table2", "table3"):
        assert f"skipped {fid}" in proc.stdout
    assert not (tmp_path / "cpu" / "fig9").exists()
