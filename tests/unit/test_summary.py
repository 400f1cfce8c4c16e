"""acco/runtime/summary.py: summary.json read into a typed record and written back unchanged."""

import json

from acco.runtime.summary import RunSummary, read_summary, run_completed


def test_a_summary_round_trips_in_its_own_key_order_and_keeps_keys_it_does_not_know(tmp_path):
    written = {"method": "acco", "world_size": 2, "status": "completed", "steps_completed": 3, "a_newer_key": [1, 2]}
    (tmp_path / "summary.json").write_text(json.dumps(written))
    summary = read_summary(str(tmp_path))
    assert summary is not None and summary.completed and summary.world_size == 2
    assert summary.extra == {"a_newer_key": [1, 2]}
    again = summary.to_json()
    # every known field in the record's order (missing ones as None), then the unknown ones
    assert list(again)[:3] == ["method", "world_size", "status"] and list(again)[-1] == "a_newer_key"
    assert again["error"] is None and again["per_rank"] == []
    assert RunSummary.from_json(again) == summary


def test_the_launchers_own_fields_are_written_only_when_it_wrote_them():
    assert "exit_codes" not in RunSummary(status="completed").to_json()
    failed = RunSummary(status="failed", exit_codes=[0, -9], rank_errors=[None, "killed"])
    assert failed.to_json()["exit_codes"] == [0, -9] and not failed.completed


def test_a_missing_or_unreadable_summary_reads_as_none(tmp_path):
    assert read_summary(str(tmp_path)) is None and not run_completed(str(tmp_path))
    (tmp_path / "summary.json").write_text("{not json")
    assert read_summary(str(tmp_path)) is None
    (tmp_path / "summary.json").write_text(json.dumps({"status": "preempted", "per_rank": [None, {"x": 1}]}))
    summary = read_summary(str(tmp_path))
    assert summary is not None and summary.ranks() == [{"x": 1}] and not run_completed(str(tmp_path))


def test_modelled_time_is_the_virtual_clocks():
    assert RunSummary(clock={"mode": "virtual"}).modelled_time
    assert not RunSummary(clock={"mode": "real"}).modelled_time and not RunSummary().modelled_time
