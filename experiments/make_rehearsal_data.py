#!/usr/bin/env python
"""Write the dress rehearsal's local datasets, tokenizers and pretrained model (see acco/harness/rehearsal/make.py).

    python experiments/make_rehearsal_data.py --out data/rehearsal [--force]

The rehearsal's experiment overlays (conf/experiment/*/rehearsal.yaml) read them from
$ACCO_REHEARSAL_DATA (default data/rehearsal)."""

import argparse
import os
import sys

from acco.harness.rehearsal.make import make_rehearsal_data

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.environ.get("ACCO_REHEARSAL_DATA") or "data/rehearsal")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--force", action="store_true", help="rebuild even when the folder is up to date")
    args = ap.parse_args(argv)
    make_rehearsal_data(args.out, seed=args.seed, force=args.force)
    return 0


if __name__ == "__main__":
    sys.exit(main())
