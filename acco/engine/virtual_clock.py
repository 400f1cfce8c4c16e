"""The virtual clock (`clock.mode=virtual`): training runs for real, every loss is a real loss,
while time is the schedule's modelled time, not the machine's.

Every rank holds the same model of every rank's time (a vector of N), so each rank evaluates it
locally and alike: no collective of its own, and deterministic. The costs:

    a micro-batch (fwd+bwd) on rank r   c_r = clock.micro_batch_s (x hetero.factor on hetero.slow_rank)
    a sync of kind k                    m_k = communication + optimizer steps x clock.optimizer_step_s
        communication: clock.sync_s, or (null) the link model over the bytes the sync moves,
        α + bytes/bandwidth per ring step (the cost model's ring formulas, α =
        link.delay_ms, bandwidth = link.rate_mbit)

and the rules:

    a collective starts when the last rank joins it (so a sequential step waits for its slowest rank)
    sequential round  : every rank computes, then the sync           t_r <- max_q(t_q + a c_q) + m
    overlapped round  : the sync starts at s = max_q t_q and ends at e = s + m; rank r computes
                        from t_r beside it and then waits for it    t_r <- max(t_r + n_r c_r, e)
    deterministic     : n_r = accum
    adaptive          : n_r = accum, and one more while the sync has not ended at the micro-batch's
                        start (t_r + n c_r < e), at most the engine's cap, and only where the budget's
                        may_extend allows it: max(accum, ⌈m/c⌉) when every rank starts with the sync

The micro-batch counts are the model's, for every rank, so the counts the real sync sums are the
model's (the engine checks it at every sync): the run that is timed is the run that produced the
losses."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from ..analytic.costmodel import all_gather_time, all_reduce_time, reduce_scatter_time
from ..analytic.overlap import BACKWARD_SHARE, Buckets, step_end
from ..config.validate import ConfigError
from .sync import SyncKind

# a micro-batch that would start this close to the sync's end counts as starting after it: ⌈m/c⌉
# stays exact when m/c is a whole number but float sums land a rounding error short of it
EPSILON_S = 1e-9


def is_virtual(cfg) -> bool:
    """Whether a run config (plain or typed) runs on the virtual clock."""
    clock = cfg.get("clock")
    return clock is not None and clock.get("mode") == "virtual"


def unemulated_link(cfg: dict) -> dict:
    """The config the workers of a virtual-clock run get: link.* are inputs of the clock's model
    only, so no namespaces, no shaping, no in-process delays (runtime mode none)."""
    note = "clock.mode=virtual: link.* are inputs of the virtual clock, not emulated"
    return dict(cfg, link=dict(cfg.get("link") or {}, runtime={"mode": "none", "note": note}))


@dataclass(frozen=True)
class ClockSettings:
    """The `clock:` block with the link's numbers (inputs of the model only in virtual mode)."""

    mode: str = "real"
    micro_batch_s: float | None = None
    sync_s: float | None = None  # None: the link model
    optimizer_step_s: float = 0.0
    rate_mbit: float = 0.0
    delay_ms: float = 0.0
    slow_rank: int | None = None  # hetero.*: its micro-batch costs micro_batch_s x factor
    factor: float = 1.0
    # the backward's share of a micro-batch (acco.analytic.overlap): where a DDP step's bucket
    # reductions can start in its last micro-batch
    backward_share: float = BACKWARD_SHARE

    @property
    def virtual(self) -> bool:
        return self.mode == "virtual"

    @classmethod
    def from_config(cls, cfg) -> ClockSettings:
        """From a run config (typed view or plain dict); a config without a `clock:` block (written
        before it existed) runs on the real clock."""
        try:
            clock = cfg["clock"]
        except Exception:  # noqa: BLE001 - absent or MISSING in an older config
            clock = None
        if not clock or clock["mode"] != "virtual":
            return cls()
        link, hetero = cfg["link"], cfg["hetero"]
        return cls(
            mode="virtual",
            micro_batch_s=float(clock["micro_batch_s"]),
            sync_s=None if clock["sync_s"] is None else float(clock["sync_s"]),
            optimizer_step_s=float(clock["optimizer_step_s"] or 0.0),
            rate_mbit=float(link["rate_mbit"] or 0.0),
            delay_ms=float(link["delay_ms"] or 0.0),
            slow_rank=hetero["slow_rank"],
            factor=float(hetero["factor"]),
            backward_share=_backward_share(clock),
        )

    def micro_batch_costs(self, world: int) -> list[float]:
        """Each rank's c_r: a heterogeneous worker is slower by the clock (it sleeps for none of it)."""
        assert self.micro_batch_s is not None
        return [self.micro_batch_s * (self.factor if r == self.slow_rank else 1.0) for r in range(world)]

    # -- the link model -------------------------------------------------------------------------
    def _alpha_beta(self) -> tuple[float, float]:
        """(seconds per ring step, seconds per byte) of the modelled link."""
        beta = 8.0 / (self.rate_mbit * 1e6) if self.rate_mbit > 0 else 0.0
        return self.delay_ms / 1e3, beta

    def collective_s(self, kind: str, nbytes: float, world: int) -> float:
        """One ring collective ("reduce_scatter", "all_gather", "all_reduce") on the link model."""
        alpha, beta = self._alpha_beta()
        f = {"reduce_scatter": reduce_scatter_time, "all_gather": all_gather_time, "all_reduce": all_reduce_time}[kind]
        return f(nbytes, world, alpha, beta)

    def communication_s(self, collectives: Sequence[tuple[str, float]], world: int, share: float = 1.0) -> float:
        """A sync's communication: clock.sync_s (x `share`, a fragment's part of the whole model)
        when set, else the link model over its collectives [(kind, bytes of the full buffer)]."""
        if self.sync_s is not None:
            return self.sync_s * share
        return sum(self.collective_s(kind, nbytes, world) for kind, nbytes in collectives)

    def collective_costs(self, collectives: Sequence[tuple[str, float]], world: int) -> list[float]:
        """Each collective's seconds: the link model's, or, with clock.sync_s, sync_s split among
        them in proportion to the bytes each puts on a ring ((N−1)/N of its buffer, an all-reduce
        twice that), so a sync cut into buckets costs what it cost whole."""
        if self.sync_s is None:
            return [self.collective_s(kind, nbytes, world) for kind, nbytes in collectives]
        weights = [(2.0 if kind == "all_reduce" else 1.0) * float(nbytes) for kind, nbytes in collectives]
        total = sum(weights)
        if total <= 0:
            return [self.sync_s / len(collectives)] * len(collectives)
        return [self.sync_s * w / total for w in weights]

    def small_collective_s(self, nbytes: float, world: int) -> float:
        """A few numbers all-reduced outside a sync (a local method's per-step counts): its latency
        on the link model; nothing when clock.sync_s stands for the syncs."""
        return 0.0 if self.sync_s is not None else self.collective_s("all_reduce", nbytes, world)

    def report(self, sync_s: Mapping[str, float], world: int) -> dict:
        """summary.json's `clock` block."""
        if not self.virtual:
            return {"mode": "real"}
        return {
            "mode": "virtual",
            "micro_batch_s": self.micro_batch_s,
            "sync_s": {k: round(v, 9) for k, v in sync_s.items()},
            "optimizer_step_s": self.optimizer_step_s,
            "link": {
                "rate_mbit": self.rate_mbit,
                "delay_ms": self.delay_ms,
                "used": self.sync_s is None,  # false: clock.sync_s stands for every sync
                "emulated": False,  # link.* are inputs of this model only: no namespaces, no delays
            },
            "world_size": world,
            "backward_share": self.backward_share,
            "source": "config",
        }


