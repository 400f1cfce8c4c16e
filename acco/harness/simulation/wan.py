"""Wide-area links: what a DiLoCo run across regions meets on its outer sync, beyond one uniform bandwidth.

The hierarchical collectives of the topology give every node the same network bandwidth B_inter. Here:

    per-node bandwidths  `--inter-gbps 10,10,2.5,10`: each node's usable bandwidth (one value: all
                         nodes). A ring moves at the pace of its slowest link, so a collective's
                         inter-node phase runs at the slowest node's bandwidth; every ring of the model
                         (the whole cluster's, the outer sync's across replicas) passes through every
                         node, and a replica spanning several nodes is as slow as its slowest one, which
                         the outer sync waits for. `Topology.inter_bytes_per_s` is the slowest node's
                         bandwidth; `Links.scale` keeps each node's as a multiple of it (so a bandwidth
                         sweep, `--find-bandwidth`, moves them all together).
    TCP over a long RTT  a TCP stream never has more than its window in flight, so it carries at most
                         window / RTT bytes per second (the bandwidth-delay product: RFC 7323 §1); K
                         parallel streams carry K × window / RTT, and a node's link carries
                         min(its bandwidth, K × window / RTT). The default window, 4 MiB, is Linux's
                         default ceiling on a socket's send buffer (net.ipv4.tcp_wmem's max, "between
                         64K and 4MB, depending on RAM size": the kernel's
                         Documentation/networking/ip-sysctl.rst). RTT 0 (the default): no cap.
                         The cap applies to every inter-node collective: it is the link's (a node of
                         several NICs: its total, K streams in all).
    jitter               per outer sync, what each node's link carries (after the TCP cap: cross
                         traffic and loss slow a window-limited stream too) multiplied by exp(S·Z),
                         Z ~ N(0, 1) (log-normal, median 1), drawn from --seed apart from the
                         stragglers' draws; the sync then runs at the slowest node's jittered
                         bandwidth (the minimum over nodes: with equal links its median sits below the
                         no-jitter value, by about S·1.4 in log terms for 8 nodes). Only the local
                         methods' outer syncs are jittered (one draw per sync: schedules.local takes
                         one time per sync); the other methods' collectives keep the unjittered links.
    CPU quantisation     --quantize-gbytes Q: quantising a GPU's outer payload (its values as fp32
                         input, 4 bytes each) before the sync and dequantising after it run on the CPU
                         at Q GB/s each: 2 × values × 4 / Q seconds per outer sync, on the sync's lane.
                         0 (the default): free (on the GPU, or nothing to quantise).

`outer_syncs` gives every outer sync's time (the all-reduce with its outer step and the quantisation):
the schedule uses them one by one and the rows report their mean (`sync_s`), median and p90 (over at
least REPORT_DRAWS draws: a short run has too few syncs for a p90).
With none of these set the model is exactly the uniform one (`Links.uniform`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from .topology import GBIT, SyncParts, Topology

MIB = 2**20
# Linux's default ceiling on a TCP socket's send buffer, the bytes one stream can have in flight:
# net.ipv4.tcp_wmem max, "between 64K and 4MB, depending on RAM size" (Documentation/networking/ip-sysctl.rst)
DEFAULT_TCP_WINDOW_MB = 4.0
# the jitter's draws come from their own stream of --seed, so the stragglers' draws stay as they were
JITTER_STREAM = 51
JITTER_KINDS = ("none", "lognormal")
# jittered outer syncs drawn at least this many times: a run of a few hundred inner steps has only a
# few outer syncs, too few for a median and a p90; the schedule meets the first ones in order
REPORT_DRAWS = 1000


@dataclass(frozen=True)
class Links:
    """The wide-area settings (module docstring). `scale`: each node's bandwidth over the slowest
    node's (all ≥ 1, one of them 1; empty: all nodes equal)."""

    scale: tuple[float, ...] = ()
    jitter_sigma: float = 0.0
    rtt_s: float = 0.0
    streams: int = 1
    tcp_window_bytes: float = DEFAULT_TCP_WINDOW_MB * MIB
    quantize_bytes_per_s: float = 0.0  # fp32 input quantised (and dequantised) per second; 0: free

    def __post_init__(self):
        if any(not s >= 1 for s in self.scale):
            raise ValueError(f"link scales {self.scale}: each node's bandwidth over the slowest one's, all >= 1")
        if self.jitter_sigma < 0 or self.rtt_s < 0 or self.quantize_bytes_per_s < 0:
            raise ValueError("jitter sigma, RTT and quantisation throughput must be 0 or more")
        if self.streams < 1 or self.tcp_window_bytes <= 0:
            raise ValueError(f"streams {self.streams}, window {self.tcp_window_bytes}: at least 1 stream, a window > 0")

    @property
    def uniform(self) -> bool:
        """Nothing set: every collective exactly as the topology computes it."""
        return (
            all(s == 1 for s in self.scale)
            and not self.jitter_sigma
            and not self.rtt_s
            and not self.quantize_bytes_per_s
        )

    def check(self, nodes: int) -> None:
        if self.scale and len(self.scale) != nodes:
            raise ValueError(f"{len(self.scale)} link bandwidths for {nodes} nodes: give one per node, or one for all")

    def tcp_cap_bytes_per_s(self) -> float:
        """What K streams of a window W each carry over a round trip of RTT: K·W/RTT (inf: no RTT)."""
        return self.streams * self.tcp_window_bytes / self.rtt_s if self.rtt_s else math.inf

    def node_bytes_per_s(self, topo: Topology) -> np.ndarray:
        """Each node's usable bandwidth (bytes/s) before the TCP cap and any jitter."""
        scale = np.asarray(self.scale or (1.0,) * topo.nodes, float)
        return topo.inter_bytes_per_s * scale

    def ring_bytes_per_s(self, topo: Topology, factors: np.ndarray | None = None) -> float:
        """The inter-node phase's bandwidth: the slowest node's link, each capped by TCP (and what
        it carries multiplied by this sync's jitter `factors`, one per node)."""
        links = np.minimum(self.node_bytes_per_s(topo), self.tcp_cap_bytes_per_s())
        return float((links if factors is None else links * factors).min())

    def effective(self, topo: Topology, factors: np.ndarray | None = None) -> Topology:
        """The topology whose uniform inter-node bandwidth is this ring's (the topology itself where
        nothing changes it: the uniform model's numbers stay bit for bit)."""
        ring = self.ring_bytes_per_s(topo, factors)
        # the wide-area link is the bottleneck every ring shares: one link, not the preset's NICs (whose
        # share per ring, topology.Topology.inter_for, would divide it again)
        return topo if ring == topo.inter_bytes_per_s else replace(topo, inter_bytes_per_s=ring, nics_per_node=1)

    def jitter(self, seed: int, syncs: int, nodes: int) -> np.ndarray | None:
        """(syncs, nodes) bandwidth factors, log-normal with median 1; None without jitter."""
        if not self.jitter_sigma:
            return None
        rng = np.random.default_rng([int(seed), JITTER_STREAM])
        return np.exp(self.jitter_sigma * rng.standard_normal((int(syncs), int(nodes))))

    def quantize_s(self, values: float) -> float:
        """CPU quantisation before an outer sync and dequantisation after it: 2 × values × 4 B / Q."""
        return 2 * values * 4 / self.quantize_bytes_per_s if self.quantize_bytes_per_s else 0.0

    def describe(self, topo: Topology) -> str:
        nodes = self.node_bytes_per_s(topo) / GBIT
        parts = [
            f"wide-area links: nodes {', '.join(f'{g:g}' for g in nodes)} Gbit/s"
            if len(set(nodes.tolist())) > 1
            else f"wide-area links: {nodes[0]:g} Gbit/s per node"
        ]
        if self.rtt_s:
            cap = self.tcp_cap_bytes_per_s() / GBIT
            parts.append(
                f"RTT {self.rtt_s * 1e3:g} ms, {self.streams} stream(s) of {self.tcp_window_bytes / MIB:g} MiB: "
                f"at most {cap:.3g} Gbit/s per link"
            )
        parts.append(f"ring at {self.ring_bytes_per_s(topo) / GBIT:.3g} Gbit/s")
        if self.jitter_sigma:
            parts.append(f"log-normal jitter per outer sync, S={self.jitter_sigma:g}")
        if self.quantize_bytes_per_s:
            parts.append(f"CPU quantisation at {self.quantize_bytes_per_s / 1e9:g} GB/s")
        return "; ".join(parts)


