"""experiments/same_metrics.py's comparison: the machine's wall_time_s is left out, except in a
virtual-clock run, where it is the modelled time; any other difference, or a missing run, is named;
a --base that is not a commit is one line, exit 2."""

from __future__ import annotations

import importlib.util
import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
spec = importlib.util.spec_from_file_location("same_metrics", os.path.join(ROOT, "experiments", "same_metrics.py"))
assert spec and spec.loader
same_metrics = importlib.util.module_from_spec(spec)
spec.loader.exec_module(same_metrics)


def write(tree, name, rows):
    os.makedirs(tree / name, exist_ok=True)
    (tree / name / "metrics.csv").write_text("".join(",".join(map(str, r)) + "\n" for r in rows))


def test_only_the_machine_clock_may_differ(tmp_path):
    base, new = tmp_path / "base", tmp_path / "new"
    write(base, "acco", [["step", "wall_time_s", "loss"], [1, 0.51, 2.5], [2, 1.02, 2.25]])
    write(new, "acco", [["step", "wall_time_s", "loss"], [1, 0.77, 2.5], [2, 1.40, 2.25]])
    assert same_metrics.differences(str(base), str(new), ["acco"]) == []
    write(new, "acco", [["step", "wall_time_s", "loss"], [1, 0.77, 2.5], [2, 1.40, 2.2500001]])
    assert same_metrics.differences(str(base), str(new), ["acco"]) == [
        f"acco: metrics differ ({base}/acco vs {new}/acco)"
    ]


def test_a_virtual_clock_runs_modelled_time_must_match_and_a_missing_run_is_named(tmp_path):
    base, new = tmp_path / "base", tmp_path / "new"
    write(base, "acco_virtual", [["step", "wall_time_s"], [1, 0.3]])
    write(new, "acco_virtual", [["step", "wall_time_s"], [1, 0.35]])
    assert same_metrics.differences(str(base), str(new), ["acco_virtual", "dpu"]) == [
        f"acco_virtual: metrics differ ({base}/acco_virtual vs {new}/acco_virtual)",
        "dpu: no metrics.csv in the base run",
    ]


def test_a_base_that_is_not_a_commit_is_one_line_exit_2(capsys):
    assert same_metrics.main(["--base", "no-such-revision-xyz"]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    assert same_metrics.main(["--base", "HEAD", "--only", "nope"]) == 2
