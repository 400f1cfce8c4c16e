#!/usr/bin/env python
"""The performance testbed's benchmark (`make bench`): see acco/bench/main.py and README.md.

    python experiments/bench.py [--worlds 2,4] [--ratios 0,0.25,1,4] [--rounds 2] [--out results/bench]
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from acco.bench.main import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
