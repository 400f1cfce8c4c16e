#!/usr/bin/env python
"""The methods' schedules simulated at 8-1024 GPUs (acco/simulation; results/sim/README.md).

python experiments/simulate.py --gpus-per-node 8 --nodes 16 --inter-gbps 100 --model 7b
    [--stragglers none|lognormal:SIGMA|tail:P:FACTOR|slow_node:FACTOR] [--csv OUT.csv]
python experiments/simulate.py --figures results/sim
python experiments/simulate.py --validation results/sim
It predicts time, not loss.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # acco, analysis of this checkout

from acco.simulation.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
