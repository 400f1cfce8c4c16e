"""The network between a cluster's nodes: NICs per node and the bandwidth of each.

GPU training nodes carry one NIC per GPU (or per pair of GPUs), not one per node. The presets
(`NETWORKS`, one per `SIM_PRESETS` GPU) give each NIC's rate as the usable one: there is no
usable-vs-line-rate factor (1.0); `--nic-gbps` sets what one's own NICs deliver, `--inter-gbps`
the node's total, `--inter-busbw` converts what nccl-tests measured.

- A100 (80 GB): NVIDIA DGX A100 — 8 single-port ConnectX-6 VPI, 200 Gb/s HDR InfiniBand each, for
  the compute fabric (NVIDIA DGX A100 datasheet; DGX A100 user guide,
  https://docs.nvidia.com/dgx/dgxa100-user-guide/introduction-to-dgxa100.html).
- A100-40GB: AWS p4d.24xlarge — 400 Gb/s of EFA over 4 network cards, 100 Gb/s each
  (https://aws.amazon.com/ec2/instance-types/p4/; 4 network cards: the EC2 user guide,
  https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/using-eni.html#network-cards). p4de.24xlarge
  (A100 80 GB) has the same network: an A100 run on AWS is `--nics-per-node 4 --nic-gbps 100`; a
  DGX A100 320GB (40 GB GPUs) has the A100 preset's 8 x 200 (`--gpu A100-40GB --nics-per-node 8
  --nic-gbps 200`).
- H100, H200: NVIDIA DGX H100 / DGX H200 — 8 single-port ConnectX-7, 400 Gb/s NDR InfiniBand each
  (NVIDIA DGX H100/H200 datasheets: "4x OSFP ports serving 8x single-port ConnectX-7";
  DGX H100 user guide, https://docs.nvidia.com/dgx/dgxh100-user-guide/introduction-to-dgxh100.html,
  "Network Modules": one ConnectX-7 per GPU); AWS p5.48xlarge / p5e / p5en give the same 3,200 Gb/s
  per node (https://aws.amazon.com/ec2/instance-types/p5/).

**How the rings use them.** The hierarchical collective (the topology's) runs its part across nodes
as concurrent rings, one per GPU of the node (each on its chunk), every ring crossing the node's
boundary: NCCL puts each GPU's ring on its nearest NIC. With at least as many rings as NICs the
node's traffic spreads over all of them; with fewer rings than NICs (one GPU per node, say) only
as many NICs as rings carry it — a ring does not stripe over several NICs here, which makes the
model pessimistic where NCCL would split a lone ring's channels over more NICs:

    bandwidth the node's rings get = min(rings, NICs) x per-NIC bandwidth

One NIC per node (`--nics-per-node 1`) is the earlier model: every ring shares the node's one link.
"""

from __future__ import annotations

from dataclasses import dataclass

GBIT = 1e9 / 8  # bytes/s in one Gbit/s


@dataclass(frozen=True)
class Network:
    """NICs per node and the usable Gbit/s of each."""

    nics_per_node: int
    nic_gbps: float

    @property
    def node_bytes_per_s(self) -> float:
        return self.nics_per_node * self.nic_gbps * GBIT


# the presets' networks (sources in the module docstring)
NETWORKS: dict[str, Network] = {
    "A100": Network(8, 200.0),  # DGX A100: 8 x ConnectX-6 HDR 200 Gb/s
    "A100-40GB": Network(4, 100.0),  # AWS p4d.24xlarge: 4 network cards of 100 Gb/s EFA
    "H100": Network(8, 400.0),  # DGX H100 / AWS p5: 8 x ConnectX-7 NDR 400 Gb/s
    "H200": Network(8, 400.0),  # DGX H200 / AWS p5e, p5en: the same
}


def usable_nics(rings: int, nics_per_node: int) -> int:
    """The NICs a node's `rings` concurrent rings across nodes can use: one each, at most all."""
    return max(1, min(int(rings), int(nics_per_node)))


def rings_bytes_per_s(node_bytes_per_s: float, nics_per_node: int, rings: int) -> float:
    """The bandwidth `rings` concurrent rings get from a node of `nics_per_node` NICs that together
    carry `node_bytes_per_s`: min(rings, NICs) of them, each at its share."""
    return node_bytes_per_s * usable_nics(rings, nics_per_node) / max(1, int(nics_per_node))