# optimizer steps on the shard in each kind of sync (WP's commits, then predicts with the same gradient)
OPTIMIZER_STEPS = {SyncKind.COMMIT: 1, SyncKind.ESTIMATE: 1, SyncKind.COMMIT_PREDICT: 2}


def flat_sync_costs(
    settings: ClockSettings,
    kinds: Sequence[SyncKind],
    world: int,
    buffer_bytes: int,
    agreement_bytes: int,
    clip: bool,
    gather_bytes: int | None = None,
) -> dict[str, float]:
    """m_k for each kind of flat sync a method uses: its communication + its optimizer steps."""
    collectives = flat_sync_collectives(buffer_bytes, agreement_bytes, clip, gather_bytes)
    comm = settings.communication_s(collectives, world)
    return {k.value: comm + OPTIMIZER_STEPS[k] * settings.optimizer_step_s for k in kinds}


# -- the bytes each method's sync moves (what the link model is given) ------------------------------
def flat_sync_collectives(
    buffer_bytes: int, agreement_bytes: int, clip: bool, gather_bytes: int | None = None
) -> list[tuple[str, float]]:
    """The flat engine's sync: reduce-scatter of the buffer, the counts'
    all-reduce, the clipping norm's when clipping, all-gather of the parameters (`gather_bytes`:
    in the parameters' dtype, half the buffer's beside fp32 gradients; default the buffer's)."""
    out = [("reduce_scatter", float(buffer_bytes)), ("all_reduce", float(agreement_bytes))]
    if clip:
        out.append(("all_reduce", 8.0))
    out.append(("all_gather", float(buffer_bytes if gather_bytes is None else gather_bytes)))
    return out


