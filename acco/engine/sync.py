"""One *sync* (SPEC §2): reduce-scatter of the gradient sum, all-reduce of the micro-batch counts
(which also carries this rank's finiteness of its gradient shard and any per-rank votes, so the
ranks agree on them with no collective of their own), division by the global count, optional
global-norm clipping across shards, an AdamW step on this rank's shard (committed, tentative, or
committed then tentative), all-gather of the shards.

One communication buffer of P entries serves both directions: the compute side copies its
gradient accumulator into it, and the sync leaves the new full parameter vector in it."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum

import torch

from .collectives import all_gather_into, all_reduce_sum, reduce_scatter_sum
from .sharded_adamw import ShardedAdamW
from .trace import COMM, TraceRecorder

# the largest piece of a gradient (or of the masters) copied at once for a float64 sum of squares
# or a gather to the host: 4 Mi entries (a 32 MB float64 temporary), not a model-sized copy
CHUNK = 1 << 22


def squared_norm(x: torch.Tensor, chunk: int = CHUNK) -> torch.Tensor:
    """Σ x² in float64 (a 0-dim tensor on x's device), chunk by chunk: a float64 copy of a whole
    7B gradient would be 56 GB. A vector of at most `chunk` entries takes exactly the one-piece
    sum's arithmetic (the deterministic CPU runs' numbers stay as they were)."""
    total = torch.zeros((), dtype=torch.float64, device=x.device)
    for piece in x.split(chunk):
        total += piece.double().square().sum()
    return total


class SyncKind(Enum):
    """What a sync does with the averaged gradient ḡ; the value names it in the trace."""

    COMMIT = "commit"  # θ <- Opt(θ, ḡ); gather θ
    ESTIMATE = "estimate"  # gather Opt_tentative(θ, ḡ); state untouched (ACCO)
    COMMIT_PREDICT = "commit+predict"  # θ <- Opt(θ, ḡ); gather Opt_tentative(θ, ḡ) (WP)
    LOCAL = "local"  # an inner step of a local method: counts agreed, no gradient sent (DiLoCo)

    @property
    def commits(self) -> bool:
        """Takes a committed optimizer step (the gradients it sends are then spent)."""
        return self is not SyncKind.ESTIMATE


@dataclass
class SyncResult:
    kind: SyncKind
    micro_batches: int  # global count n_tot of micro-batches in the synced gradient
    loss_mean: float  # mean training loss over those micro-batches
    lr: float  # learning rate of the AdamW update applied
    grad_norm: float  # global norm of the averaged gradient before clipping (nan when not clipping)
    committed_step: int  # optimizer step count after the sync


class Agreement:
    """What the ranks agree on at every step with one small all-reduce: the global micro-batch
    count and loss sum, whether any rank's gradient (shard) holds inf/nan, and the per-rank votes
    (the trainer's checkpoint signals). Summed over the ranks, and over the all-reduces since the
    last step boundary, they are the same on every rank, so a step boundary needs no collective of
    its own, and so no barrier between committed steps."""

    def __init__(self) -> None:
        self.votes: Callable[[], Sequence[float]] = tuple
        self.agreed_votes: list[float] = []
        self.nonfinite_grad = False

    def all_reduce(
        self, count: float, loss_sum: torch.Tensor | float, grads: torch.Tensor, group, on_host: bool = False
    ) -> tuple[float, float]:
        """(global micro-batches, global loss sum); `grads`: this rank's part to check for inf/nan.
        `on_host`: the numbers travel as a host tensor (a gloo group beside a GPU's training)."""
        votes = [float(v) for v in self.votes()]
        device = torch.device("cpu") if on_host else grads.device
        stats = torch.tensor([float(count), 0.0, 0.0, *votes], dtype=torch.float64, device=device)
        stats[1] = loss_sum  # the compute side's sum, on the device: no host sync for it
        stats[2] = (~torch.isfinite(grads)).any()  # set on the device: no host sync of its own
        all_reduce_sum(stats, group)
        n_tot, loss_tot, nonfinite, *vote_sums = stats.tolist()
        if n_tot <= 0:
            raise RuntimeError("a sync saw zero micro-batches across all ranks")
        self.nonfinite_grad = self.nonfinite_grad or nonfinite > 0
        self.agreed_votes = [a + b for a, b in zip(self.agreed_votes, vote_sums)] or vote_sums
        return n_tot, loss_tot

    def take(self) -> tuple[bool, tuple[float, ...]]:
        """(a non-finite gradient on any rank, the votes' sums) since the last call."""
        agreed = (self.nonfinite_grad, tuple(self.agreed_votes))
        self.nonfinite_grad, self.agreed_votes = False, []
        return agreed


class Syncer:
    def __init__(
        self,
        buffer: torch.Tensor,
        opt: ShardedAdamW,
        rank: int,
        world_size: int,
        group,
        tracer: TraceRecorder,
        clip_norm: float = 0.0,
    ):
        self.buffer = buffer
        self.opt = opt
        self.group = group
        self.tracer = tracer
        self.clip_norm = float(clip_norm or 0.0)
        self.world_size = world_size
        shard = buffer.numel() // world_size
        self.lo, self.hi = rank * shard, (rank + 1) * shard
        self.grad_shard = torch.empty(shard, dtype=buffer.dtype, device=buffer.device)
        self.scratch = torch.empty(shard, dtype=buffer.dtype, device=buffer.device)
        self.agreement = Agreement()  # counts, loss, finiteness and votes ride in one all-reduce

    def take_agreed(self) -> tuple[bool, tuple[float, ...]]:
        """(a non-finite synced gradient on any rank, the votes' sums) since the last call."""
        return self.agreement.take()

    def sync(self, kind: SyncKind, count: int, loss_sum: torch.Tensor | float) -> SyncResult:
        # runs as the communication thread's job: on a GPU its spans are event pairs on that
        # thread's stream, so they end with the stream's work, not when it has been queued
        span = self.tracer.span
        with span(f"sync ({kind.value})", COMM, side_cpu=True):
            with span("reduce_scatter", COMM):
                reduce_scatter_sum(self.buffer, self.grad_shard, self.group, self.scratch)
            return self.step_and_gather(kind, count, loss_sum)

    def step_and_gather(self, kind: SyncKind, count: int, loss_sum: torch.Tensor | float) -> SyncResult:
        """The sync after its reduce-scatter (grad_shard holds this rank's summed shard): the counts'
        all-reduce, the division, clipping, the AdamW step and the all-gather."""
        span = self.tracer.span
        with span("all_reduce counts", COMM):
            n_tot, loss_tot = self.agreement.all_reduce(count, loss_sum, self.grad_shard, self.group)
        grad = self.grad_shard.to(torch.float32).div_(n_tot)
        grad_norm = float("nan")
        if self.clip_norm > 0:  # one more (scalar) all-reduce, only when clipping
            with span("clip", COMM):
                sq = squared_norm(grad).reshape(1)
                all_reduce_sum(sq, self.group)
                grad_norm = math.sqrt(sq.item())
                coef = self.clip_norm / (grad_norm + 1e-6)
                if coef < 1.0:
                    grad.mul_(coef)
        lr = self.opt.lr
        with span(f"adamw ({kind.value})", COMM):
            if kind is SyncKind.ESTIMATE:
                new = self.opt.tentative(grad)
            else:
                new = self.opt.commit(grad, int(round(n_tot)))
                if kind is SyncKind.COMMIT_PREDICT:
                    new = self.opt.tentative(grad)
        self.gather(new)
        return SyncResult(kind, int(round(n_tot)), loss_tot / n_tot, lr, grad_norm, self.opt.step_count)

    def gather(self, new: torch.Tensor) -> None:
        """buffer <- every rank's new shard (this rank's: `new`)."""
        own = self.buffer[self.lo : self.hi]
        own.copy_(new)
        with self.tracer.span("all_gather", COMM):
            all_gather_into(self.buffer, own, self.group)

    def gather_committed(self, out: torch.Tensor) -> torch.Tensor:
        """out <- the committed parameters θ_t (all shards' fp32 masters, cast to out's dtype)."""
        own = out[self.lo : self.hi]
        own.copy_(self.opt.master)
        all_gather_into(out, own, self.group)
        return out

    def gather_committed_to_host(self, numel: int, chunk: int = CHUNK) -> torch.Tensor:
        """θ_t's first `numel` entries as an fp32 vector in host memory: every rank's fp32 master
        shard gathered `chunk` entries at a time through a (world × chunk) device buffer, so no
        model-sized fp32 vector is made on the device (28 GB for a 7B model). Call on every rank."""
        shard = self.hi - self.lo
        world = self.world_size
        out = torch.empty(world, shard, dtype=torch.float32)
        step = max(1, min(shard, chunk))
        gathered = torch.empty(world * step, dtype=torch.float32, device=self.buffer.device)
        for start in range(0, shard, step):
            n = min(step, shard - start)
            all_gather_into(gathered[: world * n], self.opt.master[start : start + n], self.group)
            out[:, start : start + n].copy_(gathered[: world * n].view(world, n))
        return out.view(-1)[:numel]
