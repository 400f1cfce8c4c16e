#!/usr/bin/env python
"""The methods' schedules simulated at 8-1024 GPUs (acco/harness/simulation; results/sim/README.md).

python experiments/simulate.py --gpus-per-node 8 --nodes 16 --inter-gbps 100 --model 7b
    [--stragglers none|lognormal:SIGMA|tail:P:FACTOR|slow_node:FACTOR] [--csv OUT.csv]
python experiments/simulate.py --params 1e9 --layers 24 --step-time 0.1 --accum 1 --replica-gpus 8 \
    --outer-precision fp4 --H 100 --F 8 --layerwise --find-bandwidth 0.95   # --help lists the rest
python experiments/simulate.py --figures results/sim
python experiments/simulate.py --validation results/sim
It predicts time, not loss. The figures and the validation table are analysis/'s (acco never
imports analysis/): this script hands them to acco.harness.simulation.cli.main.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # acco, analysis of this checkout

from acco.harness.simulation.cli import main  # noqa: E402


def write_figures(a):
    from analysis.sim_figures import write_figures

    return write_figures(a.figures)


def write_validation(a):
    from analysis.sim_validation import write_validation

    return write_validation(a.results, a.validation)


WRITERS = {"figures": write_figures, "validation": write_validation}

if __name__ == "__main__":
    sys.exit(main(writers=WRITERS))
