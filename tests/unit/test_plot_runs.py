"""analysis/plot_runs.py: any set of run folders (a sweep's folder, a glob) plotted against steps,
samples and wall-clock, with a table of final numbers (issue 41)."""

from __future__ import annotations

import os
import shutil

from analysis.plot_runs import labels, main, run_folders
from tests.helpers.paths import ROOT

FIXTURES = os.path.join(ROOT, "tests", "fixtures", "results", "cpu", "fig5")


def a_sweep(tmp_path):
    """A sweep's folder as train.py -m leaves it (runs side by side, Hydra's files beside them)."""
    sweep = tmp_path / "sweeps" / "fig5-cpu_method=ddp,acco_train.steps=8"
    for name in ("acco_train.steps=8", "ddp_train.steps=8", "dpu_method.warmup_steps=2_seed=1_train.steps=8"):
        shutil.copytree(os.path.join(FIXTURES, name), sweep / name)
    (sweep / ".hydra").mkdir()
    return sweep


def test_a_sweep_folder_is_plotted_with_a_table(tmp_path, capsys):
    sweep = a_sweep(tmp_path)
    assert main([str(sweep)]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("| ") and "status" not in line]
    assert len(rows) == 3 and all("| completed | 8 |" in row for row in rows), out
    for name in ("runs.png", "runs.pdf", "runs.md"):
        assert (sweep / "plots" / name).stat().st_size > 500
    assert main([str(sweep)]) == 0  # its own plots/ folder is not a run


def test_globs_and_folders_mix_and_labels_say_what_differs(tmp_path, capsys):
    sweep = a_sweep(tmp_path)
    folders = run_folders([str(sweep / "acco_*"), str(sweep / "ddp_train.steps=8"), str(sweep / "ddp_*")])
    assert [os.path.basename(f) for f in folders] == ["acco_train.steps=8", "ddp_train.steps=8"]  # each once
    from analysis.load import _read_yaml

    names = labels([_read_yaml(os.path.join(f, "config.yaml")) for f in folders], folders)
    assert names[0].startswith("acco") and names[1].startswith("ddp"), names
    assert main([*map(str, folders), "--out", str(tmp_path / "mine"), "--by", "method"]) == 0
    assert (tmp_path / "mine" / "runs.png").exists()


def test_no_runs_is_one_line_exit_2(tmp_path, capsys):
    assert main([str(tmp_path / "nothing*")]) == 2
    assert capsys.readouterr().err.startswith("error: no run folder")


def test_make_figures_refuses_an_unknown_id_at_once(capsys):
    from analysis.make_figures import main as make_figures

    assert make_figures(["results", "--only", "fig12"]) == 2  # before: a minute of drawing, then exit 0
    err = capsys.readouterr().err
    assert err.startswith("error: --only fig12: no such figure or table") and "fig11" in err


def test_the_forest_plot_reads_each_claims_interval_and_margin(tmp_path):
    """analysis/forest.py: one row per claim, its block (loss, measured, modelled time), its interval
    and margin; the same rows give the same PNG, byte for byte."""
    from analysis.forest import Row, write_forest

    rows = [
        Row("fig5", "dynamics", "ACCO matches DDP", "matches", True, 0.1, 0.0, 0.2, 0.5),
        Row("fig8", "measured", "ACCO sooner", "worse", False, 85.0, 73.2, 96.9, 6.0),
        Row("fig8", "virtual", "ACCO sooner (virtual clock)", "better", True, -41.8, -41.8, -41.8),
        Row("fig9", "virtual", "not run yet", "not run", None),
    ]
    first = write_forest(rows, str(tmp_path / "a"))
    second = write_forest(rows, str(tmp_path / "b"))
    assert [os.path.basename(p) for p in first] == ["claims.png", "claims.pdf"]
    assert open(first[0], "rb").read() == open(second[0], "rb").read()
    assert write_forest([], str(tmp_path / "c")) == []


def test_every_committed_run_is_in_its_experiments_run_list():
    """The analysis reads, of an experiment's folder, only the runs its run list names (issue 41):
    a run list edited so that a committed run drops out of it would silently leave that run out of
    the figures and the report. Every committed run must stay named (seeds added by reproduce.py
    and the long names of runs made before a label included)."""
    from acco.config.experiments import experiment_block, in_run_list

    committed = os.path.join(ROOT, "results", "cpu")
    missing = []
    for exp in sorted(os.listdir(committed)):
        block = experiment_block(exp, "cpu")
        if not block.get("runs"):
            continue
        for name in sorted(os.listdir(os.path.join(committed, exp))):
            if os.path.isfile(os.path.join(committed, exp, name, "config.yaml")) and not in_run_list(name, block):
                missing.append(f"{exp}/{name}")
    assert not missing, missing
