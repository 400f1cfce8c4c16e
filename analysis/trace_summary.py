#!/usr/bin/env python
"""Per-rank busy time of the compute and communication lanes of a run's trace.json, the time they
overlap, and the overlap efficiency (t_comp + t_comm - t_span) / min(t_comp, t_comm).

    python analysis/trace_summary.py results/runs/<run>/trace.json
"""

import sys

from acco.engine.trace import load_spans, overlap_us


def summarize(path: str) -> list[dict]:
    spans = load_spans(path)
    rows = []
    for rank in sorted({e["pid"] for e in spans}):
        comp = [e for e in spans if e["pid"] == rank and e.get("cat") == "compute"]
        comm = [
            e
            for e in spans
            if e["pid"] == rank
            and e.get("cat") == "communication"
            and e["name"].startswith(("sync", "bwd + all_reduce"))
        ]  # whole syncs, not stages
        t_comp = overlap_us(comp, comp) / 1e6
        t_comm = overlap_us(comm, comm) / 1e6
        both = overlap_us(comp, comm) / 1e6
        rows.append(
            {
                "rank": rank,
                "compute_s": t_comp,
                "comm_s": t_comm,
                "overlap_s": both,
                "overlap_efficiency": both / min(t_comp, t_comm) if min(t_comp, t_comm) > 0 else 0.0,
            }
        )
    return rows


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python analysis/trace_summary.py TRACE_JSON")
    for row in summarize(sys.argv[1]):
        print(
            "rank {rank}: compute {compute_s:.3f} s, communication {comm_s:.3f} s, "
            "overlapped {overlap_s:.3f} s (efficiency {overlap_efficiency:.2f})".format(**row)
        )
