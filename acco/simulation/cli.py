"""`experiments/simulate.py`: the schedules simulated on one's own cluster, a table per method.

    python experiments/simulate.py --gpus-per-node 8 --nodes 16 --inter-gbps 100 --model 7b
    python experiments/simulate.py ... --stragglers lognormal:0.1 --csv out.csv
    python experiments/simulate.py --figures results/sim      # the figure set (analysis/simulation.py)
    python experiments/simulate.py --validation results/sim   # against the CPU runs in results/cpu

Bad input: one line naming the problem and the fix, exit code 2.
"""

from __future__ import annotations

import argparse
import csv
import sys
from collections.abc import Callable, Iterable, Mapping

from .models import MODELS
from .stragglers import parse as parse_stragglers
from .sweep import METHODS, Scenario, model, run
from .topology import HBM_BYTES_PER_S, topology

NOT_LOSS = "This simulation predicts time only, not loss: larger, fewer or staler steps train differently."


class BadInput(ValueError):
    pass


class OneLineParser(argparse.ArgumentParser):
    def error(self, message):  # argparse's usage block + message -> one line, exit 2
        raise BadInput(f"{message} (see --help)")


def parse_args(argv):
    p = OneLineParser(prog="simulate.py", description=__doc__.splitlines()[0])
    p.add_argument("--model", default="7b", help=f"one of {', '.join(MODELS)}")
    p.add_argument("--gpus-per-node", type=int, default=8)
    p.add_argument("--nodes", type=int, default=8)
    p.add_argument("--gpu", default="A100", help=f"hardware preset: {', '.join(HBM_BYTES_PER_S)}")
    p.add_argument("--inter-gbps", type=float, default=None, help="usable network bandwidth per node, Gbit/s")
    p.add_argument("--intra-gbytes", type=float, default=None, help="NVLink bandwidth per GPU, GB/s")
    p.add_argument("--alpha-intra-us", type=float, default=None)
    p.add_argument("--alpha-inter-us", type=float, default=None)
    p.add_argument("--mfu", type=float, default=None, help="model-FLOPs utilization (preset: 0.45)")
    p.add_argument("--micro-batch", type=int, default=None, help="sequences per micro-batch (model's default)")
    p.add_argument("--seq-len", type=int, default=None)
    p.add_argument("--accum", type=int, default=2, help="micro-batches per committed step per GPU (even)")
    p.add_argument("--grad-bytes", type=int, default=2, choices=(2, 4))
    p.add_argument("--ddp-bucket-mb", type=float, default=0.0, help="0: one flat buffer; 25: PyTorch DDP buckets")
    p.add_argument("--stragglers", default="none", help="none | lognormal:SIGMA | tail:P:FACTOR | slow_node:FACTOR")
    p.add_argument("--H", type=int, default=32, help="local methods: inner steps per sync")
    p.add_argument("--F", type=int, default=4, help="streaming DiLoCo: fragments")
    p.add_argument("--tau", type=int, default=1, help="streaming DiLoCo: inner steps a fragment's sync overlaps")
    p.add_argument("--rounds", type=int, default=200)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--methods", default=",".join(METHODS))
    p.add_argument("--csv", default=None, help="also write the rows to this CSV")
    p.add_argument("--figures", default=None, metavar="OUT", help="write the figure set to OUT and stop")
    p.add_argument("--validation", default=None, metavar="OUT", help="write the validation table to OUT and stop")
    p.add_argument("--results", default="results", help="results root the validation reads (its cpu/ runs)")
    return p.parse_args(argv)


