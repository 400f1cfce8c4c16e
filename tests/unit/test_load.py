"""analysis/load.py: the report's sections read one loaded set of runs."""

import collections
import os
import shutil

from analysis import load, report
from tests.helpers.paths import FIXTURE_RESULTS


def test_the_report_parses_each_run_folder_once(monkeypatch, tmp_path):
    """Inside loaded_once() (build_report opens it) every section and figure shares one parse of each
    run folder: its summary.json, config.yaml and metrics.csv are each read once, whichever sections,
    clocks and experiments ask for the run."""
    reads: collections.Counter = collections.Counter()

    def counted(name, real):
        def read(path):
            reads[(name, path)] += 1
            return real(path)

        return read

    for name in ("read_summary", "_read_yaml", "metrics_frame"):
        monkeypatch.setattr(load, name, counted(name, getattr(load, name)))
    root = shutil.copytree(FIXTURE_RESULTS, tmp_path / "results")  # the report draws its forest plot there
    report.build_report(str(root), "cpu")
    summaries = {path for name, path in reads if name == "read_summary"}
    assert len(summaries) > 20, summaries  # the fixture's runs of every experiment were read
    assert max(reads.values()) == 1, reads.most_common(3)
    assert all(os.path.isdir(p) for p in summaries)


def test_a_runs_method_key_and_facts_come_from_its_config_and_spec():
    from analysis.load import method_label, run_info, schedule_name, spec_of

    overlapped = run_info({"method": {"name": "ddp", "impl": "flat", "overlap_backward": True}})
    assert overlapped["method"] == "ddp_overlap" and overlapped["impl"] == "flat"  # its own arm
    assert run_info({"method": {"name": "ddp", "impl": "flat", "overlap_backward": False}})["method"] == "ddp"
    assert spec_of("ddp_overlap").name == "ddp" and spec_of("sgd") is None
    dpu = run_info({"method": {"name": "dpu", "warmup_steps": 3, "impl": "flat"}})
    assert dpu["warmup"] == 3 and dpu["impl"] is None and dpu["sync_every"] is None  # settings dpu reads
    assert run_info({"method": {"name": "acco", "warmup_steps": 3}})["warmup"] is None
    local = run_info({"method": {"name": "streaming_diloco", "sync_every": 8, "outer_lr": 0.5}})
    assert local["sync_every"] == 8 and local["outer_lr"] == 0.5
    assert [method_label(m) for m in ("ddp", "ddp_overlap", "streaming_diloco", "sgd")] == [
        "DDP",
        "DDP (overlapped)",
        "Streaming DiLoCo",
        "SGD",
    ]
    settings = {"sync_every": 32, "fragments": 4, "overlap_steps": 1}
    assert schedule_name("diloco", settings) == "DiLoCo H=32"
    assert schedule_name("streaming_diloco", settings) == "Streaming DiLoCo H=32 F=4 τ=1"
