"""Every experiment composes at every scale (plain Hydra composition: `experiment=<id>/<scale>`, the
experiment's per-method file merged last; the rehearsal: the paper file plus sizes), its key
hyperparameters are the paper's, and what experiments/train.py prints with --cfg job is what runs.

Here the tests that start processes (marked integration); the in-process ones are in
tests/unit/test_experiments.py."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import yaml

from acco.config.experiments import compose
from tests.helpers.paths import ROOT


@pytest.mark.integration
@pytest.mark.parametrize(
    "overrides",
    [
        ["experiment=fig5/cpu", "method=acco"],
        ["experiment=fig8/rehearsal", "method=dpu", "layout=2x1"],
        ["experiment=fig7/paper", "method=ddp", "train.steps=7"],
    ],
)
def test_cfg_job_prints_the_config_the_run_uses(overrides):
    """`train.py ... --cfg job --resolve` shows the experiment's settings (the old merge layer added
    them only after Hydra, so --cfg job showed the base config); out_dir is filled in at start."""
    proc = subprocess.run(
        [sys.executable, os.path.join(ROOT, "experiments", "train.py"), *overrides, "--cfg", "job", "--resolve"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr
    printed = yaml.safe_load(proc.stdout)
    expected = compose(overrides)
    assert printed.pop("out_dir") is None and expected.pop("out_dir")
    assert printed == expected