def outer_syncs(
    links: Links,
    topo: Topology,
    syncs: int,
    seed: int,
    parts: Callable[[Topology], SyncParts],
    values: float,
) -> np.ndarray:
    """Every outer sync's seconds: `parts(topology)` (topology.sync_parts of the local method at that
    topology's bandwidth) at this sync's jittered ring, plus the quantisation of the `values` a GPU
    sends; `syncs` of them, or REPORT_DRAWS where jitter needs more for its distribution. Without
    jitter, one time for all."""
    quant = links.quantize_s(values)
    factors = links.jitter(seed, max(int(syncs), REPORT_DRAWS), topo.nodes)
    if factors is None:
        return np.full(int(syncs), parts(links.effective(topo)).total + quant)
    return np.array([parts(links.effective(topo, row)).total + quant for row in factors])


def mean_s(per_sync: np.ndarray) -> float:
    """The mean outer sync (exactly the one time where every sync takes it)."""
    return float(per_sync[0]) if np.all(per_sync == per_sync[0]) else float(per_sync.mean())


def parse_bandwidths(text, nodes: int) -> tuple[float | None, tuple[float, ...]]:
    """`--inter-gbps`: None (the preset's), one number, or one per node -> (the slowest node's
    Gbit/s, each node's over it; empty when all are equal)."""
    if text is None:
        return None, ()
    try:
        values = [float(x) for x in str(text).split(",")]
    except ValueError:
        raise ValueError(f"--inter-gbps {text!r}: Gbit/s, one number or one per node (e.g. 10,10,2.5,10)") from None
    if any(not (v > 0 and math.isfinite(v)) for v in values):
        raise ValueError(f"--inter-gbps {text!r}: every bandwidth must be positive")
    if len(values) not in (1, nodes):
        raise ValueError(f"--inter-gbps {text!r}: {len(values)} bandwidths for --nodes {nodes}: one per node, or one")
    slowest = min(values)
    scale = tuple(v / slowest for v in values) if len(set(values)) > 1 else ()
    return slowest, scale