def torch_ddp_collectives(params: int, wire_bytes: int, agreement_bytes: int) -> list[tuple[str, float]]:
    """PyTorch DDP + ZeroRedundancyOptimizer, modelled as: one bucket's
    all-reduce of the P gradients at `wire_bytes` each (fp32; 2 for the bf16 reduce-scatter hook,
    whose reduce-scatter + all-gather moves the bytes and ring steps of an all-reduce), then ZeRO's
    broadcast of every rank's fp32 partition (the bytes and steps of an all-gather of the fp32
    parameters, as costmodel.zero1_torch_sync_time), then the loss and counts' all-reduce. Several
    DDP buckets would pay α once more each: the CPU models fit in one."""
    return [
        ("all_reduce", float(params * wire_bytes)),
        ("all_gather", float(params * 4)),
        ("all_reduce", float(agreement_bytes)),
    ]


def flat_overlap_costs(
    settings: ClockSettings,
    world: int,
    buckets: Buckets,
    item_bytes: int,
    agreement_bytes: int,
    clip: bool,
    gather_item: int | None = None,
) -> tuple[list[float], float]:
    """The flat engine's backward-overlapped ddp: each bucket's
    reduce-scatter (what the last backward can hide), and the tail nothing hides: the counts'
    all-reduce, the clipping norm's, the all-gather of the parameters (`gather_item` bytes each,
    their dtype; default the buffer's) and the optimizer step."""
    reduce = [("reduce_scatter", float(n * item_bytes)) for n in buckets.entries]
    tail = [("all_reduce", float(agreement_bytes))] + ([("all_reduce", 8.0)] if clip else [])
    tail.append(("all_gather", float(sum(buckets.entries) * (item_bytes if gather_item is None else gather_item))))
    costs = settings.collective_costs(reduce + tail, world)
    k = len(buckets)
    return costs[:k], sum(costs[k:]) + settings.optimizer_step_s


def torch_ddp_costs(
    settings: ClockSettings, world: int, buckets: Buckets, params: int, wire_bytes: int, agreement_bytes: int
) -> tuple[list[float], float]:
    """PyTorch DDP + ZeroRedundancyOptimizer: each bucket's all-reduce
    at `wire_bytes` per gradient (fp32: 4; the bf16 reduce-scatter hook: 2, whose reduce-scatter +
    all-gather moves an all-reduce's bytes and ring steps), and the tail: ZeRO's broadcast of every
    rank's fp32 partition (an all-gather's bytes and steps, as costmodel.zero1_torch_sync_time), the
    loss and counts' all-reduce, the optimizer step. The same bytes as torch_ddp_collectives, now
    bucket by bucket."""
    reduce = [("all_reduce", float(n * wire_bytes)) for n in buckets.entries]
    tail = [("all_gather", float(params * 4)), ("all_reduce", float(agreement_bytes))]
    costs = settings.collective_costs(reduce + tail, world)
    k = len(buckets)
    return costs[:k], sum(costs[k:]) + settings.optimizer_step_s


