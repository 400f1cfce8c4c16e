#!/usr/bin/env python
"""What a checkpoint costs each rank (`make bench-checkpoint`): see acco/harness/bench/checkpoint.py.

python experiments/bench_checkpoint.py [--out results/bench] [--methods acco,ddp] [--no-async]
"""

import sys

from acco.harness.bench.checkpoint import main

if __name__ == "__main__":
    sys.exit(main())
