"""`make bench` end to end at a tiny size: calibration, the interleaved grid on the emulated link,
and every output file."""

from __future__ import annotations

import os
import subprocess
import sys

import pandas as pd
import pytest

from acco.harness.bench.link_rates import MAX_RATE_MBIT
from tests.helpers.paths import ROOT

pytestmark = pytest.mark.integration  # every test here starts processes


@pytest.mark.slow
def test_bench_end_to_end_tiny(tmp_path):
    out = tmp_path / "bench"
    proc = subprocess.run(
        [
            sys.executable,
            os.path.join(ROOT, "experiments", "bench.py"),
            "--tiny",
            "--worlds",
            "2",
            "--ratios",
            "0,1",
            "--methods",
            "acco,ddp:impl=flat:overlap_backward=true",  # a trainer spelling: the bench's ddp_overlap
            "--rounds",
            "1",
            "--steps",
            "3",
            "--accum",
            "2",
            "--hetero-worlds",
            "2",
            "--delay-methods",
            "acco",
            "--out",
            str(out),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env=os.environ.copy(),
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    for name in (
        "runs.csv",
        "grid.csv",
        "ideal.csv",
        "calibration.csv",
        "memory.csv",
        "targets.csv",
        "targets.md",
        "costmodel_testbed.csv",
        "costmodel_fit.csv",
        "costmodel_scaling.csv",
        "costmodel_fig4.csv",
        "costmodel_table3.csv",
        "bench.png",
        "delay.csv",
        "bounds.csv",
        "hetero_ideal.csv",
        "best_ddp.csv",
    ):
        assert (out / name).is_file() and (out / name).stat().st_size > 0, name
    grid = pd.read_csv(out / "grid.csv")
    assert set(grid["method"]) == {"acco", "ddp_flat", "ddp_overlap"}  # the reference always runs
    assert sorted(grid["ratio_target"].unique()) == [0.0, 1.0]
    unlimited, shaped = grid[grid["ratio_target"] == 0], grid[grid["ratio_target"] == 1]
    assert (unlimited["link_mode"] == "none").all() and (unlimited["rate_mbit"] == 0).all()
    assert (shaped["rate_mbit"] > 0).all() and shaped["link_mode"].isin(["netns", "delay"]).all()
    assert (grid["samples_per_s"] > 0).all() and (grid["s_per_step"] > 0).all()
    # the rate for ratio ~1 comes from the calibration: the link's work at that rate plus the sync's
    # fixed cost equals one round of compute (unless even the fastest shaped link is too slow)
    cal = pd.read_csv(out / "calibration.csv").iloc[0]
    rate = float(shaped["rate_mbit"].iloc[0])
    budget = cal["t_comp_round_s"] - cal["t_sync_unlimited_s"]
    if 1.0 < rate < MAX_RATE_MBIT:
        predicted = cal["link_work_mbit_s"] / rate + cal["t_sync_unlimited_s"]
        assert abs(predicted - cal["t_comp_round_s"]) <= 0.01 * cal["t_comp_round_s"] + 1e-4, (predicted, cal)
    elif rate >= MAX_RATE_MBIT:  # the fixed cost alone reaches the target: the fastest shaped link
        assert budget <= 0 or cal["link_work_mbit_s"] / budget >= MAX_RATE_MBIT, cal
    else:
        assert cal["link_work_mbit_s"] / budget <= 1.0, cal
    # the shaped ratio again on the in-process delay link, ACCO and its reference
    delay = pd.read_csv(out / "delay.csv")
    assert set(delay["method"]) == {"acco", "ddp_flat"} and (delay["link_mode"] == "delay").all()
    # ACCO against both bounds, per link: the contention-aware one adds the sync's measured CPU
    ideal = pd.read_csv(out / "ideal.csv")
    assert set(zip(ideal["group"], ideal["ratio_target"])) == {("grid", 0.0), ("grid", 1.0), ("delay", 1.0)}
    assert (ideal["acco_sync_side_cpu_s"] > 0).all()
    perfect = ideal[["t_comp_round_s", "t_sync_s"]].max(axis=1)
    assert (ideal["contention_bound_round_s"] >= perfect - 1e-12).all()
    # the link's machine-wide CPU per sync, measured in the sequential reference (all ranks and the
    # kernel): at least what the workers' own threads took
    assert (ideal["link_cpu_per_sync_s"] >= 0).all()
    # 2 workers on 2 cores: t_comp + max(2c, L)/2 unless the sync is longer
    link = pd.concat([2 * ideal["acco_sync_side_cpu_s"], ideal["link_cpu_per_sync_s"]], axis=1).max(axis=1)
    expect = pd.concat([ideal["t_sync_s"], ideal["t_comp_round_s"] + link / 2], axis=1).max(axis=1)
    if os.cpu_count() == 2:
        assert ((ideal["contention_bound_round_s"] - expect).abs() < 1e-9).all()
    # every method against its own bound: sequential t_comp + t_sync, ACCO max(t_comp, t_sync)
    bounds = pd.read_csv(out / "bounds.csv")
    assert set(bounds[bounds["method"] == "acco"]["bound"]) == {"max(t_comp, t_sync)"}
    assert set(bounds[bounds["method"] == "ddp_flat"]["bound"]) == {"t_comp + t_sync"}
    assert set(bounds[bounds["method"] == "ddp_overlap"]["bound"]) == {"t_comp + 0.5 t_sync"}
    # ACCO over the fastest DDP at each ratio (issue 40), and a target row for each
    best = pd.read_csv(out / "best_ddp.csv")
    assert sorted(best[best["group"] == "grid"]["ratio_target"]) == [0.0, 1.0]
    assert best["best_ddp"].isin(["ddp_flat", "ddp_overlap"]).all() and (best["acco_over_best_ddp"] > 0).all()
    assert (best["acco_over_best_ddp"] <= best["acco_over_blocking_ddp"] + 1e-12).all()
    assert (bounds["of_bound"] > 0).all() and (bounds["bound_round_s"] > 0).all()
    # one of 2 workers 4x slower: the ideal measured as each rank's own rate, summed
    hetero = pd.read_csv(out / "hetero_ideal.csv")
    assert len(hetero) == 1 and hetero.iloc[0]["world"] == 2
    h = hetero.iloc[0]
    assert h["independent_ideal_ratio"] == pytest.approx(2.5)
    assert h["measured_ideal_samples_per_s"] > h["slowest_times_n_samples_per_s"] > 0
    targets = pd.read_csv(out / "targets.csv")
    assert targets["target"].str.startswith("ACCO >= 0.9 x contention-aware bound").sum() == 3
    assert targets["target"].str.contains("measured ideal").sum() == 1
    assert targets["target"].str.startswith("ACCO at least as fast as the best DDP").sum() == 2
    assert len(targets) >= 2 and set(targets["pass"]) <= {True, False}
    mem = pd.read_csv(out / "memory.csv")
    acco = mem[mem["method"] == "acco"].iloc[0]
    # ACCO's model state is exactly Table 1's (2+2+2+K/N)Ψ at fp32 (params, grads, buffer, shard)
    assert abs(acco["measured_over_table1"] - 1.0) < 0.05
    # the outputs can be rebuilt from the run folders alone
    (out / "grid.csv").unlink()
    again = subprocess.run(
        [sys.executable, os.path.join(ROOT, "experiments", "bench.py"), "--report-only", "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert again.returncode == 0, again.stderr[-3000:]
    rebuilt = pd.read_csv(out / "grid.csv")
    assert len(rebuilt) == len(grid) and set(rebuilt["method"]) == set(grid["method"])


def test_steady_rate_leaves_out_the_first_and_the_known_last_step(tmp_path):
    """ACCO's last committed step computes nothing beside its sync, yet commits samples computed in
    the step before: counted, it would credit ACCO with samples/s it did not reach. Three steady
    steps of 1 s and 8 samples, then a last one of 0.3 s that commits 8 more: 8 samples/s."""
    from acco.harness.bench.measure import steady_rate

    path = tmp_path / "metrics.csv"
    rows = [(1, 8, 2.0), (2, 16, 3.0), (3, 24, 4.0), (4, 32, 5.0), (5, 40, 5.3)]
    path.write_text("step,samples,wall_time_s\n" + "".join(f"{s},{n},{t}\n" for s, n, t in rows))
    rate = steady_rate(str(path))
    assert rate["steps_measured"] == 3
    assert rate["samples_per_s"] == pytest.approx(8.0) and rate["s_per_step"] == pytest.approx(1.0)
    path.write_text("step,samples,wall_time_s\n1,8,2.0\n2,16,3.0\n")
    with pytest.raises(ValueError, match="at least 3"):
        steady_rate(str(path))


def test_machine_cpu_seconds_counts_work_of_another_process():
    """The link's CPU is charged to no worker's clock (kernel softirqs, other ranks): the
    machine-wide counter sees CPU burnt by a child process, which this process's clock does not."""
    from acco.engine.trace import machine_cpu_seconds

    before = machine_cpu_seconds()
    if before is None:
        pytest.skip("no /proc/stat")
    subprocess.run(
        [sys.executable, "-c", "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass"],
        check=True,
    )
    assert machine_cpu_seconds() - before >= 0.25
