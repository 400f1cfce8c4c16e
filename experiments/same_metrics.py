#!/usr/bin/env python
"""Check that a change leaves training bit-identical: short deterministic CPU runs of every method
and implementation (world 3, a slow rank, the virtual clock too) with the code of a git revision
and with the working tree, then their metrics.csv compared byte for byte. A restructure that should
not change what a run computes is checked this way before it lands.

    python experiments/same_metrics.py --base main
    python experiments/same_metrics.py --base HEAD~3 --only acco,acco_ws3 --out /tmp/same

wall_time_s is the machine's clock and is left out of the comparison, except in the virtual-clock
run, where it is the modelled time and must match too. Exit 0: every run identical; 1: a difference
or a run that failed (its log is named); 2: bad arguments."""

from __future__ import annotations

import argparse
import csv
import io
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COMMON = ["train.steps=12", "train.eval_every=0", "train.deterministic=true", "overwrite=true"]
# name -> overrides; each method, each impl, world 3, a slow rank, warmup, the virtual clock
CONFIGS: dict[str, list[str]] = {
    "ddp_torch": ["method=ddp", "world_size=2"],
    "ddp_torch_rs_ws3": ["method=ddp", "method.comm_hook=reduce_scatter", "world_size=3"],
    "ddp_flat": ["method=ddp", "method.impl=flat", "world_size=2"],
    "ddp_flat_overlap": ["method=ddp", "method.impl=flat", "method.overlap_backward=true", "world_size=2"],
    "dpu": ["method=dpu", "world_size=2"],
    "dpu_warmup": ["method=dpu", "method.warmup_steps=3", "world_size=2"],
    "wp_hetero": ["method=wp", "world_size=2", "hetero.slow_rank=1", "hetero.factor=2"],
    "acco": ["method=acco", "world_size=2"],
    "acco_accum4": ["method=acco", "train.accum=4", "world_size=2"],
    "acco_ws3": ["method=acco", "world_size=3"],
    "acco_virtual": [
        "method=acco",
        "world_size=2",
        "clock.mode=virtual",
        "clock.micro_batch_s=0.1",
        "clock.sync_s=0.05",
    ],
    "diloco": ["method=diloco", "method.sync_every=4", "world_size=2"],
    "streaming_diloco": [
        "method=streaming_diloco",
        "method.sync_every=4",
        "method.fragments=2",
        "method.overlap_steps=1",
        "world_size=2",
    ],
}
MODELLED_TIME = {"acco_virtual"}  # runs whose wall_time_s is the virtual clock's, compared too


def comparable(text: str, keep_time: bool) -> str:
    """metrics.csv's text, less its wall_time_s column unless `keep_time`."""
    if keep_time:
        return text
    rows = list(csv.reader(io.StringIO(text)))
    if not rows or "wall_time_s" not in rows[0]:
        return text
    i = rows[0].index("wall_time_s")
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(r[:i] + r[i + 1 :] for r in rows)
    return out.getvalue()


def differences(base_dir: str, new_dir: str, names: list[str]) -> list[str]:
    """One line per run whose metrics differ or are missing; empty when all are identical."""
    found = []
    for name in names:
        paths = [os.path.join(tree, name, "metrics.csv") for tree in (base_dir, new_dir)]
        missing = [side for side, path in zip(("the base", "the new"), paths) if not os.path.isfile(path)]
        if missing:
            found.append(f"{name}: no metrics.csv in {missing[0]} run")
            continue
        texts = [open(path).read() for path in paths]
        if comparable(texts[0], name in MODELLED_TIME) != comparable(texts[1], name in MODELLED_TIME):
            found.append(f"{name}: metrics differ ({base_dir}/{name} vs {new_dir}/{name})")
    return found


def run_all(code_root: str, out_dir: str, names: list[str]) -> list[str]:
    """Runs each config with the code under `code_root`; the names of the runs that failed."""
    failed = []
    env = {**os.environ, "PYTHONPATH": code_root}
    for name in names:
        log = os.path.join(out_dir, f"{name}.log")
        cmd = [sys.executable, "experiments/train.py", *CONFIGS[name], *COMMON, f"out_dir={out_dir}/{name}"]
        with open(log, "w") as f:
            rc = subprocess.call(cmd, cwd=code_root, env=env, stdout=f, stderr=subprocess.STDOUT)
        print(f"{'ran' if rc == 0 else 'FAILED'} {os.path.basename(out_dir)}/{name}" + (f" (see {log})" if rc else ""))
        if rc:
            failed.append(name)
    return failed


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--base", required=True, help="the git revision to compare against (main, HEAD~1, a hash)")
    p.add_argument("--only", default="", help=f"a comma list of: {', '.join(CONFIGS)} (default: all)")
    p.add_argument("--out", default=None, help="where the runs go (default: a new temporary folder)")
    a = p.parse_args(argv)
    names = [n for n in a.only.split(",") if n] or list(CONFIGS)
    unknown = [n for n in names if n not in CONFIGS]
    if unknown:
        print(f"same_metrics: unknown --only {','.join(unknown)}; choose from {', '.join(CONFIGS)}", file=sys.stderr)
        return 2
    rev = subprocess.run(
        ["git", "rev-parse", "--verify", "--quiet", a.base + "^{commit}"], cwd=ROOT, capture_output=True, text=True
    )
    if rev.returncode:
        print(
            f"same_metrics: --base {a.base!r} is not a commit of this repository; give a branch, tag or hash",
            file=sys.stderr,
        )
        return 2
    out = a.out or tempfile.mkdtemp(prefix="same_metrics-")
    code = os.path.join(out, "base-code")
    os.makedirs(code, exist_ok=True)
    archive = subprocess.Popen(["git", "archive", rev.stdout.strip()], cwd=ROOT, stdout=subprocess.PIPE)
    subprocess.check_call(["tar", "-x", "-C", code], stdin=archive.stdout)
    if archive.wait():
        print(f"same_metrics: git archive {a.base} failed", file=sys.stderr)
        return 1
    for tree, root in (("base", code), ("new", ROOT)):
        os.makedirs(os.path.join(out, tree), exist_ok=True)
        run_all(root, os.path.join(out, tree), names)
    found = differences(os.path.join(out, "base"), os.path.join(out, "new"), names)
    for line in found:
        print(line)
    print(f"{len(names) - len(found)} of {len(names)} identical to {a.base} ({rev.stdout.strip()[:8]}); runs in {out}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
