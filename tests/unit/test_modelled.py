"""How far a modelled time is trusted (analysis/modelled.py, issue 49): the virtual clock's validated
error on a ratio of two methods' times, read from its validation rows, and the range it covers; a
virtual-clock claim inside it is widened by that error, one outside it gets no verdict."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pandas as pd
import pytest

from analysis.modelled import modelled_check, read_validity


def _validation(path, acco_error=(0.0, 0.0, 0.0), ratio=3.0):
    """Rows as experiments/calibrate_clock.py --validate writes them, at one link, 3 repetitions:
    DDP modelled exactly; ACCO's modelled time off its measured one by `acco_error` per repetition."""
    rows = []
    for rep, err in enumerate(acco_error):
        rows.append(
            {"method": "ddp", "rate_mbit": 100, "rep": rep, "real_s": 0.30, "virtual_cal_s": 0.30, "ratio_own": ratio}
        )
        rows.append(
            {
                "method": "acco",
                "rate_mbit": 100,
                "rep": rep,
                "real_s": 0.36,
                "virtual_cal_s": 0.36 * (1 + err),
                "ratio_own": ratio + 0.1 * rep,
            }
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def _run(folder, method="acco", world=2, hetero="none", sync_s=0.18, micro_batch_s=0.06, deterministic=True):
    folder.mkdir(parents=True, exist_ok=True)
    return SimpleNamespace(
        path=str(folder),
        info={"method": method, "world_size": world, "hetero": hetero, "deterministic": deterministic},
        config={"clock": {"mode": "virtual", "sync_s": sync_s, "micro_batch_s": micro_batch_s}},
    )


def test_the_validated_error_is_the_widest_end_of_the_ratio_errors_interval(tmp_path):
    v = read_validity(str(_validation(tmp_path / "clock" / "validation.csv", (0.02, 0.04, 0.06))))
    assert v is not None and v.worlds == {2}
    err = v.error_pct("acco", "ddp")
    # per-repetition errors +2, +4, +6 %: mean 4, sd 2, t(0.975, 2) = 4.303 -> upper end 4 + 4.97
    assert err == pytest.approx(4 + 4.3027 * 2 / math.sqrt(3), rel=1e-3)
    assert v.ratio_range == pytest.approx((3.0, 3.2))
    assert v.error_pct("acco_adaptive", "ddp") is None  # not validated: no number made up


def test_a_modelled_claim_inside_the_range_gets_the_error_outside_it_no_verdict(tmp_path):
    root = tmp_path / "results" / "cpu"
    _validation(root / "clock" / "validation.csv", (0.01, 0.03, 0.02))
    a = _run(root / "fig8" / "acco_seed=0")
    b = _run(root / "fig8" / "ddp_seed=0", method="ddp")
    err, why = modelled_check([a], [b])
    assert why == "" and err > 0
    cases = {
        "4 ranks": _run(root / "fig7" / "acco_seed=0", world=4),
        "heterogeneous": _run(root / "fig9" / "acco_seed=0", hetero="one_slow"),
        "comm/compute 0.033": _run(root / "fig11" / "acco_seed=0", sync_s=0.005, micro_batch_s=0.15),
        "no validation of acco_adaptive": _run(root / "fig8" / "acco_adaptive", deterministic=False),
    }
    for words, run in cases.items():
        err, why = modelled_check([run], [b])
        assert math.isnan(err) and why.startswith("outside the clock's validated range") and words in why, why


def test_without_validation_rows_a_modelled_claim_has_no_verdict(tmp_path):
    a = _run(tmp_path / "results" / "cpu" / "fig8" / "acco_seed=0")
    b = _run(tmp_path / "results" / "cpu" / "fig8" / "ddp_seed=0", method="ddp")
    err, why = modelled_check([a], [b])
    assert math.isnan(err) and "no validation runs" in why


def test_beyond_diloco_virtual_gaps_are_widened_where_validated_and_undecided_elsewhere(tmp_path, monkeypatch):
    from analysis import beyond_diloco as bd
    from analysis.clock_report import modelled_verdicts
    from analysis.stats import Verdict, interval

    v = read_validity(str(_validation(tmp_path / "clock" / "validation.csv", (0.01, 0.03, 0.02))))
    err = v.error_pct("acco", "ddp")

    def run(rate, sync):
        r = _run(tmp_path / f"acco_{rate}", sync_s=None, micro_batch_s=0.06)
        r.info.update({"rate": rate, "layout": "1x2"})
        r.summary = SimpleNamespace(clock={"sync_s": {"estimate": sync, "commit": sync}})
        return r

    runs = [run(25.0, 0.18), run(400.0, 0.01)]  # comm/compute 3.0 (validated) and 0.17 (not)
    tight = interval({s: -20.0 + 0.1 * s for s in range(5)})  # better on its own
    rows = [
        {
            "rate_mbit": rate,
            "layout": "1x2",
            "methods": {
                "ACCO": {"gap": tight, "verdict": Verdict.BETTER},
                "DiLoCo H=8": {"gap": tight, "verdict": Verdict.BETTER},
            },
        }
        for rate in (25.0, 400.0)
    ]
    monkeypatch.setattr(bd, "link_key", lambda r: (r.info["rate"], r.info["layout"]))  # fake runs' links
    modelled_verdicts(rows, runs, v)
    validated = rows[0]["methods"]["ACCO"]
    assert validated["gap"].lo_pct == pytest.approx(tight.lo_pct - err) and validated["verdict"] is Verdict.BETTER
    assert rows[0]["methods"]["DiLoCo H=8"]["verdict"] is Verdict.UNVALIDATED  # never validated
    assert rows[1]["methods"]["ACCO"]["verdict"] is Verdict.UNVALIDATED  # a ratio outside the range
