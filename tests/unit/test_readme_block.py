"""README.md's results block is generated (analysis/readme_block.py), never typed: it equals what the
committed report's headline gives, and its counts are the report's abstract's."""

from __future__ import annotations

import json
import os

import pytest

from analysis.readme_block import END, START, block, replaced

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HEADLINE = os.path.join(ROOT, "results", "cpu", "headline.json")


def _headline() -> dict:
    with open(HEADLINE) as f:
        return json.load(f)


def test_the_readme_block_is_what_the_committed_headline_gives():
    with open(os.path.join(ROOT, "README.md")) as f:
        readme = f.read()
    assert replaced(readme, block(_headline())) == readme, "README.md's results block is out of date: make readme"
    assert os.path.exists(os.path.join(ROOT, "results", "cpu", "figures", "claims.png"))


def test_the_headline_counts_are_the_reports_abstracts():
    """headline.json and REPORT.md come from one `make figures`: the abstract states the same counts."""
    head = _headline()
    with open(os.path.join(ROOT, "results", "cpu", "REPORT.md")) as f:
        abstract = " ".join(f.read().split("## ")[0].split())
    m = head["measured"]
    assert f"tests the {head['claims']} claims" in abstract
    assert f"speaks to {m['spoke']}: {len(m['reproduced'])} reproduced" in abstract
    assert "Measured and reproduced: " + ", ".join(m["reproduced"]) in abstract
    assert "decided against the paper: " + ", ".join(m["against"]) in abstract


def test_a_changed_count_changes_the_block_and_a_readme_without_markers_is_refused():
    head = _headline()
    more = json.loads(json.dumps(head))
    more["measured"]["reproduced"].append("fig99")
    assert block(more) != block(head) and f"{len(head['measured']['reproduced']) + 1} reproduced" in block(more)
    with pytest.raises(ValueError, match="no results block"):
        replaced("# a README\n", block(head))
    assert replaced(f"a\n{START}\nold\n{END}\nb\n", "NEW") == "a\nNEW\nb\n"