def check(a) -> None:
    """Every problem the arguments can have, as one line, before anything is simulated."""
    if a.model.lower() not in MODELS:
        raise BadInput(f"unknown --model {a.model!r}: use one of {', '.join(MODELS)}")
    if a.gpu not in HBM_BYTES_PER_S:
        raise BadInput(f"unknown --gpu {a.gpu!r}: use one of {', '.join(HBM_BYTES_PER_S)}")
    if a.gpus_per_node < 1 or a.nodes < 1 or a.gpus_per_node * a.nodes < 2:
        raise BadInput(f"--gpus-per-node {a.gpus_per_node} x --nodes {a.nodes}: need at least 2 GPUs in all")
    for name in ("inter_gbps", "intra_gbytes", "micro_batch", "seq_len"):
        v = getattr(a, name)
        if v is not None and v <= 0:
            raise BadInput(f"--{name.replace('_', '-')} {v}: must be positive")
    for name in ("alpha_intra_us", "alpha_inter_us"):
        v = getattr(a, name)
        if v is not None and v < 0:
            raise BadInput(f"--{name.replace('_', '-')} {v}: must be 0 or more")
    if a.mfu is not None and not 0 < a.mfu <= 1:
        raise BadInput(f"--mfu {a.mfu}: a fraction of the peak, in (0, 1]")
    if a.accum < 2 or a.accum % 2:
        raise BadInput(f"--accum {a.accum}: must be even and >= 2 (ACCO does half of it per round)")
    if a.H < 1 or a.F < 1 or a.H % a.F or not 0 <= a.tau < a.H // a.F:
        raise BadInput(f"--H {a.H} --F {a.F} --tau {a.tau}: F must divide H and 0 <= tau < H/F")
    if a.rounds < 8:
        raise BadInput(f"--rounds {a.rounds}: at least 8")
    unknown = [m for m in a.methods.split(",") if m not in METHODS]
    if unknown or not a.methods:
        raise BadInput(f"unknown --methods {','.join(unknown)!r}: use a comma list of {', '.join(METHODS)}")
    if a.ddp_bucket_mb < 0:
        raise BadInput(f"--ddp-bucket-mb {a.ddp_bucket_mb}: 0 (one buffer) or a bucket size in MB")
    try:
        a.straggler_spec = parse_stragglers(a.stragglers)
    except ValueError as exc:
        raise BadInput(str(exc)) from None


def build(a) -> Scenario:
    from dataclasses import replace

    spec = model(a.model)
    if a.micro_batch or a.seq_len:
        spec = replace(spec, micro_batch=a.micro_batch or spec.micro_batch, seq_len=a.seq_len or spec.seq_len)
    topo = topology(
        a.gpus_per_node, a.nodes, a.inter_gbps, a.gpu, a.intra_gbytes, a.mfu, a.alpha_intra_us, a.alpha_inter_us
    )
    return Scenario(
        spec, topo, a.accum, a.grad_bytes, a.straggler_spec, a.H, a.F, a.tau, a.rounds, a.seed, a.ddp_bucket_mb
    )


COLUMNS = [
    ("method", "{}"),
    ("sync_s", "{:.3f}"),
    ("sync_over_compute", "{:.2f}"),
    ("step_s", "{:.3f}"),
    ("samples_per_s", "{:.1f}"),
    ("speedup_vs_ddp", "{:.2f}"),
    ("idle_fraction", "{:.2f}"),
    ("batch_per_step", "{:.0f}"),
    ("memory_gb", "{:.0f}"),
]


def table(rows: list[dict]) -> str:
    head = [c for c, _ in COLUMNS] + ["batch p5-p95", "fits"]
    lines = [head]
    for r in rows:
        cells = [fmt.format(r[c]) for c, fmt in COLUMNS]
        cells.append(f"{r['batch_p5']:.0f}-{r['batch_p95']:.0f}")
        cells.append("yes" if r["fits"] else "NO")
        lines.append(cells)
    widths = [max(len(str(line[i])) for line in lines) for i in range(len(head))]
    return "\n".join("  ".join(str(c).ljust(w) for c, w in zip(line, widths)) for line in lines)


def main(argv=None, writers: Mapping[str, Callable[[argparse.Namespace], Iterable[str]]] | None = None) -> int:
    """The command line. `writers` ("figures", "validation": the namespace -> the paths written)
    serve --figures and --validation; acco never imports analysis/, so the entry script passes them."""
    writers = writers or {}
    try:
        a = parse_args(sys.argv[1:] if argv is None else argv)
        check(a)
    except BadInput as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for name in ("figures", "validation"):  # written by analysis/, which experiments/simulate.py passes in
        if getattr(a, name):
            if name not in writers:
                print(f"error: --{name} is written by experiments/simulate.py (analysis/), not here", file=sys.stderr)
                return 2
            for path in writers[name](a):
                print(path)
            return 0
    sc = build(a)
    rows = run([sc], a.methods.split(","))
    print(
        f"{sc.model.name} ({sc.model.params / 1e9:.2f}B params, {sc.model.tokens} tokens per micro-batch), "
        f"{sc.topo.describe()}, {sc.stragglers.describe()}"
    )
    print(
        f"micro-batch {rows[0]['micro_batch_s']:.3f} s (6·Ψ·tokens at MFU {sc.topo.mfu:g}), "
        f"{a.accum} micro-batches per committed step per GPU; "
        f"memory = Table 1 model state, GPU {sc.topo.memory_gb:g} GB"
    )
    print(table(rows))
    print(NOT_LOSS)
    if a.csv:
        with open(a.csv, "w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    return 0