def parse_jitter(text: str) -> float:
    """`--link-jitter`: 'none' or 'lognormal:S' -> S (0: none)."""
    kind, _, arg = str(text).partition(":")
    if kind not in JITTER_KINDS:
        raise ValueError(f"unknown --link-jitter kind {kind!r}: use none or lognormal:S (e.g. lognormal:0.3)")
    if kind == "none":
        if arg:
            raise ValueError(f"--link-jitter {text!r}: none takes no parameter")
        return 0.0
    try:
        sigma = float(arg)
    except ValueError:
        raise ValueError(f"--link-jitter {text!r}: lognormal:S, S the log-normal's sigma (e.g. 0.3)") from None
    if not (sigma >= 0 and math.isfinite(sigma)):
        raise ValueError(f"--link-jitter {text!r}: sigma must be 0 or more")
    return sigma


def links_from_args(a) -> tuple[float | None, Links]:
    """The command line's wide-area settings -> (the slowest node's --inter-gbps, Links)."""
    slowest, scale = parse_bandwidths(a.inter_gbps, a.nodes)
    for flag, value in (("rtt-ms", a.rtt_ms), ("quantize-gbytes", a.quantize_gbytes)):
        if not (value >= 0 and math.isfinite(value)):
            raise ValueError(f"--{flag} {value:g}: must be 0 or more")
    if a.streams < 1:
        raise ValueError(f"--streams {a.streams}: at least 1 TCP stream per link")
    if not (a.tcp_window_mb > 0 and math.isfinite(a.tcp_window_mb)):
        raise ValueError(f"--tcp-window-mb {a.tcp_window_mb:g}: must be positive")
    return slowest, Links(
        scale,
        parse_jitter(a.link_jitter),
        a.rtt_ms * 1e-3,
        a.streams,
        a.tcp_window_mb * MIB,
        a.quantize_gbytes * 1e9,
    )
