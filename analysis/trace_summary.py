#!/usr/bin/env python
"""Per-rank busy time of the compute and communication lanes of a run's trace.json, the time they
overlap, and the overlap efficiency (t_comp + t_comm - t_span) / min(t_comp, t_comm).

    python analysis/trace_summary.py results/runs/<run>/trace.json
"""

import sys

from acco.engine.trace import summarize_overlap

# the summary itself lives in acco/engine/trace.py (acco/harness/bench reads it too, and acco never imports analysis)
summarize = summarize_overlap


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python analysis/trace_summary.py TRACE_JSON")
    for row in summarize(sys.argv[1]):
        print(
            "rank {rank}: compute {compute_s:.3f} s, communication {comm_s:.3f} s, "
            "overlapped {overlap_s:.3f} s (efficiency {overlap_efficiency:.2f})".format(**row)
        )
