"""REPORT.md: numbers computed from the runs and verdicts following the stated rules; and the
committed CPU-scale reproduction (results/cpu) regenerates with `make figures`.

Here the tests that start processes (marked integration); the in-process ones are in
tests/unit/test_report.py."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest

from tests.helpers.paths import FIXTURE_RESULTS as FIXTURES
from tests.helpers.paths import ROOT

COMMITTED = os.path.join(ROOT, "results", "cpu")


@pytest.mark.integration
def test_report_from_fixture_runs_has_every_section(tmp_path):
    results = tmp_path / "results"
    shutil.copytree(FIXTURES, results)
    proc = subprocess.run(
        [sys.executable, os.path.join(ROOT, "analysis", "report.py"), str(results)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    folder = results / "cpu"
    front = (folder / "REPORT.md").read_text()
    # the first screen (issue 49): the one-row-per-paper-claim table near the top, the picture of
    # every claim against its margin under it (issue 41), drawn beside the report, and the way on
    lines = front.splitlines()
    assert len(lines) <= 250, len(lines)
    assert "## The paper's claims" in "\n".join(lines[:60])
    assert "| Fig. 7, Tab. 3 |" in "\n".join(lines[:60])
    assert "![every claim against its margin](figures/claims.png)" in front
    assert (folder / "figures" / "claims.png").stat().st_size > 10_000
    assert "[claims.md](claims.md)" in front and "[details.md](details.md)" in front
    details = (folder / "details.md").read_text()
    for title in (
        "Fig. 4",
        "Fig. 5",
        "Fig. 6",
        "Fig. 7",
        "Fig. 8",
        "Fig. 9",
        "Fig. 10",
        "Fig. 11",
        "Table 1",
        "Table 2",
        "Table 3",
    ):
        assert f"## {title} " in details
    # every anchor the front page links to is in details.md
    for anchor in re.findall(r"\(details\.md#([\w-]+)\)", front):
        assert f'<a id="{anchor}"></a>' in details, anchor
    # the fixtures hold runs for every paper figure; the lr sweep's section is tested on its own
    # runs (tests/unit/test_stats.py) and says plainly that there are none here
    paper, _, beyond = details.partition("## Beyond the paper")
    assert "Not reproduced here" not in paper
    assert "Not reproduced here: no usable runs" in beyond
    assert "9/10 equal after rounding" in details  # Table 1 formulas vs the paper (ZeRO-2: 16.64 vs 16)
    claims = (folder / "claims.md").read_text()
    assert "**The rule.**" in claims and "| figure | question |" in claims
    assert (folder / "claims.csv").read_text().startswith("experiment,question,claim,")


@pytest.mark.integration
def test_make_figures_regenerates_the_committed_cpu_reproduction(tmp_path):
    """The committed results/cpu (small files only) is enough for every figure, table and the report."""
    assert os.path.isdir(COMMITTED), "results/cpu (the committed CPU-scale reproduction) is missing"
    dst = tmp_path / "results"
    shutil.copytree(
        COMMITTED,
        dst / "cpu",
        ignore=shutil.ignore_patterns("figures", "tables", "REPORT.md", "claims.md", "claims.csv", "details.md"),
    )
    shutil.copytree(os.path.join(os.path.dirname(COMMITTED), "sim"), dst / "sim")  # the simulator's section
    shutil.copytree(os.path.join(os.path.dirname(COMMITTED), "bench"), dst / "bench")  # the bench beside fig7
    # runs of other settings beside the experiment's own (a sweep made before sweeps had folders of
    # their own, or put there by hand): left out, the report unchanged (issue 41)
    for exp, run, extra in (
        ("fig5", "ddp_seed=0", "ddp_train.steps=20"),
        ("fig8", "acco_layout=1x2_link.rate_mbit=2000_seed=0", "acco"),
    ):
        shutil.copytree(dst / "cpu" / exp / run, dst / "cpu" / exp / extra)
    proc = subprocess.run(
        [
            sys.executable,
            os.path.join(ROOT, "analysis", "make_figures.py"),
            str(dst),
            "--scale",
            "cpu",
            "--no-timelines",
        ],
        capture_output=True,
        text=True,
        timeout=1200,  # a guard against a hang: ~1 min of CPU, minutes on a loaded machine
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "1 run(s) not in the experiment's run list left out (ddp_train.steps=20)" in proc.stderr
    assert not [line for line in proc.stdout.splitlines() if line.startswith("skipped")], proc.stdout
    assert ", 0 skipped, 0 errors" in proc.stdout
    for fid in ("fig4", "fig5", "fig6", "fig7", "fig8", "fig9", "fig10", "fig11"):
        assert (dst / "cpu" / fid / "figures" / f"{fid}.png").stat().st_size > 1000
    for t in ("table1", "table2", "table3"):
        assert (dst / "cpu" / "tables" / f"{t}.md").exists()
    report = (dst / "cpu" / "REPORT.md").read_text() + (dst / "cpu" / "details.md").read_text()
    assert "Not reproduced here" not in report
    # the committed documents are the ones these results give (nobody edited numbers by hand); the
    # line naming the code's commit differs from checkout to checkout
    strip = lambda t: [line for line in t.splitlines() if not line.startswith("Generated by")]  # noqa: E731
    for name in ("REPORT.md", "claims.md", "claims.csv", "details.md"):
        made = (dst / "cpu" / name).read_text()
        committed = open(os.path.join(COMMITTED, name)).read()
        assert strip(made) == strip(committed), name
