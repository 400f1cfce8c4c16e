"""One *sync* (docs/rounds.md): reduce-scatter of the gradient sum, all-reduce of the micro-batch counts
(which also carries this rank's finiteness of its gradient shard and any per-rank votes, so the
ranks agree on them with no collective of their own), division by the global count, optional
global-norm clipping across shards, an AdamW step on this rank's shard (committed, tentative, or
committed then tentative), all-gather of the shards.

One communication buffer of P entries serves both directions: the compute side copies its
gradient accumulator into it, and the sync leaves the new full parameter vector in it, in the
parameters' dtype (`gathered`: a view of the buffer's storage in that dtype when the accumulator
is wider, e.g. fp32 gradients beside bf16 parameters, so the all-gather sends 2 bytes a parameter
and not 4; the buffer's gradients are spent by then)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum

import torch

from .collectives import all_gather_into, all_reduce_sum, is_nccl, reduce_scatter_sum
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
    its own, and so no barrier between committed steps.

    In two halves for a sync on a GPU: `start` builds the numbers on the device (scalar fills, no
    copy from the host, so no host round trip) and all-reduces them; `settle` takes their values
    once the host reads them, at the sync's end where it waits anyway."""

    def __init__(self) -> None:
        self.votes: Callable[[], Sequence[float]] = tuple
        self.agreed_votes: list[float] = []
        self.nonfinite_grad = False

    def start(
        self, count: float, loss_sum: torch.Tensor | float, grads: torch.Tensor, group, on_host: bool = False
    ) -> torch.Tensor:
        """The all-reduced [global micro-batches, global loss sum, non-finite ranks, vote sums...]
        (float64, on `grads`' device; `on_host`: in host memory, for a gloo group beside a GPU's
        training). `grads`: this rank's part to check for inf/nan."""
        votes = [float(v) for v in self.votes()]
        device = torch.device("cpu") if on_host else grads.device
        # fill_ takes a scalar as a kernel argument; `stats[i] = number` copies it from the host,
        # a sync on a GPU (the check of 2026-12-04 found 4 per sync here)
        stats = torch.zeros(3 + len(votes), dtype=torch.float64, device=device)
        stats[0].fill_(float(count))
        stats[1] = loss_sum  # the compute side's sum, on the device: no host sync for it
        stats[2] = (~torch.isfinite(grads)).any()  # set on the device: no host sync of its own
        for i, v in enumerate(votes):
            stats[3 + i].fill_(v)
        all_reduce_sum(stats, group)
        return stats

    def settle(self, values: Sequence[float]) -> tuple[float, float]:
        """(global micro-batches, global loss sum) from `start`'s numbers read on the host."""
        n_tot, loss_tot, nonfinite, *vote_sums = values
        if n_tot <= 0:
            raise RuntimeError("a sync saw zero micro-batches across all ranks")
        self.nonfinite_grad = self.nonfinite_grad or nonfinite > 0
        self.agreed_votes = [a + b for a, b in zip(self.agreed_votes, vote_sums)] or list(vote_sums)
        return n_tot, loss_tot

    def all_reduce(
        self, count: float, loss_sum: torch.Tensor | float, grads: torch.Tensor, group, on_host: bool = False
    ) -> tuple[float, float]:
        """`start` and `settle` at once: (global micro-batches, global loss sum)."""
        return self.settle(self.start(count, loss_sum, grads, group, on_host).tolist())

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
        gathered: torch.Tensor | None = None,
    ):
        """`gathered`: where the sync all-gathers the new parameters, a view over `buffer`'s storage
        in the parameters' dtype (default: `buffer` itself)."""
        self.buffer = buffer
        self.gathered = buffer if gathered is None else gathered
        if self.gathered.numel() != buffer.numel() or self.gathered.untyped_storage().data_ptr() != (
            buffer.untyped_storage().data_ptr()
        ):
            raise ValueError("the gathered parameters must be a view of the communication buffer, entry for entry")
        self.opt = opt
        self.group = group
        self.tracer = tracer
        self.clip_norm = float(clip_norm or 0.0)
        self.world_size = world_size
        shard = buffer.numel() // world_size
        self.lo, self.hi = rank * shard, (rank + 1) * shard
        # the sync's working memory, allocated once (issue 42 point 6): on a GPU a temporary made on
        # the communication stream stays in that stream's pool of the caching allocator, which
        # the compute stream never reuses, so per-sync temporaries cost their peak for good
        self.grad_shard = torch.empty(shard, dtype=buffer.dtype, device=buffer.device)
        # the ring reduce-scatter's receive buffer (gloo); NCCL reduce-scatters without one
        self.scratch = None if is_nccl(group) else torch.empty(shard, dtype=buffer.dtype, device=buffer.device)
        # the fp32 mean gradient beside a narrower buffer (bf16 gradients); an fp32 buffer's own
        self.grad32 = (
            None if buffer.dtype == torch.float32 else torch.empty(shard, dtype=torch.float32, device=buffer.device)
        )
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
        all-reduce, the division, clipping, the AdamW step and the all-gather. The host reads the
        agreed numbers once, at the end, when all the sync's work is queued (the thread then waits
        for the stream anyway): no round trip in the middle of the sync."""
        span = self.tracer.span
        with span("all_reduce counts", COMM):
            stats = self.agreement.start(count, loss_sum, self.grad_shard, self.group)
        grad = self.grad_shard if self.grad32 is None else self.grad32.copy_(self.grad_shard)
        grad.div_(stats[0])  # the global count, on the device
        norm = None
        if self.clip_norm > 0:  # one more (scalar) all-reduce, only when clipping
            with span("clip", COMM):
                sq = squared_norm(grad).reshape(1)
                all_reduce_sum(sq, self.group)
                norm = sq.sqrt()
                # min(1, c / (‖g‖ + 1e-6)) in float64 on the device, as the host would compute it
                # (a true division: `c / tensor` would multiply by a reciprocal)
                grad.mul_(torch.full_like(norm, self.clip_norm).div_(norm + 1e-6).clamp_(max=1.0))
        lr = self.opt.lr
        n_tot: float | None = None
        loss_tot = 0.0
        if kind is SyncKind.COMMIT_PREDICT:  # the tentative step's rate reads the new count
            n_tot, loss_tot = self.agreement.settle(stats.tolist())
        with span(f"adamw ({kind.value})", COMM):
            if kind is SyncKind.ESTIMATE:
                new = self.opt.tentative(grad)
            else:
                new = self.opt.commit(grad, int(round(n_tot)) if n_tot is not None else 0)
                if kind is SyncKind.COMMIT_PREDICT:
                    new = self.opt.tentative(grad)
        self.gather(new)
        values = torch.cat([stats, norm if norm is not None else stats.new_full((1,), math.nan)]).tolist()
        if n_tot is None:
            n_tot, loss_tot = self.agreement.settle(values[:-1])
            if kind.commits:  # the count the schedule reads from the next step on
                self.opt.micro_batches += int(round(n_tot))
        grad_norm = values[-1]  # the norm before clipping (nan when not clipping)
        return SyncResult(kind, int(round(n_tot)), loss_tot / n_tot, lr, grad_norm, self.opt.step_count)

    def gather(self, new: torch.Tensor) -> None:
        """gathered <- every rank's new shard (this rank's: `new`), in the parameters' dtype: the
        reduce-scatter is done with the buffer, so the parameters may go out through a view of it."""
        own = self.gathered[self.lo : self.hi]
        own.copy_(new)
        with self.tracer.span("all_gather", COMM):
            all_gather_into(self.gathered, own, self.group)

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