def local_sync_collectives(fragment_entries: int, buffer_item: int) -> list[tuple[str, float]]:
    """A local method's fragment sync: reduce-scatter of Δ_f in the
    buffer's dtype, all-gather of φ'_f in fp32."""
    return [("reduce_scatter", float(fragment_entries * buffer_item)), ("all_gather", float(fragment_entries * 4))]


class VirtualClock:
    """Every rank's virtual time, and the rounds' bookkeeping the adaptive counts need (each rank's
    micro-batches in its accumulator and in a commit in flight), for all N ranks. `micro_batch_s`:
    each rank's c_r; `sync_s`: the cost of each kind of sync (its name -> seconds)."""

    def __init__(self, micro_batch_s: Sequence[float], sync_s: Mapping[str, float], rank: int = 0):
        if not micro_batch_s or any(c <= 0 for c in micro_batch_s):
            raise ValueError(f"every rank's micro-batch must cost > 0 s, got {list(micro_batch_s)}")
        self.cost = [float(c) for c in micro_batch_s]
        self.world = len(self.cost)
        self.sync_costs = dict(sync_s)
        self.rank = rank
        self.times = [0.0] * self.world
        self.pending = [0] * self.world  # micro-batches in each rank's accumulator
        self.in_flight = [0] * self.world  # each rank's micro-batches in a commit now running
        self.launched = 0  # global micro-batches in the sync now running
        self.sync_end: float | None = None  # when the sync now running ends
        # a backward-overlapped DDP step's model (summary.json's clock block, for the simulator):
        # {"backward_share", "ready", "reduce_s", "tail_s"}; None: the blocking step
        self.step_model: dict | None = None

    def now(self, rank: int = 0) -> float:
        """Rank `rank`'s virtual time (rank 0's is the run's: it logs the metrics)."""
        return self.times[rank]

    def sync_cost(self, kind: str) -> float:
        try:
            return self.sync_costs[kind]
        except KeyError:
            raise KeyError(
                f"the virtual clock has no cost for a {kind!r} sync (it has {sorted(self.sync_costs)})"
            ) from None

    # -- primitives ----------------------------------------------------------------------------
    def compute_all(self, n: int) -> None:
        """Every rank computes n micro-batches (no sync beside them)."""
        self.times = [t + n * c for t, c in zip(self.times, self.cost)]

    def advance(self, seconds: float) -> None:
        """Every rank's compute side is busy `seconds` (a local method's inner AdamW step)."""
        self.times = [t + seconds for t in self.times]

    def start(self, seconds: float) -> float:
        """A collective of `seconds` starts when the last rank joins it; returns its end (the ranks
        go on: wait(end) where they need its result)."""
        return max(self.times) + seconds

    def wait(self, end: float) -> None:
        """Every rank waits for what ends at `end`."""
        self.times = [max(t, end) for t in self.times]

    def collective(self, seconds: float) -> float:
        """A blocking collective: every rank leaves it at its end."""
        end = self.start(seconds)
        self.wait(end)
        return end

    # -- the flat engine's rounds (which call these as they run) ---------------------------------
    def empty(self) -> None:
        """Every rank's accumulator is emptied."""
        self.pending = [0] * self.world

    def launch(self, kind: str, commits: bool) -> None:
        """Every rank hands its accumulator to a sync of `kind`."""
        if self.sync_end is not None:
            raise RuntimeError("a sync launched on the virtual clock while another is in flight")
        self.launched = sum(self.pending)
        self.in_flight = list(self.pending) if commits else [0] * self.world
        self.sync_end = self.start(self.sync_cost(kind))

    def compute_round(
        self,
        minimum: int,
        extend: bool = False,
        cap: int | None = None,
        may_extend: Callable[[int], bool] | None = None,
    ) -> int:
        """Every rank computes its micro-batches of a round: `minimum`, and, when `extend` (an
        adaptive round beside a sync), one more while the sync has not ended at its start, below
        `cap`, where `may_extend(uncommitted)` allows it. Returns this rank's count."""
        end = self.sync_end
        counts = []
        for r in range(self.world):
            n = 0
            while n < minimum or (
                extend
                and end is not None
                and self.times[r] + n * self.cost[r] < end - EPSILON_S
                and (cap is None or n < cap)
                and (may_extend is None or may_extend(self.pending[r] + n + self.in_flight[r]))
            ):
                n += 1
            counts.append(n)
        self.times = [t + n * c for t, n, c in zip(self.times, counts, self.cost)]
        self.pending = [p + n for p, n in zip(self.pending, counts)]
        return counts[self.rank]

    def finish(self) -> int:
        """Every rank waits for the sync in flight; returns the global micro-batches it summed."""
        if self.sync_end is None:
            raise RuntimeError("no sync in flight on the virtual clock")
        self.wait(self.sync_end)
        self.sync_end = None
        self.in_flight = [0] * self.world
        return self.launched

    def backward_overlapped_step(
        self, accum: int, buckets: Buckets, reduce_s: Sequence[float], tail_s: float, share: float
    ) -> int:
        """A DDP step whose bucket reductions overlap the last micro-batch's backward (the rule of
        acco/analytic/overlap.py, shared with the simulator): every rank computes `accum`
        micro-batches, bucket i's reduction starts when every rank has it final and the link is free,
        the tail after the last; every rank leaves at its end. Returns the global micro-batches."""
        if self.sync_end is not None:
            raise RuntimeError("a DDP step on the virtual clock while a sync is in flight")
        if self.step_model is None or len(buckets) > len(self.step_model["ready"]):
            self.step_model = {
                "backward_share": share,
                "ready": list(buckets.ready),
                "entries": list(buckets.entries),
                "reduce_s": [round(float(r), 12) for r in reduce_s],
                "tail_s": round(float(tail_s), 12),
            }
        end = float(step_end(self.times, self.cost, accum, buckets, reduce_s, tail_s, share))
        self.times = [end] * self.world
        return accum * self.world

    # -- checkpoints: at a step boundary -------------------------------------------------------
    def state_dict(self) -> dict:
        return {"times": list(self.times), "pending": list(self.pending), "sync_end": self.sync_end}

    def load_state_dict(self, state: dict) -> None:
        self.times = [float(t) for t in state["times"]]
        self.pending = [int(p) for p in state["pending"]]
        self.sync_end = state.get("sync_end")


