"""`experiments/simulate.py`: the schedules simulated on one's own cluster, a table per method.

    python experiments/simulate.py --gpus-per-node 8 --nodes 16 --inter-gbps 100 --model 7b
    python experiments/simulate.py ... --stragglers lognormal:0.1 --csv out.csv
    python experiments/simulate.py --params 1e9 --layers 24 --step-time 0.1 --accum 1 \
        --gpus-per-node 8 --nodes 4 --replica-gpus 16 --outer-precision fp4 --H 100 --F 8 --layerwise
    python experiments/simulate.py ... --inter-busbw 192@2 --intra-busbw 232   # nccl-tests' busbw, GB/s
    python experiments/simulate.py ... --methods ddp,ddp:overlap_backward=true,acco:deterministic=false
    python experiments/simulate.py --figures results/sim      # the figure set
    python experiments/simulate.py --validation results/sim   # against the CPU runs in results/cpu

Bad input: one line naming the problem and the fix, exit code 2.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import io
import math
import sys
from collections.abc import Callable, Iterable, Mapping

from acco.methods import get as get_method

from . import fsdp
from .compute import MFU_TABLES, describe_compute, table_from
from .models import MODELS, custom
from .stragglers import parse as parse_stragglers
from .sweep import Scenario, applicable, bandwidth_for_utilization, model, run
from .topology import (
    HBM_BYTES_PER_S,
    PRECISION_BYTES,
    all_reduce_s,
    busbw_to_inter,
    replica_groups,
    topology,
)
from .variants import keys, modelled, resolve_keys
from .wan import DEFAULT_TCP_WINDOW_MB, links_from_args

NOT_LOSS = "This simulation predicts time only, not loss: larger, fewer or staler steps train differently."


class BadInput(ValueError):
    pass


class OneLineParser(argparse.ArgumentParser):
    def error(self, message):  # argparse's usage block + message -> one line, exit 2
        raise BadInput(f"{message} (see --help)")


def parse_args(argv):
    p = OneLineParser(prog="simulate.py", description=__doc__.splitlines()[0])
    p.add_argument("--model", default="7b", help=f"one of {', '.join(MODELS)} (or --params/--layers)")
    p.add_argument("--params", type=float, default=None, help="one's own model: parameter count Ψ (e.g. 1.3e9)")
    p.add_argument("--layers", type=int, default=None, help="one's own model: transformer layers")
    p.add_argument("--gpus-per-node", type=int, default=8)
    p.add_argument("--nodes", type=int, default=8)
    p.add_argument("--gpu", default="A100", help=f"hardware preset: {', '.join(HBM_BYTES_PER_S)}")
    p.add_argument(
        "--inter-gbps",
        default=None,
        metavar="GBPS[,GBPS...]",
        help="usable network bandwidth per node, Gbit/s: one value, or one per node (a ring: its slowest link); "
        "overrides --nics-per-node x --nic-gbps",
    )
    p.add_argument(
        "--inter-busbw",
        default=None,
        metavar="GBPS[@NODES]",
        help="instead: the busbw (GB/s) nccl-tests' all_reduce_perf printed across NODES nodes (default 2) of "
        "--gpus-per-node GPUs",
    )
    p.add_argument("--intra-gbytes", type=float, default=None, help="NVLink bandwidth per GPU, GB/s")
    p.add_argument("--intra-busbw", type=float, default=None, help="the same as nccl-tests' one-node busbw, GB/s")
    p.add_argument("--alpha-intra-us", type=float, default=None)
    p.add_argument("--alpha-inter-us", type=float, default=None)
    p.add_argument("--hbm-gbytes", type=float, default=None, help="HBM bandwidth, GB/s (optimizer steps)")
    p.add_argument(
        "--mfu", type=float, default=None, help="one model-FLOPs utilization for every shape (overrides the table)"
    )
    p.add_argument(
        "--step-time", type=float, default=None, help="measured seconds of one step's forward+backward on one GPU"
    )
    p.add_argument("--micro-batch", type=int, default=None, help="sequences per micro-batch (model's default)")
    p.add_argument("--seq-len", type=int, default=None)
    p.add_argument("--accum", type=int, default=2, help="micro-batches per committed step per GPU (ACCO: even)")
    p.add_argument("--grad-precision", default=None, choices=list(PRECISION_BYTES), help="gradients reduced (bf16)")
    p.add_argument("--grad-bytes", type=int, default=None, choices=(2, 4), help="the same in bytes: 2 bf16, 4 fp32")
    p.add_argument("--param-precision", default="bf16", choices=list(PRECISION_BYTES), help="parameters gathered")
    p.add_argument("--outer-precision", default="fp32", choices=list(PRECISION_BYTES), help="outer gradients")
    p.add_argument("--outer-compression", type=float, default=1.0, help="outer payload divided by this (>= 1)")
    p.add_argument("--replica-gpus", type=int, default=1, help="GPUs per DiLoCo replica (sharded inside it)")
    p.add_argument("--layerwise", action="store_true", help="local methods: layer-wise fragments (need --layers)")
    p.add_argument(
        "--fragment-pattern", default="sequential", choices=("sequential", "strided"), help="layer-wise fragments"
    )
    p.add_argument(
        "--prefetch", action="store_true", help="ddp, ddp_overlap, replicas: gather prefetched under the forward"
    )
    p.add_argument("--contention", default="0", metavar="C[,S]", help="compute (and sync) slowdown when overlapped")
    p.add_argument("--no-optimizer", action="store_true", help="optimizer steps take no time")
    p.add_argument("--ddp-bucket-mb", type=float, default=0.0, help="0: one flat buffer; 25: PyTorch DDP buckets")
    p.add_argument("--stragglers", default="none", help="none | lognormal:SIGMA | tail:P:FACTOR | slow_node:FACTOR")
    p.add_argument("--H", type=int, default=32, help="local methods: inner steps per sync")
    p.add_argument("--F", type=int, default=4, help="streaming DiLoCo: fragments")
    p.add_argument("--tau", type=int, default=1, help="streaming DiLoCo: inner steps a fragment's sync overlaps")
    p.add_argument("--rounds", type=int, default=200)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--methods",
        default=None,
        help="comma list, as the trainer spells them (ddp:overlap_backward=true, acco:deterministic=false) or "
        "by their result keys (ddp_overlap, acco_adaptive); default: every one",
    )
    p.add_argument(
        "--find-bandwidth",
        type=float,
        default=None,
        metavar="CU",
        help="instead: the inter-node Gbit/s each method needs to reach compute utilization CU (e.g. 0.95)",
    )
    # wide-area links: jitter, TCP over a long RTT, CPU quantisation
    p.add_argument("--link-jitter", default="none", help="per outer sync, each link x a log-normal: none | lognormal:S")
    p.add_argument("--rtt-ms", type=float, default=0.0, help="round trip between nodes, ms: TCP caps a link (0: none)")
    p.add_argument("--streams", type=int, default=1, help="TCP streams per link (each carries window/RTT)")
    p.add_argument(
        "--tcp-window-mb", type=float, default=DEFAULT_TCP_WINDOW_MB, help="a TCP stream's window, MiB (Linux's 4)"
    )
    p.add_argument(
        "--quantize-gbytes", type=float, default=0.0, help="CPU (de)quantisation of the outer payload, GB/s (0: free)"
    )
    # FSDP: prefetch and no_sync of the fsdp methods
    p.add_argument(
        "--forward-prefetch",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="fsdp methods: next layer's gather beside this layer's forward (off: a CPU-bound run, all exposed)",
    )
    p.add_argument(
        "--backward-prefetch",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="fsdp: next layer's gather before this layer's gradients (BACKWARD_PRE; off: after its reduce-scatter)",
    )
    p.add_argument(
        "--fsdp-no-sync", action="store_true", help="fsdp methods: reduce-scatter the last micro-batch only (no_sync)"
    )
    # cluster networks: NICs per node, each NIC's usable Gbit/s
    p.add_argument(
        "--nics-per-node", type=int, default=None, help="NICs per node (preset: 8; A100-40GB 4; 1: one link per node)"
    )
    p.add_argument("--nic-gbps", type=float, default=None, help="usable Gbit/s per NIC (preset: A100 200, H100 400)")
    # compute by the micro-batch's shape: MFU table, recomputation
    p.add_argument(
        "--mfu-table",
        default=None,
        metavar="FILE|NAME",
        help="MFU by micro-batch tokens: a CSV of tokens,mfu rows, or a built-in table "
        f"({', '.join(MFU_TABLES)}); default: the preset's",
    )
    p.add_argument(
        "--recompute", action="store_true", help="activation recomputation: one more forward per micro-batch (x4/3)"
    )
    p.add_argument("--csv", default=None, help="also write the rows to this CSV")
    p.add_argument("--figures", default=None, metavar="OUT", help="write the figure set to OUT and stop")
    p.add_argument("--validation", default=None, metavar="OUT", help="write the validation table to OUT and stop")
    p.add_argument("--results", default="results", help="results root the validation reads (its cpu/ runs)")
    return p.parse_args(argv)


def _positive(a, names):
    for name in names:
        v = getattr(a, name)
        if v is not None and v <= 0:
            raise BadInput(f"--{name.replace('_', '-')} {v:g}: must be positive")


def check(a) -> None:
    """Every problem the arguments can have, as one line, before anything is simulated."""
    if a.params is None and a.model.lower() not in MODELS:
        raise BadInput(f"unknown --model {a.model!r}: use one of {', '.join(MODELS)} or --params/--layers")
    if (a.params is None) != (a.layers is None):
        raise BadInput("--params and --layers go together (one's own model: its parameter count and its layers)")
    if a.gpu not in HBM_BYTES_PER_S:
        raise BadInput(f"unknown --gpu {a.gpu!r}: use one of {', '.join(HBM_BYTES_PER_S)}")
    if a.gpus_per_node < 1 or a.nodes < 1 or a.gpus_per_node * a.nodes < 2:
        raise BadInput(f"--gpus-per-node {a.gpus_per_node} x --nodes {a.nodes}: need at least 2 GPUs in all")
    try:  # wide-area links: a --inter-gbps list becomes its slowest node's and each node's share
        a.inter_gbps, a.links = links_from_args(a)
    except ValueError as exc:
        raise BadInput(str(exc)) from None
    _positive(a, ("inter_gbps", "intra_gbytes", "intra_busbw", "micro_batch", "seq_len", "params", "layers"))
    _positive(a, ("step_time", "hbm_gbytes", "nic_gbps"))
    if a.nics_per_node is not None and a.nics_per_node < 1:
        raise BadInput(f"--nics-per-node {a.nics_per_node}: at least 1 NIC per node")
    if a.nic_gbps is not None and (a.inter_gbps is not None or a.inter_busbw is not None):
        raise BadInput("--nic-gbps and --inter-gbps/--inter-busbw both set the network's bandwidth: give one")
    if a.nics_per_node is not None and a.inter_busbw is not None:
        raise BadInput("--inter-busbw gives the node's bandwidth as its rings measured it: leave --nics-per-node out")
    for name in ("alpha_intra_us", "alpha_inter_us"):
        v = getattr(a, name)
        if v is not None and v < 0:
            raise BadInput(f"--{name.replace('_', '-')} {v}: must be 0 or more")
    if a.mfu is not None and not 0 < a.mfu <= 1:
        raise BadInput(f"--mfu {a.mfu}: a fraction of the peak, in (0, 1]")
    a.mfu_table_spec = None
    if a.mfu_table is not None:
        if a.mfu is not None:
            raise BadInput("--mfu is one MFU for every shape, --mfu-table one by tokens: give one")
        try:
            a.mfu_table_spec = table_from(a.mfu_table)
        except ValueError as exc:
            raise BadInput(str(exc)) from None
    if a.recompute and a.step_time is not None:
        raise BadInput("--recompute with --step-time: a measured step already holds its recomputation")
    if a.intra_gbytes is not None and a.intra_busbw is not None:
        raise BadInput("--intra-gbytes and --intra-busbw say the same thing: give one")
    a.busbw = None
    if a.inter_busbw is not None:
        if a.inter_gbps is not None:
            raise BadInput("--inter-gbps and --inter-busbw say the same thing: give one")
        value, _, nodes = str(a.inter_busbw).partition("@")
        try:
            a.busbw = (float(value), int(nodes or 2))
        except ValueError:
            raise BadInput(f"--inter-busbw {a.inter_busbw!r}: GB/s as nccl-tests prints it, e.g. 192@2") from None
        if a.busbw[0] <= 0 or a.busbw[1] < 2:
            raise BadInput(f"--inter-busbw {a.inter_busbw!r}: a positive busbw measured across at least 2 nodes")
    if a.accum < 1:
        raise BadInput(f"--accum {a.accum}: at least 1 micro-batch per committed step")
    if a.H < 1 or a.F < 1 or a.tau < 0:
        raise BadInput(f"--H {a.H} --F {a.F} --tau {a.tau}: H >= 1, F >= 1 fragments and tau >= 0 inner steps")
    if a.find_bandwidth is not None and not 0 < a.find_bandwidth < 1:
        raise BadInput(f"--find-bandwidth {a.find_bandwidth:g}: a compute utilization in (0, 1), e.g. 0.95")
    if a.rounds < 8:
        raise BadInput(f"--rounds {a.rounds}: at least 8")
    notices = io.StringIO()  # an old key's new spelling, said once the arguments are found good
    try:  # the trainer's spellings, or the result keys
        with contextlib.redirect_stderr(notices):
            a.method_keys = resolve_keys(a.methods.split(",")) if a.methods is not None else list(keys())
    except ValueError as exc:
        raise BadInput(f"--methods: {str(exc).removeprefix('simulate: ')}") from None
    if a.ddp_bucket_mb < 0:
        raise BadInput(f"--ddp-bucket-mb {a.ddp_bucket_mb}: 0 (one buffer) or a bucket size in MB")
    if a.outer_compression < 1:
        raise BadInput(f"--outer-compression {a.outer_compression:g}: a ratio >= 1 (the payload is divided by it)")
    if a.grad_precision is not None and a.grad_bytes is not None:
        raise BadInput("--grad-precision and --grad-bytes say the same thing: give one")
    try:
        parts = [float(x) for x in str(a.contention).split(",")]
    except ValueError:
        raise BadInput(f"--contention {a.contention!r}: C or C,S (slowdown fractions, e.g. 0.1,0.5)") from None
    if not 1 <= len(parts) <= 2 or min(parts) < 0:
        raise BadInput(f"--contention {a.contention!r}: C or C,S, fractions >= 0 (e.g. 0.1,0.5)")
    a.contention_terms = (parts[0], parts[1] if len(parts) > 1 else 0.0)
    N = a.gpus_per_node * a.nodes
    if a.replica_gpus < 1 or N % a.replica_gpus or N // a.replica_gpus < 2:
        raise BadInput(f"--replica-gpus {a.replica_gpus}: must divide the {N} GPUs into at least 2 replicas")
    if a.replica_gpus > 1:
        try:
            replica_groups(topology(a.gpus_per_node, a.nodes), a.replica_gpus)
        except ValueError as exc:
            raise BadInput(f"--replica-gpus {a.replica_gpus}: {exc}") from None
    layers = a.layers if a.params is not None else MODELS[a.model.lower()].layers
    if a.layerwise and layers < a.F:
        raise BadInput(f"--layerwise with --F {a.F}: needs at least one layer per fragment ({layers} layers)")
    methods = a.method_keys
    if not any(a.accum % modelled(m).rounds_per_step == 0 for m in methods):
        raise BadInput(f"--accum {a.accum}: {_split_rounds(methods, a.accum)}")
    fsdp_problem = fsdp.problem(methods, a.accum, a.forward_prefetch, a.backward_prefetch, a.fsdp_no_sync)
    if fsdp_problem:
        raise BadInput(fsdp_problem)
    try:
        a.straggler_spec = parse_stragglers(a.stragglers)
    except ValueError as exc:
        raise BadInput(str(exc)) from None
    sys.stderr.write(notices.getvalue())


def _split_rounds(methods: list[str], accum: int) -> str:
    """Why `methods` cannot split `accum` micro-batches between their rounds ("ACCO needs an even
    --accum: half a step per round")."""
    needs: dict[int, list[str]] = {}
    for m in methods:
        facts = modelled(m)
        if accum % facts.rounds_per_step:
            name = get_method(facts.variant.method).label if facts.variant.method else m
            needs.setdefault(facts.rounds_per_step, []).append(name)
    return "; ".join(f"{'/'.join(dict.fromkeys(names))} needs {_divisible(r)}" for r, names in needs.items())


def _divisible(rounds: int) -> str:
    if rounds == 2:
        return "an even --accum: half a step per round"
    return f"--accum divisible by {rounds}: 1/{rounds} of a step per round"


def build(a) -> Scenario:
    from dataclasses import replace

    if a.params is not None:
        spec = custom(a.params, a.layers, a.micro_batch or 1, a.seq_len or 2048)
    else:
        spec = model(a.model)
        if a.micro_batch or a.seq_len:
            spec = replace(spec, micro_batch=a.micro_batch or spec.micro_batch, seq_len=a.seq_len or spec.seq_len)
    intra = a.intra_busbw if a.intra_busbw is not None else a.intra_gbytes
    topo = topology(
        a.gpus_per_node,
        a.nodes,
        a.inter_gbps,
        a.gpu,
        intra,
        a.mfu,
        a.alpha_intra_us,
        a.alpha_inter_us,
        a.hbm_gbytes,
        nics_per_node=a.nics_per_node,
        nic_gbps=a.nic_gbps,
        mfu_table=a.mfu_table_spec,
    )
    if a.busbw:
        try:
            inter = busbw_to_inter(a.busbw[0], a.gpus_per_node, a.busbw[1], topo.intra_bytes_per_s)
        except ValueError as exc:
            raise BadInput(str(exc)) from None
        topo = replace(topo, inter_bytes_per_s=inter, nics_per_node=1)  # what the node's rings measured
    grad = (
        PRECISION_BYTES[a.grad_precision]
        if a.grad_precision
        else float(a.grad_bytes)
        if a.grad_bytes
        else PRECISION_BYTES["bf16"]
    )
    return Scenario(
        spec,
        topo,
        a.accum,
        grad,
        a.straggler_spec,
        a.H,
        a.F,
        a.tau,
        a.rounds,
        a.seed,
        a.ddp_bucket_mb,
        param_bytes=PRECISION_BYTES[a.param_precision],
        outer_bytes=PRECISION_BYTES[a.outer_precision],
        outer_compression=a.outer_compression,
        replica_gpus=a.replica_gpus,
        layerwise=a.layerwise,
        strided=a.fragment_pattern == "strided",
        prefetch=a.prefetch,
        contention=a.contention_terms[0],
        sync_contention=a.contention_terms[1],
        step_time_s=a.step_time or 0.0,
        optimizer=not a.no_optimizer,
        links=a.links,
        forward_prefetch=a.forward_prefetch,
        backward_prefetch=a.backward_prefetch,
        fsdp_no_sync=a.fsdp_no_sync,
        recompute=a.recompute,
    )


COLUMNS = [
    ("method", "{}"),
    ("sync_s", "{:.3f}"),
    ("sync_over_compute", "{:.2f}"),
    ("step_s", "{:.3f}"),
    ("samples_per_s", "{:.1f}"),
    ("tokens_per_s_per_gpu", "{:.0f}"),
    ("speedup_vs_ddp", "{:.2f}"),
    ("idle_fraction", "{:.2f}"),
    ("batch_per_step", "{:.0f}"),
    ("memory_gb", "{:.0f}"),
]


def table(rows: list[dict]) -> str:
    outer = any(not math.isnan(r.get("outer_sync_p50_s", math.nan)) for r in rows)  # local methods
    head = [c for c, _ in COLUMNS] + ["batch p5-p95", "fits"] + (["outer sync p50/p90 s"] if outer else [])
    lines = [head]
    for r in rows:
        cells = [fmt.format(r[c]) for c, fmt in COLUMNS]
        cells.append(f"{r['batch_p5']:.0f}-{r['batch_p95']:.0f}")
        cells.append("yes" if r["fits"] else "NO")
        if outer:
            p50 = r.get("outer_sync_p50_s", math.nan)
            cells.append("-" if math.isnan(p50) else f"{p50:.3f}/{r['outer_sync_p90_s']:.3f}")
        lines.append(cells)
    widths = [max(len(str(line[i])) for line in lines) for i in range(len(head))]
    return "\n".join("  ".join(str(c).ljust(w) for c, w in zip(line, widths)) for line in lines)


def busbw(topo, nbytes: float = 10 * 2**30) -> float:
    """The bus bandwidth nccl-tests' all_reduce_perf would report for this model's all-reduce (GB/s)."""
    n = topo.workers
    return 2 * (n - 1) / n * nbytes / all_reduce_s(nbytes, topo) / 1e9


def describe_payload(sc: Scenario) -> str:
    names: dict[float, str] = {}  # fp8/int8, fp4/int4: the same bytes, all the simulation knows
    for k, v in PRECISION_BYTES.items():
        names[v] = f"{names[v]}/{k}" if v in names else k
    outer = names.get(sc.outer_bytes, f"{sc.outer_bytes:g} B")
    line = (
        f"payload: gradients {names.get(sc.grad_bytes, sc.grad_bytes)}, parameters "
        f"{names.get(sc.param_bytes, sc.param_bytes)}, outer gradients {outer}"
        + (f" / {sc.outer_compression:g}" if sc.outer_compression != 1 else "")
    )
    if sc.replica_gpus > 1:
        line += f"; DiLoCo replicas of {sc.replica_gpus} GPUs ({sc.replicas} replicas, sharded inside)"
    if sc.layerwise:
        line += f"; layer-wise fragments ({sc.model.layers} layers{', strided' if sc.strided else ''})"
    if sc.prefetch:
        line += "; gather prefetched under the forward"
    fsdp_off = [name for name, on in (("forward", sc.forward_prefetch), ("backward", sc.backward_prefetch)) if not on]
    if fsdp_off or sc.fsdp_no_sync:
        line += "; FSDP: " + ", ".join([f"no {name} prefetch" for name in fsdp_off] + ["no_sync"] * sc.fsdp_no_sync)
    if sc.contention or sc.sync_contention:
        line += f"; contention: compute +{sc.contention:.0%}, sync +{sc.sync_contention:.0%} when overlapped"
    return line


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
    for name in ("figures", "validation"):  # written by analysis/, which the simulate command passes in
        if getattr(a, name):
            if name not in writers:
                print(f"error: --{name} is written by experiments/simulate.py (analysis/), not here", file=sys.stderr)
                return 2
            for path in writers[name](a):
                print(path)
            return 0
    try:
        sc = build(a)
    except BadInput as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    methods = a.method_keys
    rows = run([sc], methods)
    print(
        f"{sc.model.name} ({sc.model.params / 1e9:.3g}B params, {sc.model.tokens} tokens per micro-batch), "
        f"{sc.topo.describe()}, {sc.stragglers.describe()}"
    )
    source = "measured step time" if sc.step_time_s else describe_compute(sc.topo, sc.model.tokens, sc.recompute)
    print(
        f"micro-batch {rows[0]['micro_batch_s']:.3f} s ({source}), "
        f"{a.accum} micro-batches per committed step per GPU; "
        f"memory = Table 1 model state, GPU {sc.topo.memory_gb:g} GB"
    )
    print(describe_payload(sc))
    if not sc.links.uniform:
        print(sc.links.describe(sc.topo))
    links = sc.links.effective(sc.topo)  # the slowest link, TCP-capped
    print(f"all-reduce of 10 GiB over the {sc.topo.workers} GPUs: busbw {busbw(links):.1f} GB/s (as nccl-tests)")
    skipped = [m for m in methods if not applicable(m, sc)]
    if skipped:
        print(f"not simulated: {', '.join(skipped)} ({_split_rounds(skipped, a.accum)})")
    if a.find_bandwidth is not None:
        print(f"inter-node bandwidth each method needs for a compute utilization of {a.find_bandwidth:.0%}:")
        for m in (m for m in methods if applicable(m, sc)):
            need, top = bandwidth_for_utilization(sc, m, a.find_bandwidth)
            shown = f"{need:.3g} Gbit/s per node" if math.isfinite(need) else f"not reached (at most {top:.1%})"
            print(f"  {m:<17} {shown}")
        print(NOT_LOSS)
        return 0
    print(table(rows))
    print(NOT_LOSS)
    if a.csv:
        with open(a.csv, "w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    return 0
