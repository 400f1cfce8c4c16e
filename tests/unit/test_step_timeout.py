"""dist.step_timeout_s against the run's estimated waits (issue 42 point 10): null is sized from the
dry run's sync and compute (at least 30 s), an explicit one a healthy run would outlive is refused
before submission, launcher.inter_gbps states the cluster's bandwidth, and the local launcher tells a
live but slow rank from a hung one."""

from __future__ import annotations

import json
import os
import time

import pytest

from acco.config.experiments import compose
from acco.harness.run import plan as run_plan
from acco.harness.run.preflight import with_step_timeout
from acco.harness.run.supervise import Outcome, diagnose
from acco.runtime.files import clear_progress, note_progress

FIG8_2X4 = ["experiment=fig8/paper", "method=ddp", "layout=2x4"]


def test_inter_gbps_sets_the_bandwidth_between_nodes_and_a_bad_one_is_one_line():
    slow = run_plan.plan(compose([*FIG8_2X4, "launcher.inter_gbps=5"]))
    fast = run_plan.plan(compose([*FIG8_2X4, "launcher.inter_gbps=50"]))
    # the sync crosses the network: ten times the bandwidth, about a tenth of the time
    assert 8 < slow["sync_s"] / fast["sync_s"] < 11
    assert "5 Gbit/s between nodes" in slow["hw"].name
    with pytest.raises(ValueError, match=r"launcher.inter_gbps must be above 0 Gbit/s, got 0(.0)?; set e.g."):
        run_plan.plan(compose([*FIG8_2X4, "launcher.inter_gbps=0"]))


def test_a_null_step_timeout_is_sized_from_the_estimated_wait_and_a_short_one_refused():
    cfg = compose([*FIG8_2X4, "launcher.inter_gbps=5"])
    row = run_plan.plan(cfg)
    wait = row["sync_s"] + row["compute_per_round_s"]
    sized, seen_wait, problem = run_plan.step_timeout(cfg)
    assert problem is None and seen_wait == pytest.approx(wait)
    assert sized == 10 * -(-3 * wait // 10) and sized >= 3 * wait  # 3x, whole tens of seconds
    cfg_30 = compose([*FIG8_2X4, "launcher.inter_gbps=5", "dist.step_timeout_s=30"])
    checked, problem = with_step_timeout(cfg_30)
    assert checked["dist"]["step_timeout_s"] == 30
    assert problem.startswith("dist.step_timeout_s=30 s would declare a healthy run dead: its ranks wait up to ~")
    assert f"set dist.step_timeout_s={sized:g} or null (sized)" in problem and "\n" not in problem
    # at the preset's 100 Gbit/s the same 30 s is long enough; one node never crosses the network
    assert with_step_timeout(compose([*FIG8_2X4, "dist.step_timeout_s=30"]))[1] is None
    assert run_plan.step_timeout(compose(["experiment=fig8/paper", "method=ddp", "layout=1x8"]))[0] == 30


def test_below_the_paper_scale_null_is_the_floor():
    checked, problem = with_step_timeout(compose(["experiment=fig8/cpu"]))
    assert problem is None and checked["dist"]["step_timeout_s"] == run_plan.STEP_TIMEOUT_FLOOR_S


def test_the_dry_run_shows_the_step_timeout_and_what_submission_would_refuse():
    lines: list[str] = []
    run_plan.dry_run(["fig8"], ["launcher.inter_gbps=5", "dist.step_timeout_s=30"], "paper", lines.append)
    text = "\n".join(lines)
    header = next(line for line in lines if line.startswith("run "))
    assert {"wait-s", "timeout-s"} <= set(header.split())
    refused = [line for line in lines if line.startswith("refused at submission: ")]
    assert len(refused) == 3 and all("layout=2x4" in line for line in refused), text  # ddp, dpu, acco on 2x4


def test_a_stuck_rank_that_was_still_progressing_is_named_slow_not_hung(tmp_path):
    out = str(tmp_path)
    outcome = Outcome([1, None], first_failed=0, stuck=[1])
    note_progress(out, 1, (41, 3))
    rank, why, _ = diagnose(outcome, out, step_timeout_s=30)
    assert rank == 1 and why.startswith("rank 1 was alive and still progressing (micro-batch 41, step 3, ")
    assert "raise dist.step_timeout_s" in why
    path = os.path.join(out, "failures", "progress.rank1")
    with open(path) as f:
        note = json.load(f)
    note["time"] = time.time() - 120  # its last progress long before it was stopped: a hang
    with open(path, "w") as f:
        json.dump(note, f)
    rank, why, notes = diagnose(outcome, out, step_timeout_s=30)
    assert why.startswith("rank 1 hung: it stopped making progress") and notes == []  # a note is no report
    clear_progress(out, 1)
    assert not os.path.exists(os.path.join(out, "failures"))


@pytest.mark.parametrize("inter_gbps", [5, 100])
def test_the_timeouts_of_a_paper_scale_run_fire_in_one_order(inter_gbps):
    """A rank waiting for a dead peer gives up first (the host's wait: dist.step_timeout_s, sized from
    the estimated sync), NCCL's watchdog after it, the rank's own watchdog last; the first training
    step waits by the start-up timeout and keeps the order. What the trainer builds its groups from."""
    from acco.runtime.process_group import Timeouts

    checked, problem = with_step_timeout(compose([*FIG8_2X4, f"launcher.inter_gbps={inter_gbps}"]))
    assert problem is None
    step = checked["dist"]["step_timeout_s"]
    _, wait, _ = run_plan.step_timeout(checked)
    assert step >= 3 * wait  # sized from the estimated sync and compute
    t = Timeouts.of(step, checked["dist"]["timeout_s"], nccl=True)
    assert wait < t.host_wait_s == step < t.collective_s < t.watchdog_s
    first = t.first_step()
    assert first.host_wait_s >= checked["dist"]["timeout_s"] and first.host_wait_s >= step
    assert first.host_wait_s < first.collective_s < first.watchdog_s
    gloo = Timeouts.of(step, checked["dist"]["timeout_s"], nccl=False)  # gloo: the collective's own timeout is the wait
    assert gloo.host_wait_s == gloo.collective_s < gloo.watchdog_s


def test_a_rank_that_gives_up_first_leaves_the_flight_recorder(tmp_path, monkeypatch):
    """The rank whose wait timed out writes the flight recorder where NCCL's watchdog would (the run
    folder, acco/harness/launch.py), before it ends; its error names the file."""
    import pickle

    from acco.harness.launch import nccl_error_handling
    from acco.runtime.process_group import dump_flight_recorder, flight_recorder_path

    env: dict = {}
    nccl_error_handling(env, dump_dir=str(tmp_path))
    path = flight_recorder_path(1, env)
    assert path == str(tmp_path / "nccl_trace_rank_1")
    assert dump_flight_recorder(path) == path
    with open(path, "rb") as f:
        assert isinstance(pickle.load(f), dict)  # the recorder's record: version, entries, ...
    assert flight_recorder_path(1, {}) is None
