"""The reproduction harness around the library: launching and the run lifecycle (start, run/),
Slurm submission (slurm/, commands/submit), the emulated interconnect (testbed/), the dress
rehearsal's data (rehearsal/), `make bench` (bench/), the virtual clock's calibration and validation
(clock_calibration/), the GPU check's CUDA measurements (gpu_check), the schedule simulator
(simulation/) and the commands (commands/: `python -m acco.harness.commands.<name>`). It imports the
library; the library never imports it (make lint: an import-linter contract). Importing this package
imports nothing heavy (the GPU check reads acco.harness.bench with only a bare Python)."""

from __future__ import annotations

import os
import sys

# A training run in a subprocess: the command's module, so an installed acco needs no clone
# (experiments/train.py is a wrapper over it).
TRAIN = [sys.executable, "-m", "acco.harness.commands.train"]
# the folder that holds the acco package: the clone's root when acco runs from it (pip install -e .);
# the harness's training subprocesses start there, as the scripts did
SOURCE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
