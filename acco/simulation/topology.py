"""A cluster's topology and the time of the syncs' collectives on it.

Ring collectives come from acco/analytic/costmodel.py (reduce-scatter: (n−1)α + (n−1)/n·S·β).
On N = g GPUs per node × n nodes they run hierarchically, as NCCL's tree/ring hierarchy does in
spirit: a reduce-scatter of S bytes is a ring over the g GPUs of each node on the intra-node link
(NVLink), then g concurrent rings over the n nodes, each on its S/g chunk, all sharing the node's
network link — so the node moves (n−1)/n·S bytes through its NIC:

    RS(S) = (g−1)α_intra + (g−1)/g·S/B_intra  +  (n−1)α_inter + (n−1)/n·S/B_inter
    AG(S) = the same;  AR(S) = RS(S) + AG(S)

With one node this is the flat ring on NVLink; with one GPU per node, the flat ring on the network.
B_inter is the node's usable network bandwidth (what nccl-tests reports as bus bandwidth, not the
line rate), α the per-step latency: both are inputs.

A sync (README "The rounds, drawn") = reduce-scatter of the gradients + the sharded optimizer step
+ all-gather of the parameters. Bytes per parameter follow Table 1 (acco/analytic/table1.py
TABLE1_FORMULAS): bf16 gradients and parameters, 2 bytes each (`grad_bytes=4` for fp32 gradients,
as the paper-scale figures' train.grad_dtype=fp32 and PyTorch's DDP send); the local methods send
the fp32 pseudo-gradient and gather fp32 φ (4 bytes each). By default the DDP baseline syncs one
flat buffer, as `method.impl=flat` and ACCO do (the schedules then differ in nothing else);
`ddp_bucket_mb=25` makes it go bucket by bucket as PyTorch's DDP does, each bucket paying the
collectives' latency terms again. The
optimizer step is memory-bound: bytes touched per parameter of the shard over the GPU's HBM
bandwidth (AdamW: fp32 master, m, v read and written + gradient read + bf16 parameter written
≈ 30 B; a tentative step (acco, wp) also saves and restores master, m, v: + 24 B). The local
methods' inner AdamW is not sharded: 30 B per parameter of the whole model, every inner step.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from acco.analytic.costmodel import PRESETS, Hardware, reduce_scatter_time
from acco.analytic.overlap import Buckets, ddp_limits

GBIT = 1e9 / 8  # bytes/s in one Gbit/s
# HBM bandwidth (bytes/s) of the presets' GPUs: vendor datasheets (A100 80GB SXM 2.0 TB/s,
# H100 SXM 3.35 TB/s, H200 4.8 TB/s)
HBM_BYTES_PER_S = {"A100": 2.0e12, "H100": 3.35e12, "H200": 4.8e12}
ADAMW_BYTES_PER_PARAM = 30.0
TENTATIVE_EXTRA_BYTES_PER_PARAM = 24.0
OUTER_SGD_BYTES_PER_PARAM = 20.0  # Nesterov: fp32 φ, momentum read+write, pseudo-gradient read


@dataclass(frozen=True)
class Topology:
    gpus_per_node: int
    nodes: int
    intra_bytes_per_s: float
    inter_bytes_per_s: float  # per node
    alpha_intra_s: float
    alpha_inter_s: float
    peak_flops: float
    mfu: float
    hbm_bytes_per_s: float
    memory_gb: float
    gpu: str = "A100"

    @property
    def workers(self) -> int:
        return self.gpus_per_node * self.nodes

    def describe(self) -> str:
        return (
            f"{self.nodes}x{self.gpus_per_node} {self.gpu} (N={self.workers}),"
            f" intra {self.intra_bytes_per_s / 1e9:g} GB/s,"
            f" inter {self.inter_bytes_per_s / GBIT:g} Gbit/s per node, α {self.alpha_intra_s * 1e6:g}/"
            f"{self.alpha_inter_s * 1e6:g} µs, MFU {self.mfu:g}"
        )


def topology(
    gpus_per_node: int = 8,
    nodes: int = 8,
    inter_gbps: float | None = None,
    gpu: str = "A100",
    intra_gbytes: float | None = None,
    mfu: float | None = None,
    alpha_intra_us: float | None = None,
    alpha_inter_us: float | None = None,
) -> Topology:
    """A topology from a hardware preset of acco/analytic/costmodel.py, with any field overridden
    (inter_gbps in Gbit/s per node, intra_gbytes in GB/s per GPU, α in µs)."""
    hw: Hardware = PRESETS[gpu]
    return Topology(
        int(gpus_per_node),
        int(nodes),
        hw.intra_bytes_per_s if intra_gbytes is None else intra_gbytes * 1e9,
        hw.inter_bytes_per_s if inter_gbps is None else inter_gbps * GBIT,
        hw.alpha_intra_s if alpha_intra_us is None else alpha_intra_us * 1e-6,
        hw.alpha_inter_s if alpha_inter_us is None else alpha_inter_us * 1e-6,
        hw.peak_flops,
        hw.mfu if mfu is None else mfu,
        HBM_BYTES_PER_S[gpu],
        hw.memory_gb,
        gpu,
    )


def reduce_scatter_s(nbytes: float, topo: Topology, buckets: int = 1) -> float:
    """Hierarchical reduce-scatter of `nbytes` (the same for an all-gather), in `buckets` pieces
    that each pay the latency terms."""
    g, n = topo.gpus_per_node, topo.nodes
    intra = reduce_scatter_time(nbytes, g, topo.alpha_intra_s * buckets, 1.0 / topo.intra_bytes_per_s)
    inter = reduce_scatter_time(nbytes, n, topo.alpha_inter_s * buckets, 1.0 / topo.inter_bytes_per_s)
    return intra + inter


def all_gather_s(nbytes: float, topo: Topology, buckets: int = 1) -> float:
    return reduce_scatter_s(nbytes, topo, buckets)


def all_reduce_s(nbytes: float, topo: Topology, buckets: int = 1) -> float:
    return 2 * reduce_scatter_s(nbytes, topo, buckets)


def sync_s(
    method: str,
    params: float,
    topo: Topology,
    grad_bytes: int = 2,
    param_bytes: int = 2,
    fragments: int = 1,
    ddp_bucket_mb: float = 0.0,
) -> float:
    """One sync of `method` (one fragment's for the local methods): reduce-scatter, the sharded
    optimizer step, all-gather."""
    n = topo.workers
    if method in ("diloco", "streaming_diloco"):
        frag = params / max(int(fragments), 1)
        opt = frag / n * OUTER_SGD_BYTES_PER_PARAM / topo.hbm_bytes_per_s
        return reduce_scatter_s(4 * frag, topo) + opt + all_gather_s(4 * frag, topo)
    buckets = 1
    if method == "ddp" and ddp_bucket_mb > 0:
        buckets = math.ceil(params * grad_bytes / (ddp_bucket_mb * 2**20))
    per_param = ADAMW_BYTES_PER_PARAM + (TENTATIVE_EXTRA_BYTES_PER_PARAM if method.startswith(("acco", "wp")) else 0)
    opt = params / n * per_param / topo.hbm_bytes_per_s
    return (
        reduce_scatter_s(grad_bytes * params, topo, buckets) + opt + all_gather_s(param_bytes * params, topo, buckets)
    )


def ddp_buckets(params: float, grad_bytes: int = 2, bucket_mb: float | None = None) -> Buckets:
    """PyTorch DDP's buckets (acco/analytic/overlap.py ddp_limits: a 1 MiB first bucket, then 25 MiB;
    `bucket_mb`: that size for every bucket) over a model whose parameters are spread evenly: the
    simulator knows the model's size, not its parameter list."""
    limits = ddp_limits(bucket_mb)
    entries: list[int] = []
    left = int(params)
    while left > 0:
        n = min(left, max(1, limits[min(len(entries), len(limits) - 1)] // grad_bytes))
        entries.append(n)
        left -= n
    return Buckets.from_sizes(entries)


def ddp_overlap_parts(
    params: float, topo: Topology, grad_bytes: int = 2, param_bytes: int = 2, bucket_mb: float | None = None
) -> tuple[Buckets, list[float], float]:
    """The flat engine's overlapped ddp (FSDP's and ZeRO's overlap alike): its buckets, each one's
    reduce-scatter (what the last backward can hide) and the tail nothing hides, the sharded AdamW
    step and the all-gather of the parameters. Their sum is sync_s("ddp") with one latency term per
    bucket more."""
    buckets = ddp_buckets(params, grad_bytes, bucket_mb)
    reduce = [reduce_scatter_s(grad_bytes * n, topo) for n in buckets.entries]
    opt = params / topo.workers * ADAMW_BYTES_PER_PARAM / topo.hbm_bytes_per_s
    return buckets, reduce, opt + all_gather_s(param_bytes * params, topo)


def inner_step_s(params: float, topo: Topology) -> float:
    """The local methods' inner AdamW step: unsharded, over the whole model, every inner step."""
    return params * ADAMW_BYTES_PER_PARAM / topo.hbm_bytes_per_s


def compute_s(flops: float, topo: Topology) -> float:
    """One micro-batch's forward + backward at the topology's MFU."""
    return flops / (topo.peak_flops * topo.mfu)
