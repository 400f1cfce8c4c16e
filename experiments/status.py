#!/usr/bin/env python
"""List the runs of an experiment with their Slurm state (the controller's, squeue, while it knows
the job; else accounting, sacct) and whether their results exist; failed jobs come with the tail
of their log; a last line counts them (how far a submission without waiting has got). Below them,
the experiment's other runs under <results_root>/sweeps/ (single runs and sweeps of other settings,
made by hand: `train.py experiment=fig5/cpu ... launcher=slurm`, `-m ... launcher=slurm`),
newest last.

    python experiments/status.py experiment=fig5/cpu
    python experiments/status.py experiment=fig8/paper launcher=mycluster
"""

import os
import sys

from acco.config.experiments import CONF_DIR, SWEEPS, compose, expand_runs, in_variant_root
from acco.config.validate import ConfigError, check_overrides
from acco.harness.entry import fail_config, help_asked
from acco.harness.slurm.status import run_status

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main(argv: list[str]) -> int:
    if help_asked(argv, __doc__):
        return 0
    try:
        check_overrides(argv, CONF_DIR)
        base = compose(argv)
    except (ConfigError, ValueError) as exc:
        fail_config(str(exc).splitlines()[0])
    exp = base.get("experiment")
    if not exp:
        fail_config("name an experiment: experiment=<id>/<scale>")
    listed, _ = in_variant_root(argv, base)  # where submit.py put runs made with these overrides
    rows = [run_status(compose([*listed, *run], in_experiment=True)["out_dir"]) for run in expand_runs(exp)]
    known = {os.path.abspath(r["out_dir"]) for r in rows}
    others = [run_status(d) for d in other_runs(str(base["results_root"]), exp["id"], base["scale"], known)]
    print(f"{'job':>10s} {'slurm':>12s} {'result':>10s} {'steps':>6s}  run")
    show(rows)
    print(tally(rows))
    if others:
        print(f"other runs of {exp['id']}/{base['scale']} under {os.path.join(base['results_root'], SWEEPS)}/:")
        show(others)
        print(tally(others))
    return 0


def show(rows: list[dict]) -> None:
    for r in rows:
        print(
            f"{str(r['job_id'] or '-'):>10s} {r['slurm_state']:>12s} {r['result']:>10s} "
            f"{str(r['steps'] if r['steps'] is not None else '-'):>6s}  {r['out_dir']}"
        )
        for line in r["log_tail"]:
            print(f"    | {line}")


def other_runs(root: str, exp_id: str, scale: str, known: set[str]) -> list[str]:
    """The folders under <root>/sweeps/ of runs of this experiment and scale (their config.yaml says
    so) that are not `known`, oldest first."""
    import yaml

    found = []
    for folder, dirs, files in os.walk(os.path.join(root, SWEEPS)):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        if "config.yaml" not in files or os.path.abspath(folder) in known:
            continue
        try:
            with open(os.path.join(folder, "config.yaml")) as f:
                cfg = yaml.safe_load(f) or {}
        except (OSError, yaml.YAMLError):
            continue
        if (cfg.get("experiment") or {}).get("id") == exp_id and cfg.get("scale") == scale:
            found.append((os.path.getmtime(os.path.join(folder, "config.yaml")), folder))
        dirs[:] = []  # a run folder holds no runs
    return [folder for _, folder in sorted(found)]


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
