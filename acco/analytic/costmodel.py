"""An α-β cost model of ring collectives and of one training step of DDP+ZeRO-1 and ACCO.

Ring collectives over N workers on a buffer of S bytes, where the slowest link of the ring moves
β⁻¹ bytes/s and each of the ring's sequential steps costs α (latency + software overhead):

    reduce-scatter : (N-1) α + (N-1)/N · S β
    all-gather     : (N-1) α + (N-1)/N · S β
    all-reduce     : 2(N-1) α + 2(N-1)/N · S β      (= reduce-scatter + all-gather)

One step, with c = the time of `accum` forward+backward micro-batches on one worker and
m = the sync's time (reduce-scatter of the gradients + sharded optimizer step + all-gather):

    DDP + ZeRO-1 (sequential)   : c + m
    ACCO, per round             : max(c, m)      (the sync of one round hides under the other's compute)

At equal work per round, ACCO's throughput over DDP's is (c + m) / max(c, m); the reduction of
the wall-clock for the same samples is 1 - max(c, m) / (c + m) (at most 50 %).

Hardware presets (`A100`, `H100`): intra-node NVLink bandwidth per GPU, inter-node bandwidth per
node (shared by its GPUs: one ring crosses each node boundary once per step, so the ring's
slowest link is the node's network link once N spans more than one node), bf16 peak FLOP/s, and
a model-FLOPs utilization (MFU) that turns 6·Ψ·tokens into a compute time. The MFU and α are
assumptions of this model, stated in its outputs; the testbed preset is calibrated from
measurements (`calibrate`).

A whole run (`run_time`): with c and m per round as above, a run of T committed steps takes

    ddp       T (c + m)
    dpu, wp   W (c + m) + c + (T - W - 1) max(c, m) + m     (W sequential warmup steps, a prologue
                                                            round of compute, a last sync alone)
    acco      c + (2T - 1) max(c, m) + m                    (two rounds per committed step)
    diloco    T c + ⌈T/H⌉ m                                  (an outer sync every H inner steps, waited for)
    streaming T c + (T F / H) max(0, m/F − τ c) + m          (a fragment's sync, 1/F of the bytes, beside
                                                            τ inner steps; the last step syncs every fragment)

For the local methods m is the sync of the fp32 pseudo-gradient (its bytes: 4 per parameter).
Any registered method is priced by its spec's facts (acco/methods): a sequential one as ddp, an
overlapped one of R rounds per committed step as W (c + m) + c + (R (T - W) - 1) max(c, m) + m, a
local one as diloco (F = 1, τ = 0) or streaming.

`zero1_torch_sync_time` is PyTorch's DDP + ZeroRedundancyOptimizer (the ddp baseline with
impl=torch): an all-reduce of the fp32 gradients, then each rank's updated fp32 partition
broadcast to all (the bytes of one all-gather)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from acco.methods import get as get_method


# -- closed forms ---------------------------------------------------------------------------------
def reduce_scatter_time(nbytes: float, n: int, alpha: float, beta: float) -> float:
    if n <= 1:
        return 0.0
    return (n - 1) * alpha + (n - 1) / n * nbytes * beta


def all_gather_time(nbytes: float, n: int, alpha: float, beta: float) -> float:
    return reduce_scatter_time(nbytes, n, alpha, beta)


def all_reduce_time(nbytes: float, n: int, alpha: float, beta: float) -> float:
    if n <= 1:
        return 0.0
    return 2 * (n - 1) * alpha + 2 * (n - 1) / n * nbytes * beta


def ddp_step_time(compute_s: float, sync_s: float) -> float:
    return compute_s + sync_s


def acco_round_time(compute_s: float, sync_s: float) -> float:
    return max(compute_s, sync_s)


def acco_reduction(compute_s: float, sync_s: float) -> float:
    """1 - t_acco / t_ddp for the same samples, at equal work per round."""
    return 1.0 - acco_round_time(compute_s, sync_s) / ddp_step_time(compute_s, sync_s)


# -- hardware -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Hardware:
    name: str
    gpus_per_node: int
    intra_bytes_per_s: float  # NVLink, per GPU
    inter_bytes_per_s: float  # network, per node
    peak_flops: float  # bf16 dense
    mfu: float = 0.45  # assumed model-FLOPs utilization
    alpha_intra_s: float = 10e-6  # assumed per-step latency inside a node
    alpha_inter_s: float = 30e-6  # assumed per-step latency across nodes
    memory_gb: float = 80.0  # one GPU's memory (GB = 1e9 bytes; an "80GB" card has 85.9e9)

    def link(self, n: int) -> tuple[float, float]:
        """(α, β) of the slowest link of a ring over n workers."""
        if n <= self.gpus_per_node:
            return self.alpha_intra_s, 1.0 / self.intra_bytes_per_s
        return self.alpha_inter_s, 1.0 / self.inter_bytes_per_s


GB = 1e9
A100 = Hardware("A100 (NVLink 300 GB/s, 100 Gb/s between nodes)", 8, 300 * GB, 100e9 / 8, 312e12)
H100 = Hardware("H100 (NVLink 450 GB/s, 400 Gb/s between nodes)", 8, 450 * GB, 400e9 / 8, 989e12)
H200 = Hardware("H200 (NVLink 450 GB/s, 400 Gb/s between nodes)", 8, 450 * GB, 400e9 / 8, 989e12, memory_gb=141.0)
PRESETS = {"A100": A100, "H100": H100, "H200": H200}


def on_nodes_of(hw: Hardware, gpus_per_node: int) -> Hardware:
    """The same GPUs, `gpus_per_node` to a node (a 2x4 layout crosses the network at 8 workers)."""
    return replace(hw, gpus_per_node=gpus_per_node)


@dataclass(frozen=True)
class Workload:
    """One worker's step: `accum` micro-batches of `tokens` tokens each, a model of `params`
    parameters, gradients communicated at `grad_bytes` per parameter."""

    name: str
    params: float
    tokens: int  # per micro-batch (micro_batch_size x seq_len)
    accum: int = 1
    grad_bytes: int = 2  # bf16 buffer (ACCO, our ZeRO-1); 4 for fp32 gradients
    optimizer_s: float = 0.0  # the sharded optimizer step inside a sync
    gather_bytes: int | None = None  # the all-gather's bytes per parameter (default grad_bytes)

    def compute_s(self, hw: Hardware) -> float:
        return self.accum * 6.0 * self.params * self.tokens / (hw.peak_flops * hw.mfu)


def sync_time(w: Workload, n: int, hw: Hardware) -> float:
    """ZeRO-1 sync: reduce-scatter of the gradients, optimizer step on a shard, all-gather of the
    parameters (the same bytes as one all-reduce when both travel in one dtype)."""
    alpha, beta = hw.link(n)
    gather = w.grad_bytes if w.gather_bytes is None else w.gather_bytes
    return (
        reduce_scatter_time(w.params * w.grad_bytes, n, alpha, beta)
        + w.optimizer_s / max(n, 1)
        + all_gather_time(w.params * gather, n, alpha, beta)
    )


def zero1_torch_sync_time(params: float, n: int, hw: Hardware) -> float:
    """PyTorch DDP + ZeroRedundancyOptimizer: all-reduce of fp32 gradients, then the fp32
    partitions broadcast (as many bytes as an all-gather of the parameters)."""
    alpha, beta = hw.link(n)
    return all_reduce_time(4 * params, n, alpha, beta) + all_gather_time(4 * params, n, alpha, beta)


def run_time(
    method: str,
    steps: int,
    compute_s: float,
    sync_s: float,
    warmup_steps: int = 0,
    local: tuple[int, int, int] = (1, 1, 0),
) -> float:
    """Wall-clock of a run of `steps` committed steps (see the module docstring), c and m per round;
    `local`: (H, F, τ) of a local method. The formula is the one the method's spec's facts choose
    (acco/methods): local, overlapped (R rounds per committed step, after its warmup steps if it
    has that setting) or sequential; an unknown method raises acco.methods.UnknownMethod."""
    spec = get_method(method)
    c, m, T = compute_s, sync_s, int(steps)
    if T <= 0:
        return 0.0
    if spec.local:
        H, F, tau = (int(v) for v in local)
        if F == 1 and tau == 0:
            return T * c + math.ceil(T / H) * m
        return T * c + (T * F / H) * max(0.0, m / F - tau * c) + m
    if not spec.overlapped:
        return T * ddp_step_time(c, m)
    W = min(int(warmup_steps), T) if "warmup_steps" in spec.settings else 0
    if W == T:
        return T * ddp_step_time(c, m)
    # W sequential steps, a prologue round of compute, R (T - W) overlapped rounds of which the last
    # has no compute, the last sync alone
    rounds = spec.rounds_per_step * (T - W)
    start = W * ddp_step_time(c, m) + c if W else c
    return start + (rounds - 1) * acco_round_time(c, m) + m


def predict(w: Workload, n: int, hw: Hardware) -> dict:
    c, m = w.compute_s(hw), sync_time(w, n, hw)
    return {
        "workload": w.name,
        "hardware": hw.name,
        "workers": n,
        "compute_s": c,
        "sync_s": m,
        "comm_over_compute": m / c,
        "ddp_step_s": ddp_step_time(c, m),
        "acco_round_s": acco_round_time(c, m),
        "acco_speedup": ddp_step_time(c, m) / acco_round_time(c, m),
        "acco_reduction": acco_reduction(c, m),
    }


def scaling(w: Workload, hw: Hardware, workers=(8, 16, 24, 32, 64, 128, 256, 512, 1024)) -> list[dict]:
    return [predict(w, n, hw) for n in workers]


# -- the paper's workloads ---------------------------------------------------------------------------
LLAMA2_7B_FIG4 = Workload("Llama-2 7B, seq 4096, micro-batch 1 (Fig. 4)", 6.74e9, 4096, accum=1, grad_bytes=4)
GPTNEO_125M = 125e6
GPTNEO_2P7B = 2.7e9


def table3_rows() -> list[dict]:
    """Table 3's runs: (name, workload per round, workers, hardware, paper's reduction).
    The paper's DDP accumulates twice ACCO's micro-batches per step (ACCO: one stage of each);
    both process the same samples, so at ACCO's round work c and a sync m: DDP spends 2c + m per
    step and ACCO 2 max(c, m)."""
    rows = [
        ("125M pretraining, 1x8 H100", Workload("GPT-Neo 125M", GPTNEO_125M, 24 * 1024, 1), 8, H100, 16860, 15900),
        ("125M pretraining, 4x8 A100", Workload("GPT-Neo 125M", GPTNEO_125M, 24 * 1024, 1), 32, A100, 52860, 39300),
        ("2.7B fine-tuning, 1x8", Workload("GPT-Neo 2.7B", GPTNEO_2P7B, 4 * 512, 2), 8, A100, 2580, 1500),
        (
            "2.7B fine-tuning, 2x4",
            Workload("GPT-Neo 2.7B", GPTNEO_2P7B, 4 * 512, 2),
            8,
            replace(A100, gpus_per_node=4),
            13560,
            1740,
        ),
    ]
    out = []
    for name, w, n, hw, ddp_s, acco_s in rows:
        c, m = w.compute_s(hw), sync_time(w, n, hw)
        ddp, acco = 2 * c + m, 2 * max(c, m)
        out.append(
            {
                "row": name,
                "workers": n,
                "hardware": hw.name,
                "compute_per_round_s": c,
                "sync_s": m,
                "predicted_reduction_pct": 100 * (1 - acco / ddp),
                "paper_reduction_pct": 100 * (1 - acco_s / ddp_s),
                # what the prediction assumed and the paper's times (the virtual clock's presets)
                "peak_flops": hw.peak_flops,
                "mfu": hw.mfu,
                "link_bytes_per_s": 1.0 / hw.link(n)[1],
                "accum": w.accum,
                "paper_ddp_s": ddp_s,
                "paper_acco_s": acco_s,
            }
        )
    return out


def fig4_curve(
    hw: Hardware = A100, w: Workload = LLAMA2_7B_FIG4, workers=(8, 16, 24, 32, 48, 64, 128, 256, 512, 1024)
) -> list[dict]:
    """Fig. 4: all-reduce time of the gradients over fwd+bwd time as workers grow."""
    rows = []
    for n in workers:
        alpha, beta = hw.link(n)
        ar = all_reduce_time(w.params * w.grad_bytes, n, alpha, beta)
        c = w.compute_s(hw)
        rows.append({"workers": n, "all_reduce_s": ar, "compute_s": c, "ratio": ar / c})
    return rows


# -- calibration on the testbed -----------------------------------------------------------------
@dataclass
class TestbedFit:
    """α per ring step, efficiency η (achieved / configured rate) on shaped links, loopback β."""

    alpha_s: float
    efficiency: float
    loopback_bytes_per_s: float
    compute_per_micro_batch_s: dict = field(default_factory=dict)  # world size -> seconds

    def beta(self, rate_mbit: float) -> float:
        if rate_mbit and rate_mbit > 0:
            return 1.0 / (self.efficiency * rate_mbit * 1e6 / 8)
        return 1.0 / self.loopback_bytes_per_s

    def collective_s(self, kind: str, nbytes: float, n: int, rate_mbit: float) -> float:
        f = {"reduce_scatter": reduce_scatter_time, "all_gather": all_gather_time, "all_reduce": all_reduce_time}[kind]
        return f(nbytes, n, self.alpha_s, self.beta(rate_mbit))


def calibrate(samples: list[dict], compute: dict | None = None) -> TestbedFit:
    """Fit α and η from measured collectives: each sample {kind, nbytes, workers, rate_mbit,
    seconds}. Shaped samples (rate > 0): seconds = steps·α + sent / (η · rate) — linear in α and
    1/η, solved by least squares; loopback samples give the loopback bandwidth."""

    def steps_and_sent(s):
        n = s["workers"]
        k = 2 if s["kind"] == "all_reduce" else 1
        return k * (n - 1), k * (n - 1) / n * s["nbytes"]

    shaped = [s for s in samples if s.get("rate_mbit")]
    loop = [s for s in samples if not s.get("rate_mbit")]
    alpha, eff = 0.0, 1.0
    if shaped:
        # columns: steps (for α) and sent/rate (for 1/η)
        a11 = a12 = a22 = b1 = b2 = 0.0
        for s in shaped:
            st, sent = steps_and_sent(s)
            x = sent / (s["rate_mbit"] * 1e6 / 8)
            a11 += st * st
            a12 += st * x
            a22 += x * x
            b1 += st * s["seconds"]
            b2 += x * s["seconds"]
        det = a11 * a22 - a12 * a12
        if abs(det) > 1e-12 * max(a11 * a22, 1e-30):
            alpha = (b1 * a22 - b2 * a12) / det
            inv_eff = (a11 * b2 - a12 * b1) / det
        else:  # all samples alike: no separate α
            alpha, inv_eff = 0.0, b2 / a22
        if alpha < 0:  # noise can push α below zero: refit through the origin
            alpha, inv_eff = 0.0, b2 / a22
        if inv_eff < 1.0:
            # a shaped link cannot beat its rate (short transfers fit in tbf's burst and look
            # faster): fix η = 1 and give the rest to α
            inv_eff = 1.0
            alpha = max(0.0, (b1 - a12) / a11) if a11 > 0 else 0.0
        eff = 1.0 / inv_eff
    loop_bw = float("inf")
    if loop:
        rates = []
        for s in loop:
            st, sent = steps_and_sent(s)
            t = s["seconds"] - st * alpha
            if t > 0 and sent > 0:
                rates.append(sent / t)
        if rates:
            rates.sort()
            loop_bw = rates[len(rates) // 2]
    return TestbedFit(alpha, eff, loop_bw if math.isfinite(loop_bw) else 1e12, dict(compute or {}))
