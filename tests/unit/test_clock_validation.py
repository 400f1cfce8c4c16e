"""The virtual clock's calibration and report (issue 31): the spreads' and the Table-3-implied
ratio's arithmetic, the modelled reductions, the readings at equal samples and equal time on small
synthetic runs, the section generator, and the calibration command's bad input (exit 2)."""

from __future__ import annotations

import json
import math
import os

import pytest

from acco.harness.clock_calibration import calibrate as cal
from acco.harness.clock_calibration import validate_clock as val
from acco.runtime.summary import RunSummary
from analysis import clock_report as cr
from analysis.claims import Claim
from analysis.load import Run
from analysis.stats import Verdict
from tests.helpers.paths import ROOT


# -- calibration arithmetic -----------------------------------------------------------------------------
def test_spread_median_quartiles_and_n():
    sp = cal.spread([5.0, 1.0, 4.0, 2.0, 3.0])
    assert (sp["median"], sp["q1"], sp["q3"], sp["iqr"], sp["n"]) == (3.0, 2.0, 4.0, 2.0, 5)
    assert cal.spread([])["n"] == 0 and cal.spread([])["median"] is None
    one = cal.spread([0.2])
    assert one["median"] == 0.2 and one["iqr"] is None and one["n"] == 1


def test_table3_implied_ratio_inverts_the_ddp_step_model():
    # a row whose DDP step is c (2 + r) against a reference's c_ref (2 + r_ref), c = k c_ref
    for r_ref, r, k in ((0.0, 8.5, 1.0), (0.07, 1.6, 1.0), (0.3, 0.5, 2.5)):
        t_ref, t = 100.0 * (2 + r_ref), 100.0 * k * (2 + r)
        assert cal.table3_implied_ratio(t, t_ref, r_ref, k) == pytest.approx(r)
    # the issue's numbers: Table 3's DDP times 13560 s (2x4) and 2580 s (1x8), equal per-GPU compute
    assert cal.table3_implied_ratio(13560, 2580, 0.0) == pytest.approx(8.51, abs=0.01)
    assert cal.table3_implied_ratio(2580, 2580, 0.07) == pytest.approx(0.07)  # same time: same ratio


def test_overlap_only_ratios_give_the_reduction_and_none_beyond_the_cap():
    def reduction(r):
        return 1 - 2 * max(1.0, r) / (2 + r)

    for target in (0.06, 0.25, 1 / 3):
        roots = cal.overlap_only_ratios(target)
        assert roots and all(reduction(r) == pytest.approx(target, abs=1e-5) for r in roots)
    assert len(cal.overlap_only_ratios(0.06)) == 2  # one below r = 1, one above
    assert cal.overlap_only_ratios(0.42) == [] and cal.overlap_only_ratios(0.87) == []


def test_paper_presets_show_the_table3_implied_ratio_beside_the_cost_models():
    rows = {p["row"]: p for p in cal.paper_presets()}
    two = rows["2.7B fine-tuning, 2x4"]
    assert two["costmodel_ratio"] == pytest.approx(1.6, abs=0.05)
    assert two["implied_ratio_ref0"] == pytest.approx(13560 / 2580 * 2 - 2)
    assert two["implied_ratio"] > two["implied_ratio_ref0"]  # the reference's own sync adds to it
    assert rows["2.7B fine-tuning, 1x8"]["implied_ratio"] is None  # the reference row
    assert two["overlap_only_ratios"] == []  # 87 % is beyond what overlap alone can give
    for p in rows.values():  # the presets the virtual clock can run with
        assert p["micro_batch_s"] * p["accum_acco"] == pytest.approx(p["compute_per_round_s"])
        assert p["per_gpu_flops"] == pytest.approx(p["peak_flops"] * p["mfu_assumed"])


def test_span_seconds_reads_micro_batches_syncs_and_optimizer_steps(tmp_path):
    def span(name, cat, dur_ms, step):
        return {
            "name": name,
            "ph": "X",
            "pid": 0,
            "tid": 0,
            "ts": 0,
            "dur": dur_ms * 1e3,
            "cat": cat,
            "args": {"step": step},
        }

    events = [span("fwd+bwd", "compute", 500, 1)]  # the first step: left out
    for step in (2, 3):
        events += [span("fwd+bwd", "compute", 100, step), span("fwd+bwd", "compute", 120, step)]
        events += [span("sync (commit)", "communication", 60, step), span("adamw (commit)", "communication", 5, step)]
        events += [span("reduce_scatter", "communication", 20, step), span("wait for sync", "idle", 60, step)]
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({"traceEvents": events}))
    secs = cal.span_seconds(str(path))
    assert sorted(secs["micro_batch"]) == pytest.approx([0.1, 0.1, 0.12, 0.12])
    assert secs["sync"] == pytest.approx([0.06, 0.06]) and secs["optimizer_step"] == pytest.approx([0.005, 0.005])
    costs = val.costs_from_spans(secs)  # the sync's communication is its span less the optimizer step
    assert (costs.micro_batch_s, costs.sync_s, costs.optimizer_step_s) == pytest.approx((0.11, 0.055, 0.005))


