"""A cluster's topology and the time of the syncs' collectives on it.

Ring collectives come from the cost model (reduce-scatter: (n−1)α + (n−1)/n·S·β).
On N = g GPUs per node × n nodes they run hierarchically, as NCCL's tree/ring hierarchy does in
spirit: a reduce-scatter of S bytes is a ring over the g GPUs of each node on the intra-node link
(NVLink), then g concurrent rings over the n nodes, each on its S/g chunk, all sharing the node's
network link — so the node moves (n−1)/n·S bytes through its NIC:

    RS(S) = (g−1)α_intra + (g−1)/g·S/B_intra  +  (n−1)α_inter + (n−1)/n·S/B_inter
    AG(S) = the same;  AR(S) = RS(S) + AG(S)

With one node this is the flat ring on NVLink; with one GPU per node, the flat ring on the network.
The two phases are added: NCCL pipelines them, so where both matter the model is pessimistic (the
validation's nccl-tests rows say by how much). B_inter is the node's usable network bandwidth (what
nccl-tests reports as bus bandwidth, not the line rate; `busbw_to_inter` converts a measured
multi-node busbw), α the per-step latency: both are inputs.

**Groups.** A collective can run over a group of the GPUs (`Group`): the GPUs of one DiLoCo replica
(sharded data parallel inside it, every inner step) or the GPUs that hold the same shard in every
replica (the outer sync between replicas: G rings, one per shard of a replica of G GPUs, all sharing
each node's NIC). `group_reduce_scatter_s` is the formula above for a group of `a` members per node
over `k` nodes whose node carries `c` such groups' traffic.

**A sync** (docs/rounds.md "The rounds, drawn") = reduce-scatter of the gradients + the sharded optimizer
step + all-gather of the parameters, in that order (`SyncParts`): the step needs the reduced shard
and the gather carries its result, so ZeRO-1's AdamW step sits on the critical path between the two
collectives, on the compute lane (it is GPU work), and nothing hides it in a data-parallel step. What a
schedule can hide is the gather (FSDP-style prefetch under the next forward: schedules.exposed_sync)
and, in the last backward, the reduction (the DDP overlap of issue 40). The overlapped methods
(dpu, wp, acco) run all three beside the next round's compute, on the communication stream.

**Payload precision** (`PRECISION_BYTES`: fp32 4, bf16 2, fp8 and int8 1, fp4 and int4 0.5 bytes per value): the
gradients reduced (default bf16, Table 1; fp32 as `train.grad_dtype=fp32` and PyTorch's DDP send),
the parameters gathered (bf16), and the local methods' outer gradients (default fp32, as this repo's
DiLoCo sends them; bf16/fp8/fp4 and a compression ratio as the DiLoCo papers send them), all-reduced
at that precision (reduce-scatter + all-gather of the payload; each replica applies the outer step).
By default the DDP baseline syncs one flat buffer, as `method.impl=flat` and ACCO do;
`ddp_bucket_mb=25` makes it go bucket by bucket as PyTorch's DDP does. Buckets issued back to back
pipeline their ring latency behind the bytes before them (queued_s:
`ring_latency_s` once, not once per bucket), so after the backward they cost what one buffer does;
where the backward hides them (`ddp_overlap_parts`) a bucket that finds the link idle pays it again.

**Optimizer steps** are memory-bound: bytes touched per parameter of the shard over the GPU's HBM
bandwidth (AdamW: fp32 master, m, v read and written + gradient read + bf16 parameter written
≈ 30 B; a tentative step (acco, wp) also saves and restores master, m, v: + 24 B). The local
methods' inner AdamW: over the whole model when a replica is one GPU, over its shard (1/G) when a
replica is G GPUs (sharded data parallel inside the replica).

**Presets** (`SIM_PRESETS`, the simulator's own; the cost model's `PRESETS` are the paper-model
ones its fig4 and Table 3 arithmetic use): A100 NVLink as the bus bandwidth nccl-tests measures
on 8 A100 (232 GB/s all_reduce busbw, 10 GiB, BM.GPU4.8: oracle-japan/ocitutorials,
content/hpc/benchmark/run-nccltests-ubuntu/index.md) instead of the 300 GB/s line rate; MFU on the
6·Ψ·tokens count as a function of the micro-batch's tokens (compute.py's tables, each point sourced
there; `mfu`, a constant, overrides them), anchored on torchtitan's published runs — A100 0.45 at
1 × 8192 tokens (Llama 3 8B, FSDP on 64 A100: 2904 tokens/s/GPU, pytorch/torchtitan
docs/performance.md as of 2024), H100/H200 0.30 at 2 × 8192 (Llama 3.1 8B, FSDP on 8 H100:
5,762–6,667 tokens/s/GPU without/with torch.compile, the same file as of 2024-12; 6·8.03e9·tokens/s
/ 989 TFLOP/s = 0.28–0.32) — and lower at 4096 tokens (A100 0.425, H100 0.261); `Topology.mfu`
keeps the anchor. The network between nodes is NICs per node × each
NIC's Gbit/s (networks.py, sourced there): A100 8 × 200 (DGX A100), A100-40GB 4 × 100 (AWS
p4d.24xlarge: A100 40GB, HBM 1.555 TB/s, NVLink and MFU as the A100's, 40 GB), H100/H200 8 × 400
(DGX H100/H200, AWS p5); B_inter above is what the node's rings get of it: min(rings, NICs) NICs
(`Group`: a node's rings are its members × the groups sharing it). `--nics-per-node 1` is one link
per node (the model before issue 51); `--inter-gbps` or `--inter-busbw` set one's own.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from acco.analytic.costmodel import PRESETS, Hardware, reduce_scatter_time
from acco.analytic.overlap import Buckets, back_to_back_s, ddp_limits

from .compute import MfuTable, preset_table
from .networks import NETWORKS, rings_bytes_per_s
from .variants import LOCAL, SEQUENTIAL, modelled

GBIT = 1e9 / 8  # bytes/s in one Gbit/s
# HBM bandwidth (bytes/s) of the presets' GPUs: vendor datasheets (A100 80GB SXM 2.0 TB/s, A100
# 40GB SXM 1.555 TB/s, H100 SXM 3.35 TB/s, H200 4.8 TB/s)
HBM_BYTES_PER_S = {"A100": 2.0e12, "A100-40GB": 1.555e12, "H100": 3.35e12, "H200": 4.8e12}
ADAMW_BYTES_PER_PARAM = 30.0
TENTATIVE_EXTRA_BYTES_PER_PARAM = 24.0
OUTER_SGD_BYTES_PER_PARAM = 20.0  # Nesterov: fp32 φ, momentum read+write, pseudo-gradient read
# int8/int4: the integer payloads of quantised outer gradients (the WAN model's CPU-side quantisation)
PRECISION_BYTES = {"fp32": 4.0, "bf16": 2.0, "fp8": 1.0, "fp4": 0.5, "int8": 1.0, "int4": 0.5}
# the simulator's presets: costmodel's hardware with the sourced corrections of the module docstring
SIM_PRESETS: dict[str, Hardware] = {
    "A100": replace(PRESETS["A100"], intra_bytes_per_s=232e9, mfu=0.45),
    "H100": replace(PRESETS["H100"], mfu=0.30),
    "H200": replace(PRESETS["H200"], mfu=0.30),
}
# A100 40GB SXM: the A100's compute, NVLink (the 232 GB/s busbw was measured on BM.GPU4.8's 40 GB
# A100s) and MFU, 40 GB of memory
SIM_PRESETS["A100-40GB"] = replace(SIM_PRESETS["A100"], name="A100 40GB", memory_gb=40.0)
# the network between nodes: NICs per node × per-NIC Gbit/s (NETWORKS), the node's total here
for _gpu, _net in NETWORKS.items():
    _name = f"{_gpu} ({_net.nics_per_node} x {_net.nic_gbps:g} Gb/s between nodes)"
    SIM_PRESETS[_gpu] = replace(SIM_PRESETS[_gpu], name=_name, inter_bytes_per_s=_net.node_bytes_per_s)


def precision_bytes(name: str) -> float:
    if name not in PRECISION_BYTES:
        raise ValueError(f"unknown precision {name!r}: use one of {', '.join(PRECISION_BYTES)}")
    return PRECISION_BYTES[name]


@dataclass(frozen=True)
class Topology:
    gpus_per_node: int
    nodes: int
    intra_bytes_per_s: float
    inter_bytes_per_s: float  # per node, all its NICs together
    alpha_intra_s: float
    alpha_inter_s: float
    peak_flops: float
    mfu: float
    hbm_bytes_per_s: float
    memory_gb: float
    gpu: str = "A100"
    nics_per_node: int = 1  # inter_bytes_per_s spread over them
    mfu_table: MfuTable | None = None  # MFU by micro-batch tokens; None: `mfu` throughout

    @property
    def workers(self) -> int:
        return self.gpus_per_node * self.nodes

    def mfu_at(self, tokens: float | None = None) -> float:
        """The MFU of a micro-batch of `tokens`: the table's where there is one, else `mfu`."""
        return self.mfu_table.at(tokens) if self.mfu_table is not None and tokens else self.mfu

    def inter_for(self, rings: int) -> float:
        """The bandwidth (bytes/s) `rings` concurrent rings across nodes get of a node's network:
        min(rings, NICs) of its NICs (networks.rings_bytes_per_s)."""
        return rings_bytes_per_s(self.inter_bytes_per_s, self.nics_per_node, rings)

    def describe(self) -> str:
        return (
            f"{self.nodes}x{self.gpus_per_node} {self.gpu} (N={self.workers}),"
            f" intra {self.intra_bytes_per_s / 1e9:g} GB/s,"
            f" inter {self.inter_bytes_per_s / GBIT:g} Gbit/s per node"
            + (f" ({self.nics_per_node} NICs)" if self.nics_per_node > 1 else "")
            + f", α {self.alpha_intra_s * 1e6:g}/"
            f"{self.alpha_inter_s * 1e6:g} µs, "
            + (f"MFU by tokens ({self.mfu_table.name} table)" if self.mfu_table is not None else f"MFU {self.mfu:g}")
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
    hbm_gbytes: float | None = None,
    nics_per_node: int | None = None,
    nic_gbps: float | None = None,
    mfu_table: MfuTable | None = None,
) -> Topology:
    """A topology from a simulator preset (SIM_PRESETS), with any field overridden (inter_gbps in
    Gbit/s per node, intra_gbytes in GB/s per GPU, α in µs, hbm_gbytes in GB/s). The network: the
    preset's NICs (NETWORKS) with `nics_per_node` and `nic_gbps` (usable Gbit/s per NIC)
    overriding either; `inter_gbps`, the node's total, overrides NICs × per-NIC and is one link
    every ring uses unless `nics_per_node` is given too (then it is spread over those NICs). MFU: the
    preset's table by micro-batch tokens, or `mfu_table`; a constant `mfu` overrides both."""
    hw: Hardware = SIM_PRESETS[gpu]
    net = NETWORKS[gpu]
    if inter_gbps is not None:
        nics, inter = int(nics_per_node or 1), inter_gbps * GBIT
    else:
        nics = int(nics_per_node or net.nics_per_node)
        inter = nics * (net.nic_gbps if nic_gbps is None else nic_gbps) * GBIT
    return Topology(
        int(gpus_per_node),
        int(nodes),
        hw.intra_bytes_per_s if intra_gbytes is None else intra_gbytes * 1e9,
        inter,
        hw.alpha_intra_s if alpha_intra_us is None else alpha_intra_us * 1e-6,
        hw.alpha_inter_s if alpha_inter_us is None else alpha_inter_us * 1e-6,
        hw.peak_flops,
        hw.mfu if mfu is None else mfu,
        HBM_BYTES_PER_S[gpu] if hbm_gbytes is None else hbm_gbytes * 1e9,
        hw.memory_gb,
        gpu,
        nics,
        mfu_table=None if mfu is not None else mfu_table or preset_table(gpu),
    )


