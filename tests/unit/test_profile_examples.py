"""The `#SBATCH` option examples that a launcher profile's comments and docstrings give (conf/launcher/
slurm.yaml, acco/config/schema.py, acco/config/slurm_profile.py) are options the code accepts, on a
GPU job too: an example the checks refuse (`--gres=gpu:4`, which doubles acco's --gpus-per-node) would
send a reader into the error it was meant to avoid."""

from __future__ import annotations

import os
import re

import pytest

from acco.config import slurm_profile
from acco.config.experiments import compose
from acco.config.slurm_profile import sbatch_options
from acco.harness.slurm.dispatch import job_shape
from tests.helpers.paths import ROOT


def examples() -> list[tuple[str, str]]:
    """(where, option) for every example: the quoted ones on slurm.yaml's sbatch_options line, the
    backticked ones in the schema's comment and slurm_profile's docstring."""
    found = []
    with open(os.path.join(ROOT, "conf", "launcher", "slurm.yaml")) as f:
        line = next(line for line in f if line.startswith("sbatch_options:"))
    found += [("conf/launcher/slurm.yaml", o) for o in re.findall(r'"(--[^"]+)"', line)]
    with open(os.path.join(ROOT, "acco", "config", "schema.py")) as f:
        schema = f.read()
    comment = schema[schema.index("extra `#SBATCH` options") :].split("sbatch_options: list")[0]
    found += [("acco/config/schema.py", o) for o in re.findall(r"`(--[^`]+)`", comment)]
    doc = next(line for line in (slurm_profile.__doc__ or "").splitlines() if "sbatch_options:" in line)
    found += [("acco/config/slurm_profile.py", o) for o in re.findall(r"`(--[^`]+)`", doc)]
    return found


EXAMPLES = examples()


def test_every_source_gives_examples():
    assert {where for where, _ in EXAMPLES} == {
        "conf/launcher/slurm.yaml",
        "acco/config/schema.py",
        "acco/config/slurm_profile.py",
    }


@pytest.mark.parametrize("where, option", EXAMPLES, ids=[f"{w}:{o}" for w, o in EXAMPLES])
def test_an_example_is_accepted_on_a_gpu_job(where, option):
    cfg = compose(["experiment=fig8/paper", "method=acco", "layout=2x4", "launcher=slurm"])
    profile = {**cfg["launcher"], "sbatch_options": [option]}
    assert sbatch_options(profile)  # not refused as an option
    assert job_shape(cfg, 8, profile)["gpus_per_node"] == 4  # nor as a second GPU request