# -- modelled reductions ---------------------------------------------------------------------------------
def test_modelled_reductions():
    assert cr.overlap_only_reduction(1.0) == pytest.approx(1 / 3)  # the cap in the paper's pairing
    assert cr.overlap_only_reduction(0.0) == 0.0
    assert cr.overlap_only_reduction(8.5) < 0  # deterministic ACCO is slower than DDP there
    # adaptive at equal samples: every micro-batch costs its own time, DDP's (2 + r)/2 of one
    assert cr.adaptive_equal_samples_reduction(8.5, 2) == pytest.approx(1 - 2 / 10.5)
    # below r = 1 no micro-batch is added: overlap alone
    assert cr.adaptive_equal_samples_reduction(0.07, 2) == pytest.approx(cr.overlap_only_reduction(0.07))
    # r = 1.6, a = 2: rounds of 4 micro-batches (one more while the sync runs), 4 micro-batches long
    assert cr.adaptive_equal_samples_reduction(1.6, 2) == pytest.approx(1 - 1 / 1.8)


# -- readings on synthetic runs ----------------------------------------------------------------------------
def make_run(root, name: str, method: str, seed: int, rows: list[tuple], deterministic=True, sync_s=0.5) -> Run:
    """A virtual-clock fig8 run: rows of (step, samples, wall_time_s, train_loss, eval_loss)."""
    path = os.path.join(root, name)
    os.makedirs(path)
    with open(os.path.join(path, "metrics.csv"), "w") as f:
        f.write("step,samples,tokens,wall_time_s,train_loss,lr,micro_batches,eval_loss,grad_norm\n")
        for step, samples, t, loss, ev in rows:
            f.write(f"{step},{samples},{samples * 10},{t},{loss},0.001,4,{ev},\n")
    cfg = {
        "method": {"name": method},
        "seed": seed,
        "layout": "2x1",
        "world_size": 2,
        "train": {"accum": 2, "deterministic": deterministic, "steps": None},
        "clock": {"mode": "virtual", "sync_s": sync_s},
    }
    summary = {"method": method, "world_size": 2, "status": "completed", "samples": rows[-1][1]}
    return Run(path, "fig8", "cpu", name, cfg, RunSummary.from_json(summary))


def test_equal_samples_and_equal_time_readings(tmp_path):
    # A reaches the same losses as B per sample, in half the time; B runs longer (more samples)
    a = make_run(tmp_path, "a", "acco", 0, [(1, 100, 1.0, 4.0, 4.0), (2, 200, 2.0, 3.0, 3.0)])
    b = make_run(tmp_path, "b", "ddp", 0, [(1, 100, 2.0, 4.0, 4.0), (2, 200, 4.0, 3.0, 3.0), (3, 300, 6.0, 2.0, 2.0)])
    va, vb = cr.at_equal({0: a}, {0: b}, "eval_loss", "samples")
    assert (va[0], vb[0]) == (3.0, 3.0)  # at 200 samples, where both have been
    va, vb = cr.at_equal({0: a}, {0: b}, "eval_loss", "wall_time_s")
    assert (va[0], vb[0]) == (3.0, 4.0)  # at 2 s A is further along
    assert math.isnan(cr.loss_at(a, "eval_loss", "samples", 50))  # before its first point


def test_claim_row_reads_the_claim_and_both_readings(tmp_path):
    runs = []
    for seed, slow in enumerate((1.9, 2.0, 2.1)):
        ev_a = [4.0 - 0.01 * seed, 3.0 - 0.01 * seed]
        runs.append(
            make_run(
                tmp_path, f"a{seed}", "acco", seed, [(1, 100, 1.0, ev_a[0], ev_a[0]), (2, 200, 2.0, ev_a[1], ev_a[1])]
            )
        )
        runs.append(
            make_run(tmp_path, f"b{seed}", "ddp", seed, [(1, 100, slow, 4.0, 4.0), (2, 200, 2 * slow, 3.0, 3.0)])
        )
    claim = Claim(
        exp="fig8",
        name="sooner",
        paper="−87 %",
        a={"method": "acco", "clock": "virtual"},
        b={"method": "ddp", "clock": "virtual"},
        metric="time_to_eval_target",
        expect=Verdict.BETTER,
        question="wall-clock",
    )
    row = cr.claim_row(claim, runs, "modelled")
    # A reaches the pair's loss at 2 s, B at 2 x 1.9, 2.0, 2.1 s: about half the time
    assert (
        row["clock"] == "modelled"
        and row["A vs B, paired"].startswith("-49.9 %")
        and "(n = 3)" in row["A vs B, paired"]
    )
    # at 200 samples A's eval loss is 0.01 x seed lower than B's 3.0: a gap whose interval holds 0
    assert row["loss at equal samples"].startswith("-0.3 %") and row["loss at equal samples"].endswith("includes 0")
    # at 2 s A is at 3.0 - 0.01 x seed, B at 4.0 (seed 2's B has no point by then: left out)
    assert "(n = 2)" in row["loss at equal time"] and row["loss at equal time"].endswith("excludes 0")


