#!/usr/bin/env python
"""List the runs of an experiment with their Slurm state (the controller's, squeue, while it knows
the job; else accounting, sacct) and whether their results exist; failed jobs come with the tail
of their log; a last line counts them (how far a submission without waiting has got).

    python experiments/status.py experiment=fig5/cpu
"""

import os
import sys

from acco.config.experiments import CONF_DIR, compose, expand_runs
from acco.config.validate import ConfigError, check_overrides
from acco.slurm.status import run_status
from acco.start import fail_config

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main(argv: list[str]) -> int:
    try:
        check_overrides(argv, CONF_DIR)
        base = compose(argv)
    except (ConfigError, ValueError) as exc:
        fail_config(str(exc).splitlines()[0])
    exp = base.get("experiment")
    if not exp:
        fail_config("name an experiment: experiment=<id>/<scale>")
    rows = [run_status(compose([*argv, *run])["out_dir"]) for run in expand_runs(exp)]
    print(f"{'job':>10s} {'slurm':>12s} {'result':>10s} {'steps':>6s}  run")
    for r in rows:
        print(
            f"{str(r['job_id'] or '-'):>10s} {r['slurm_state']:>12s} {r['result']:>10s} "
            f"{str(r['steps'] if r['steps'] is not None else '-'):>6s}  {r['out_dir']}"
        )
        for line in r["log_tail"]:
            print(f"    | {line}")
    print(tally(rows))
    return 0


def tally(rows: list[dict]) -> str:
    """One line: how many runs are in each Slurm state and have each result (after --no-wait: how far along)."""

    def counts(key: str) -> str:
        seen: dict[str, int] = {}
        for r in rows:
            seen[r[key]] = seen.get(r[key], 0) + 1
        return ", ".join(f"{n} {name}" for name, n in sorted(seen.items(), key=lambda kv: (-kv[1], kv[0])))

    return f"{len(rows)} runs; Slurm: {counts('slurm_state')}; results: {counts('result')}"


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