def busbw_to_inter(busbw_gbytes: float, gpus_per_node: int, nodes: int, intra_bytes_per_s: float) -> float:
    """The node's network bandwidth (bytes/s) that makes this model's all-reduce over `nodes` nodes of
    `gpus_per_node` GPUs take the time nccl-tests' all_reduce_perf reported as `busbw_gbytes` (GB/s):
    time = 2(N−1)/N·S/busbw = 2[(g−1)/g·S/B_intra + (n−1)/n·S/B_inter] solved for B_inter."""
    g, n = int(gpus_per_node), int(nodes)
    if n < 2:
        raise ValueError("a busbw measured across nodes needs at least 2 nodes")
    N = g * n
    rest = (N - 1) / N / (busbw_gbytes * 1e9) - (g - 1) / g / intra_bytes_per_s
    if rest <= 0:
        raise ValueError(
            f"busbw {busbw_gbytes:g} GB/s across {n}x{g} GPUs is faster than the intra-node link alone allows "
            f"({intra_bytes_per_s / 1e9:g} GB/s): give --intra-busbw from a one-node run"
        )
    return (n - 1) / n / rest


@dataclass(frozen=True)
class Group:
    """GPUs that run one collective together: `per_node` of them on each of `nodes` nodes, a node's
    NIC carrying `sharing` such groups at once."""

    per_node: int
    nodes: int
    sharing: int = 1


