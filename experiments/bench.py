#!/usr/bin/env python
"""The performance testbed's benchmark (`make bench`): see acco/harness/bench/main.py and docs/bench.md.

python experiments/bench.py [--worlds 2,4] [--ratios 0,1,2] [--rounds 2] [--hetero-worlds 2,4] [--out results/bench]
"""

import sys

from acco.harness.bench.main import main

if __name__ == "__main__":
    sys.exit(main())