def _backward_share(clock) -> float:
    """clock.backward_share (null or absent, as in configs written before it: the FLOP count's 2/3)."""
    try:
        value = clock["backward_share"]
    except Exception:  # noqa: BLE001 - absent in an older config
        value = None
    return BACKWARD_SHARE if value is None else float(value)


def check_clock(cfg: dict) -> None:
    """On the virtual clock, costs it can use: what the clock.* settings need of each other and of
    link.*. Each alone (the mode among its choices, no cost below 0) is its field's check
    (ClockConfig), applied before this runs."""
    clock = cfg.get("clock") or {}
    if clock.get("mode", "real") != "virtual":
        return
    if clock.get("micro_batch_s") is None or clock["micro_batch_s"] <= 0:
        raise ConfigError(
            f"clock.mode=virtual needs the seconds of one micro-batch, got clock.micro_batch_s="
            f"{clock.get('micro_batch_s')}; set e.g. clock.micro_batch_s=0.1"
        )
    rate = (cfg.get("link") or {}).get("rate_mbit") or 0
    if clock.get("sync_s") is None and not rate > 0:
        raise ConfigError(
            "clock.mode=virtual with clock.sync_s=null takes a sync's time from the link model, and "
            "link.rate_mbit is 0 (unlimited); set clock.sync_s (seconds) or link.rate_mbit > 0"
        )