def whole(topo: Topology) -> Group:
    return Group(topo.gpus_per_node, topo.nodes, 1)


def replica_groups(topo: Topology, replica_gpus: int) -> tuple[Group, Group]:
    """(inside one replica of `replica_gpus` GPUs, across replicas: the GPUs holding one shard).
    A replica is a fraction of a node (replica_gpus divides g) or whole nodes (a multiple of g)."""
    g, n, G = topo.gpus_per_node, topo.nodes, int(replica_gpus)
    if G <= g:
        if g % G:
            raise ValueError(f"a replica of {G} GPUs must divide the {g} GPUs of a node or be whole nodes")
        return Group(G, 1, g // G), Group(g // G, n, G)
    if G % g or n % (G // g):
        raise ValueError(f"a replica of {G} GPUs must be whole nodes of {g} GPUs and divide the {n} nodes")
    return Group(g, G // g, 1), Group(1, n // (G // g), g)


def group_reduce_scatter_s(nbytes: float, topo: Topology, group: Group, buckets: int = 1) -> float:
    """Hierarchical reduce-scatter of `nbytes` over a group (the same for an all-gather), in `buckets`
    pieces that each pay the latency terms (not pipelined: `ring_latency_s` is what a piece queued
    behind another hides, queued_s). Across nodes the node's rings, one per
    member for each group sharing the node, get min(rings, NICs) of its NICs."""
    intra = reduce_scatter_time(nbytes, group.per_node, topo.alpha_intra_s * buckets, 1.0 / topo.intra_bytes_per_s)
    inter_bytes_per_s = topo.inter_for(group.per_node * group.sharing)
    inter = reduce_scatter_time(
        nbytes * group.sharing, group.nodes, topo.alpha_inter_s * buckets, 1.0 / inter_bytes_per_s
    )
    return intra + inter


def ring_latency_s(topo: Topology, group: Group | None = None) -> float:
    """The latency terms of one hierarchical reduce-scatter (or all-gather) over a group (default:
    every GPU): (g−1)α_intra + (n−1)α_inter, the part of `group_reduce_scatter_s` that pipelines
    behind the bytes of the collective before it (queued_s)."""
    group = whole(topo) if group is None else group
    return max(group.per_node - 1, 0) * topo.alpha_intra_s + max(group.nodes - 1, 0) * topo.alpha_inter_s


def reduce_scatter_s(nbytes: float, topo: Topology, buckets: int = 1) -> float:
    """Hierarchical reduce-scatter of `nbytes` over every GPU (the same for an all-gather), in
    `buckets` pieces that each pay the latency terms."""
    return group_reduce_scatter_s(nbytes, topo, whole(topo), buckets)


def all_gather_s(nbytes: float, topo: Topology, buckets: int = 1) -> float:
    return reduce_scatter_s(nbytes, topo, buckets)


def all_reduce_s(nbytes: float, topo: Topology, buckets: int = 1) -> float:
    return 2 * reduce_scatter_s(nbytes, topo, buckets)


@dataclass(frozen=True)
class SyncParts:
    """One sync in its order: reduce-scatter, the optimizer step on the shard, all-gather (seconds)."""

    reduce_s: float
    step_s: float
    gather_s: float

    @property
    def total(self) -> float:
        return self.reduce_s + self.step_s + self.gather_s


def sync_parts(
    method: str,
    params: float,
    topo: Topology,
    grad_bytes: float = 2,
    param_bytes: float = 2,
    fragments: int = 1,
    ddp_bucket_mb: float = 0.0,
    outer_bytes: float = 4,
    replica_gpus: int = 1,
    optimizer: bool = True,
) -> SyncParts:
    """One sync of `method` (a result key, a variant's name; one fragment's for the local methods, between
    replicas of `replica_gpus` GPUs), in its parts. `optimizer=False` leaves the optimizer step out."""
    n = topo.workers
    facts = modelled(method)
    if facts.schedule == LOCAL:
        frag = params / max(int(fragments), 1)
        group = replica_groups(topo, replica_gpus)[1] if replica_gpus > 1 else whole(topo)
        shard = frag / max(int(replica_gpus), 1)  # each GPU syncs its replica's shard of the fragment
        opt = frag / n * OUTER_SGD_BYTES_PER_PARAM / topo.hbm_bytes_per_s if optimizer else 0.0
        rs = group_reduce_scatter_s(outer_bytes * shard, topo, group)
        return SyncParts(rs, opt, rs)
    buckets = 1
    if facts.schedule == SEQUENTIAL and ddp_bucket_mb > 0:
        buckets = math.ceil(params * grad_bytes / (ddp_bucket_mb * 2**20))
    per_param = ADAMW_BYTES_PER_PARAM + (TENTATIVE_EXTRA_BYTES_PER_PARAM if facts.tentative_step else 0)
    opt = params / n * per_param / topo.hbm_bytes_per_s if optimizer else 0.0
    latency = ring_latency_s(topo)

    def bucketed(nbytes: float) -> float:  # issued back to back: each latency behind the bytes before
        return float(back_to_back_s([reduce_scatter_s(nbytes / buckets, topo)] * buckets, [latency] * buckets))

    return SyncParts(bucketed(grad_bytes * params), opt, bucketed(param_bytes * params))


def sync_s(method: str, params: float, topo: Topology, *args, **kwargs) -> float:
    """One sync of `method` (one fragment's for the local methods): reduce-scatter, the sharded
    optimizer step, all-gather (`sync_parts`' total)."""
    return sync_parts(method, params, topo, *args, **kwargs).total


def inner_step_s(params: float, topo: Topology, replica_gpus: int = 1) -> float:
    """The local methods' inner AdamW step: over the whole model (a replica of one GPU) or over the
    replica's shard (sharded data parallel inside a replica of `replica_gpus` GPUs)."""
    return params / max(int(replica_gpus), 1) * ADAMW_BYTES_PER_PARAM / topo.hbm_bytes_per_s


def replica_sync_parts(params: float, topo: Topology, replica_gpus: int, grad_bytes: float, param_bytes: float):
    """Inside a replica of `replica_gpus` GPUs, every inner step: reduce-scatter of the gradients,
    AdamW on the shard, all-gather of the parameters (sharded data parallel, FSDP/ZeRO-3)."""
    inside = replica_groups(topo, replica_gpus)[0]
    return SyncParts(
        group_reduce_scatter_s(grad_bytes * params, topo, inside),
        inner_step_s(params, topo, replica_gpus),
        group_reduce_scatter_s(param_bytes * params, topo, inside),
    )


def ddp_buckets(params: float, grad_bytes: float = 2, bucket_mb: float | None = None) -> Buckets:
    """PyTorch DDP's buckets (ddp_limits: a 1 MiB first bucket, then 25 MiB;
    `bucket_mb`: that size for every bucket) over a model whose parameters are spread evenly: the
    simulator knows the model's size, not its parameter list."""
    limits = ddp_limits(bucket_mb)
    entries: list[int] = []
    left = int(params)
    while left > 0:
        n = min(left, max(1, int(limits[min(len(entries), len(limits) - 1)] // grad_bytes)))
        entries.append(n)
        left -= n
    return Buckets.from_sizes(entries)


def ddp_overlap_parts(
    params: float,
    topo: Topology,
    grad_bytes: float = 2,
    param_bytes: float = 2,
    bucket_mb: float | None = None,
    optimizer: bool = True,
    replicated: bool = False,
) -> tuple[Buckets, list[float], float]:
    """The flat engine's overlapped ddp (FSDP's and ZeRO's overlap alike): its buckets, each one's
    reduce-scatter (what the last backward can hide) and the tail nothing hides, the sharded AdamW
    step (`optimizer=False`: left out) and the all-gather of the parameters. Each reduction holds
    its ring's latency (`ddp_overlap_latency_s`), which pipelines behind the bucket before it when
    that one still holds the link (queued_s): issued back to back the
    buckets cost sync_s("ddp")'s reduction, each one finding the link idle pays its latency again.

    `replicated`: plain data parallelism (PyTorch DDP without ZeRO, the DiLoCo papers' Data-Parallel):
    each bucket is all-reduced (twice a reduce-scatter's traffic, all of it hideable in the backward)
    and every GPU steps the whole model; no gather after the step."""
    buckets = ddp_buckets(params, grad_bytes, bucket_mb)
    if replicated:
        reduce = [all_reduce_s(grad_bytes * n, topo) for n in buckets.entries]
        return buckets, reduce, params * ADAMW_BYTES_PER_PARAM / topo.hbm_bytes_per_s if optimizer else 0.0
    reduce = [reduce_scatter_s(grad_bytes * n, topo) for n in buckets.entries]
    opt = params / topo.workers * ADAMW_BYTES_PER_PARAM / topo.hbm_bytes_per_s if optimizer else 0.0
    return buckets, reduce, opt + all_gather_s(param_bytes * params, topo)


def ddp_overlap_latency_s(topo: Topology, replicated: bool = False) -> float:
    """The ring latency inside each of `ddp_overlap_parts`' bucket reductions (an all-reduce: its
    reduce-scatter's and its all-gather's): what a bucket queued behind another hides."""
    return ring_latency_s(topo) * (2 if replicated else 1)


def compute_s(flops: float, topo: Topology, tokens: float | None = None) -> float:
    """One micro-batch's forward + backward at the topology's MFU (at its `tokens` where the MFU is a
    table)."""
    return flops / (topo.peak_flops * topo.mfu_at(tokens))
