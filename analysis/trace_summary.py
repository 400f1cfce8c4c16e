#!/usr/bin/env python
"""Per-rank busy time of the compute and communication lanes of a run's trace.json, the time they
overlap, and the overlap efficiency (t_comp + t_comm - t_span) / min(t_comp, t_comm).

    python analysis/trace_summary.py results/runs/<run>/trace.json
"""

import argparse
import sys

from acco.engine.trace import summarize_overlap

# the summary itself lives in acco/engine/trace.py (acco/harness/bench reads it too, and acco never imports analysis)
summarize = summarize_overlap


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trace", help="a run's trace.json (written with train.trace=true, the default)")
    args = ap.parse_args(argv)
    try:
        rows = summarize(args.trace)
    except FileNotFoundError:
        print(f"error: no trace file {args.trace}", file=sys.stderr)
        return 2
    for row in rows:
        print(
            "rank {rank}: compute {compute_s:.3f} s, communication {comm_s:.3f} s, "
            "overlapped {overlap_s:.3f} s (efficiency {overlap_efficiency:.2f})".format(**row)
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