def test_clock_section_from_synthetic_results(tmp_path):
    where = tmp_path / "cpu" / "clock"
    where.mkdir(parents=True)
    point = {
        "figure": "fig8",
        "rate_mbit": 45.0,
        "acco_accum": 2,
        "micro_batch_s": cal.spread([0.1, 0.11, 0.12]),
        "sync_s": cal.spread([0.3, 0.31]),
        "optimizer_step_s": cal.spread([0.01, 0.01]),
        "comm_over_compute": 0.31 / 0.22,
    }
    content = {"machine": {"before": cal.machine_load()}, "points": [point], "paper_presets": cal.paper_presets()}
    (where / "calibration.json").write_text(json.dumps(content))
    rows = [
        {
            "method": m,
            "rate_mbit": 25.0,
            "rep": k,
            "real_s": 1.0 + 0.01 * k,
            "virtual_own_s": 1.02,
            "virtual_cal_s": 0.95,
            "own_micro_batch_s": 0.1,
            "own_sync_s": 0.3,
            "own_optimizer_step_s": 0.01,
            "cal_micro_batch_s": 0.1,
            "cal_sync_s": 0.3,
            "cal_optimizer_step_s": 0.01,
            "ratio_own": 3.1,
            "ratio_cal": 3.1,
            "load_1min": 2.0,
        }
        for m in ("ddp", "acco")
        for k in range(3)
    ]
    val.write_csv(rows, str(where / "validation.csv"))
    text = cr.clock_section(str(tmp_path), "cpu")
    assert "The virtual clock's costs" in text and "| fig8 | 45 |" in text
    assert "Table-3-implied" in text and "8.86" in text  # the 2x4 row's implied ratio
    assert "Validation against real runs" in text and "| acco | 25 |" in text
    assert "What the paper's −87 % is made of" in text and "+81 %" in text  # adaptive at equal samples, r = 8.5


# -- the command's bad input ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "argv, words",
    [
        (["--points", "fig99:3"], "no CPU-scale experiment 'fig99'"),
        (["--points", "fig8"], "not FIGURE:RATE_MBIT"),
        (["--points", "fig8:fast"], "is not a number"),
        (["--points", "fig8:-5"], "negative"),
        (["--steps", "1"], "need at least 3"),
        (["--validate", "fast"], "not a comma list of link rates"),
        (["--validate", "25", "--reps", "1"], "at least 2 repetitions"),
    ],
)
def test_calibration_command_bad_input_exits_2(argv, words, capsys, tmp_path):
    from importlib import util

    spec = util.spec_from_file_location("calibrate_clock", os.path.join(ROOT, "experiments", "calibrate_clock.py"))
    assert spec is not None and spec.loader is not None
    mod = util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    (tmp_path / "cal.json").write_text("{}")  # --validate reads a calibration: one exists here
    out = tmp_path / ("cal.json" if "--validate" in argv else "c.json")
    assert mod.main([*argv, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and words in err[0]
    assert not (tmp_path / "c.json").exists() and not (tmp_path / "validation.csv").exists()  # nothing ran


def test_validation_says_which_rows_validate_and_why_the_others_do_not():
    def rows(method: str, virtual: list[float]) -> list[dict]:
        return [
            {
                "method": method,
                "rate_mbit": 100.0,
                "rep": rep,
                "real_s": 1.0,
                "virtual_own_s": v,
                "virtual_cal_s": v,
                "ratio_own": 1.0,
                "load_1min": 2.0,
            }
            for rep, v in enumerate(virtual)
        ]

    text = "\n".join(
        cr.validation_lines(
            rows("ddp", [0.99, 1.0, 1.01]) + rows("acco", [0.85, 0.86, 0.87]) + rows("wp", [0.7, 1.0, 1.3])
        )
    )
    validated, _, not_validated = text.partition("not validated here: ")
    assert "interval inside ±10 %): ddp at 100 Mbit/s;" in validated
    assert "acco at 100 Mbit/s (-14 %, biased: the interval excludes 0)" in not_validated
    assert "wp at 100 Mbit/s (+0 %, the mean inside, the repetitions too spread)" in not_validated
