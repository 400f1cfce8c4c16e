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
