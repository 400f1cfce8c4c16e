"""REPORT.md's first screen (analysis/headline.py, issue 49): one row per paper claim, its cells
reading experiment claims by name, a wall-clock cell against the fastest DDP measured for it, and
Holm's procedure over the table's verdicts."""

from __future__ import annotations

import os
from types import SimpleNamespace

import pandas as pd
import pytest

from acco.config.experiments import experiment_block
from analysis.claims import claims_of
from analysis.headline import KINDS, _ref, apply_holm, cell_status, decided_against, load_paper_claims, pick_test
from analysis.headline import Test as CellTest
from analysis.stats import Verdict
from tests.helpers.paths import ROOT


def test_every_paper_claim_names_claims_and_settings_that_exist():
    """A renamed experiment claim or simulated setting must fail here, not leave a cell empty."""
    rows = load_paper_claims()
    assert len({r["id"] for r in rows}) == len(rows) >= 20
    names: dict[str, set[str]] = {}
    published = pd.read_csv(os.path.join(ROOT, "results", "sim", "validation_published.csv"))
    settings = set(published["setting"].astype(str))
    for r in rows:
        for kind in KINDS:
            refs = r.get(kind) or []
            if kind not in r and kind not in (r.get("none") or {}):
                pytest.fail(f"{r['id']}: {kind} neither has evidence nor says why not")
            for ref in refs if isinstance(refs, list) else []:
                if isinstance(ref, dict):
                    continue  # a shape, a memory ratio or a comparison of rows: analysis/headline.py
                if kind == "simulated":
                    assert str(ref) in settings, (r["id"], ref)
                    continue
                exp, name = _ref(ref)
                if exp not in names:
                    names[exp] = {c.name for c in claims_of(experiment_block(exp, "cpu"), "cpu")}
                assert name in names[exp], (r["id"], ref)


def _pair(verdict, mean_b, question="wall-clock", metric="wall_time", expect=Verdict.BETTER):
    claim = SimpleNamespace(question=question, metric=metric, expect=expect)
    return claim, SimpleNamespace(claim=claim, verdict=verdict, mean_b=mean_b, p_value=0.01, look=None)


def test_a_wall_clock_cell_reads_the_twin_against_the_fastest_ddp():
    outcomes = {
        ("fig7", "ACCO is faster"): _pair(Verdict.BETTER, 100.0),  # the paper's DDP: 100 s
        ("fig7", "ACCO is faster (vs the overlapped DDP)"): _pair(Verdict.INCONCLUSIVE, 110.0),
        ("fig7", "ACCO is faster (vs PyTorch DDP)"): _pair(Verdict.WORSE, 90.0),  # fastest
    }
    t = pick_test("fig7", "ACCO is faster", outcomes)
    assert t.against == "PyTorch DDP" and t.outcome.verdict is Verdict.WORSE
    assert t.paper is outcomes[("fig7", "ACCO is faster")]  # shown beside it
    # a loss claim is read as named, whatever its twins
    loss = {
        ("fig5", "matches"): _pair(Verdict.MATCHES, 4.1, "dynamics", "final_loss", Verdict.MATCHES),
        ("fig5", "matches (vs PyTorch DDP)"): _pair(Verdict.MATCHES, 3.0, "dynamics", "final_loss"),
    }
    assert pick_test("fig5", "matches", loss).against == "the paper's DDP"
    with pytest.raises(KeyError, match="paper_claims.yaml"):
        pick_test("fig7", "no such claim", outcomes)


def test_holm_turns_a_verdict_the_family_cannot_keep_into_inconclusive():
    def test(p, verdict=Verdict.BETTER):
        claim, o = _pair(verdict, 1.0)
        o.p_value = p
        return CellTest("fig7", "x", (claim, o), "the paper's DDP")

    strong, weak = test(0.001), test(0.04)
    cell = SimpleNamespace(tests=[strong, weak], status=None)
    row = SimpleNamespace(cells={"measured": cell, "modelled": SimpleNamespace(tests=[], status="none")})
    apply_holm([row])  # sorted: 0.001 <= 0.05 / 2, then 0.04 <= 0.05 / 1: both kept
    assert strong.kept and weak.kept and cell.status is True
    weaker = test(0.049)
    cell.tests = [strong, weak, weaker, test(0.03)]  # 0.03 > 0.05 / 3: it and all above it dropped
    apply_holm([row])
    assert strong.kept and not weak.kept and not weaker.kept
    assert weak.verdict == "inconclusive (Holm)" and weak.reproduced is False and cell.status is False
    assert cell_status([test(1.0, Verdict.UNVALIDATED)]) == "outside the validated range"


def test_only_a_kept_opposite_verdict_counts_as_decided_against_the_paper():
    def test(verdict, kept=True):
        claim, o = _pair(verdict, 1.0)
        t = CellTest("fig7", "x", (claim, o), "the paper's DDP")
        t.kept = kept
        return t

    cell = SimpleNamespace(tests=[test(Verdict.INCONCLUSIVE), test(Verdict.BETTER)])
    assert not decided_against(cell)  # not reproduced (inconclusive), but nothing against the claim
    cell.tests.append(test(Verdict.WORSE, kept=False))  # Holm dropped it: inconclusive (Holm)
    assert not decided_against(cell)
    cell.tests.append(test(Verdict.WORSE))
    assert decided_against(cell)
