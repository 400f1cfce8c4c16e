"""The virtual clock (clock.mode=virtual, acco/engine/virtual_clock.py): the model's arithmetic, and
real runs whose metrics.csv times are the model's while their losses are real.

c = one micro-batch's seconds, a = train.accum, m = one sync's seconds:
    DDP step a·c + m; deterministic ACCO round max(a·c, m) (a committed step is two rounds);
    adaptive ACCO round max(a, ⌈m/c⌉) micro-batches; a rank k times slower costs k·c per micro-batch,
    DDP waits for it, adaptive fast ranks fit more micro-batches beside the sync.

Here the tests in-process; those that start processes (marked integration) are in
tests/integration/test_virtual_clock.py."""

from __future__ import annotations

import math

import pytest

from acco.analytic.costmodel import all_gather_time, all_reduce_time, reduce_scatter_time
from acco.config.validate import ConfigError
from acco.engine.sync import SyncKind
from acco.engine.virtual_clock import ClockSettings, VirtualClock, check_clock, flat_sync_costs


# -- the model, as the engine drives it ---------------------------------------------------------------
def ddp_step(clock: VirtualClock, accum: int) -> None:
    """RoundEngine.sequential_round: an emptied accumulator, accum micro-batches, a blocking sync."""
    clock.empty()
    clock.compute_round(accum)
    clock.launch("commit", commits=True)
    clock.finish()


def overlapped_round(clock: VirtualClock, kind: str, accum: int, adaptive: bool, **kw) -> list[int]:
    """RoundEngine.overlapped_round (accumulating_round without the empty()): every rank's count."""
    before = list(clock.pending)
    clock.launch(kind, commits=kind != "estimate")
    if kind != "estimate":
        clock.empty()
        before = [0] * clock.world
    clock.compute_round(accum, extend=adaptive, **kw)
    clock.finish()
    return [p - b for p, b in zip(clock.pending, before)]


@pytest.mark.parametrize("accum,c,m", [(1, 0.25, 1.0), (4, 0.5, 0.75), (3, 0.1, 7.0)])
def test_a_ddp_step_costs_accum_micro_batches_then_the_sync(accum, c, m):
    clock = VirtualClock([c, c, c], {"commit": m})
    for step in range(1, 4):
        ddp_step(clock, accum)
        assert clock.times == pytest.approx([step * (accum * c + m)] * 3)


@pytest.mark.parametrize("accum,c,m", [(2, 0.25, 1.0), (2, 1.0, 0.5), (3, 0.5, 1.5)])
def test_a_deterministic_acco_round_costs_the_longer_of_compute_and_sync(accum, c, m):
    """Prologue a·c, then each round max(a·c, m): a committed step (estimate + commit) 2·max(a·c, m)."""
    clock = VirtualClock([c, c], {"estimate": m, "commit": m})
    clock.empty()
    clock.compute_round(accum)  # the prologue: G̃_0 at θ_0
    assert clock.times == pytest.approx([accum * c] * 2)
    for step in range(1, 4):
        assert overlapped_round(clock, "estimate", accum, adaptive=False) == [accum, accum]
        assert overlapped_round(clock, "commit", accum, adaptive=False) == [accum, accum]
        assert clock.now(0) == pytest.approx(accum * c + 2 * step * max(accum * c, m))


@pytest.mark.parametrize("accum,c,m", [(1, 0.25, 1.0), (2, 0.3, 1.0), (5, 0.1, 0.3), (1, 0.7, 0.5), (2, 0.2, 2.05)])
def test_adaptive_acco_fits_as_many_micro_batches_as_start_before_the_sync_ends(accum, c, m):
    """Every rank starts with the sync: max(a, ⌈m/c⌉) micro-batches, the round ends at max(n·c, m)."""
    clock = VirtualClock([c, c], {"estimate": m, "commit": m})
    expected = max(accum, math.ceil(m / c - 1e-12))
    start = clock.now()
    assert overlapped_round(clock, "commit", accum, adaptive=True) == [expected, expected]
    assert clock.now() - start == pytest.approx(max(expected * c, m))


def test_a_slow_rank_costs_factor_times_the_micro_batch_ddp_waits_for_it_and_fast_ranks_fit_more():
    settings = ClockSettings("virtual", micro_batch_s=0.25, sync_s=1.0, slow_rank=1, factor=4.0)
    costs = settings.micro_batch_costs(3)
    assert costs == [0.25, 1.0, 0.25]
    ddp = VirtualClock(costs, {"commit": 1.0})
    ddp_step(ddp, accum=2)
    assert ddp.times == [3.0, 3.0, 3.0]  # the slow rank's 2 x 1.0 s, then the sync for everyone
    acco = VirtualClock(costs, {"commit": 1.0})
    counts = overlapped_round(acco, "commit", accum=1, adaptive=True)
    assert counts == [4, 1, 4]  # fast ranks fit m/c = 4 beside the sync, the slow rank its minimum
    assert acco.times == [1.0, 1.0, 1.0]
    # the next round: the slow rank's micro-batch ends as the sync does, so nobody waits
    assert overlapped_round(acco, "commit", accum=1, adaptive=True) == [4, 1, 4]


def test_a_sync_starts_when_the_last_rank_joins_it():
    clock = VirtualClock([0.5, 0.5], {"commit": 1.0})
    clock.times = [0.0, 2.0]  # rank 1 is behind: it joins at 2.0
    counts = overlapped_round(clock, "commit", accum=1, adaptive=True)
    assert counts == [6, 2]  # rank 0 computes from 0.0 until the sync's end at 3.0; rank 1 from 2.0
    assert clock.times == [3.0, 3.0]


def test_the_cap_and_the_budget_bound_an_adaptive_round_with_each_ranks_own_count():
    clock = VirtualClock([0.1, 0.1], {"estimate": 1.0, "commit": 1.0})
    assert overlapped_round(clock, "commit", accum=1, adaptive=True, cap=4) == [4, 4]
    seen: list[int] = []

    def may_extend(uncommitted: int) -> bool:
        seen.append(uncommitted)
        return uncommitted + 1 <= 3

    clock.pending = [2, 0]  # an estimate round on top of different accumulators
    assert overlapped_round(clock, "estimate", accum=1, adaptive=True, may_extend=may_extend) == [1, 3]
    assert 2 + 1 in seen and 0 + 2 in seen  # asked with each rank's accumulator + this round's count


def test_the_link_model_charges_the_ring_collectives_of_the_bytes_a_sync_moves():
    """Without clock.sync_s: α = link.delay_ms per ring step, bytes at link.rate_mbit (costmodel's
    formulas), plus the optimizer steps of the kind (WP's commit+predict: two)."""
    settings = ClockSettings("virtual", micro_batch_s=0.1, rate_mbit=8.0, delay_ms=10.0, optimizer_step_s=0.05)
    costs = flat_sync_costs(settings, [SyncKind.COMMIT, SyncKind.COMMIT_PREDICT], 2, 10**6, 48, clip=False)
    # by hand, N = 2, 1e6 B/s: reduce-scatter 0.01 + 0.5 s, all-gather the same, counts 2 x 0.01 + 48 B
    comm = 0.51 + 0.51 + 0.02 + 48e-6
    assert costs == pytest.approx({"commit": comm + 0.05, "commit+predict": comm + 0.1})
    alpha, beta = 0.01, 1e-6
    four = flat_sync_costs(settings, [SyncKind.ESTIMATE], 4, 10**6, 48, clip=True)["estimate"]
    assert four == pytest.approx(
        reduce_scatter_time(1e6, 4, alpha, beta)
        + all_reduce_time(48, 4, alpha, beta)
        + all_reduce_time(8, 4, alpha, beta)
        + all_gather_time(1e6, 4, alpha, beta)
        + 0.05
    )
    fixed = ClockSettings("virtual", micro_batch_s=0.1, sync_s=2.0, rate_mbit=8.0)
    assert flat_sync_costs(fixed, [SyncKind.ESTIMATE], 4, 10**6, 48, clip=False) == {"estimate": 2.0}


# -- the backward overlap of DDP's step (acco/analytic/overlap.py) --------------------------------------
# gptneo_tiny's parameters in model order (vocab 1024, hidden 128, 2 layers: 543,488 in all)
TINY = [131072, 16384] + [128, 128, 16384, 16384, 16384, 16384, 128, 128, 128, 65536, 512, 65536, 128] * 2 + [128, 128]


def test_the_issues_case_torch_ddp_hides_part_of_its_all_reduce_and_none_of_its_broadcast():
    """Issue 40's case: torch DDP, gptneo_tiny (fp32), 2 ranks, accum 2, c = 0.1 s, 100 Mbit/s.
    Blocking (DDP's first step: one bucket): 2 x 0.1 + all-reduce 0.17392 + broadcast 0.08696 +
    counts = 0.46088 s. From its second step DDP's rebuilt buckets: the last 263,808 gradients
    (1 MiB first bucket, final at 48.54 % of the last backward), then the rest. The last backward runs
    0.13333-0.2; bucket 0 is final at 0.16569 and all-reduced by 0.25011; bucket 1, final at 0.2,
    waits for the link until 0.25011 and is done at 0.33961; the broadcast and counts (0.08696) start
    only then: 0.42657 s, 0.0343 s of the all-reduce hidden, none of the broadcast."""
    from acco.analytic.overlap import Buckets, hidden_s, step_end, torch_ddp_buckets
    from acco.engine.virtual_clock import torch_ddp_costs

    assert sum(TINY) == 543488
    settings = ClockSettings("virtual", micro_batch_s=0.1, rate_mbit=100.0)
    agreement = 8 * 5
    one = Buckets.single(sum(TINY))
    reduce1, tail1 = torch_ddp_costs(settings, 2, one, sum(TINY), 4, agreement)
    assert reduce1 == pytest.approx([0.17391616]) and tail1 == pytest.approx(0.08696128)
    blocking = VirtualClock([0.1, 0.1], {"commit": 1.0})
    blocking.backward_overlapped_step(2, one, reduce1, tail1, 2 / 3)
    assert blocking.times == pytest.approx([0.46087744] * 2)
    buckets = torch_ddp_buckets(TINY, 4, None)
    assert buckets.entries == (263808, 279680) and buckets.ready[0] == pytest.approx(263808 / 543488)
    reduce_s, tail_s = torch_ddp_costs(settings, 2, buckets, sum(TINY), 4, agreement)
    assert sum(reduce_s) == pytest.approx(reduce1[0]) and tail_s == pytest.approx(tail1)
    clock = VirtualClock([0.1, 0.1], {"commit": 1.0})
    clock.backward_overlapped_step(2, buckets, reduce_s, tail_s, 2 / 3)
    assert clock.times == pytest.approx([0.42657064] * 2)
    hidden = float(hidden_s([0.0, 0.0], [0.1, 0.1], 2, buckets, reduce_s, 2 / 3))
    assert 0 < hidden < reduce1[0] and hidden == pytest.approx(0.0343068, abs=1e-6)
    # none of the broadcast: the tail starts after the last backward's end
    reductions_end = float(step_end([0.0, 0.0], [0.1, 0.1], 2, buckets, reduce_s, 0.0, 2 / 3))
    assert reductions_end >= 0.2 and clock.times[0] - reductions_end == pytest.approx(tail_s)
    # the simulator's DDP: the same rule, the same step
    import numpy as np

    from acco.harness.simulation import schedules

    t = schedules.ddp(
        np.array([0.1]),
        np.ones((3, 1, 2)),
        np.array([1.0]),
        2,
        schedules.Overlap(buckets, [np.array([r]) for r in reduce_s], np.array([tail_s]), 2 / 3),
    )
    assert t.step_s[0] == pytest.approx(0.42657064) and t.commit_s[:, 0] == pytest.approx(
        [0.42657064 * k for k in (1, 2, 3)]
    )
    blocking_sim = schedules.ddp(np.array([0.1]), np.ones((3, 1, 2)), np.array([reduce1[0] + tail1]), 2)
    assert blocking_sim.step_s[0] == pytest.approx(0.46087744)


def test_a_fixed_sync_time_is_split_by_bytes_and_a_bucketed_sync_costs_what_it_cost_whole():
    """clock.sync_s = 0.6 s over the flat sync: reduce-scatter and all-gather of the same bytes, the
    counts' 48 bytes; cut into three buckets the reduce-scatter's half is split by their sizes."""
    from acco.analytic.overlap import Buckets
    from acco.engine.virtual_clock import flat_overlap_costs

    fixed = ClockSettings("virtual", micro_batch_s=0.1, sync_s=0.6)
    buckets = Buckets.from_sizes([100, 300, 600])
    reduce_s, tail_s = flat_overlap_costs(fixed, 2, buckets, 4, 48, clip=False)
    whole = 4000 + 2 * 48 + 4000
    assert reduce_s == pytest.approx([0.6 * 400 / whole, 0.6 * 1200 / whole, 0.6 * 2400 / whole])
    assert sum(reduce_s) + tail_s == pytest.approx(0.6)


def test_a_real_run_has_no_clock_and_a_config_without_the_block_is_real():
    assert not ClockSettings.from_config({"clock": {"mode": "real"}}).virtual
    assert not ClockSettings.from_config({}).virtual


# what the settings need of each other; each one alone is its field's check (tests/unit/test_field_checks.py)
CLOCK_ERRORS = [
    ({"mode": "virtual", "micro_batch_s": None, "sync_s": 1.0}, {}, "needs the seconds of one micro-batch"),
    ({"mode": "virtual", "micro_batch_s": 0.0, "sync_s": 1.0}, {}, "needs the seconds of one micro-batch"),
    ({"mode": "virtual", "micro_batch_s": 0.1, "sync_s": None}, {"rate_mbit": 0}, "set clock.sync_s"),
]


@pytest.mark.parametrize("clock,link,message", CLOCK_ERRORS)
def test_bad_clock_settings_are_one_line(clock, link, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")) as err:
        check_clock({"clock": clock, "link": link})
    assert "\n" not in str(err.value)


def test_good_clock_settings_pass():
    check_clock({"clock": {"mode": "real", "micro_batch_s": None, "sync_s": None}})
    check_clock({"clock": {"mode": "virtual", "micro_batch_s": 0.1, "sync_s": None}, "link": {"rate_mbit": 100}})


def test_the_engine_refuses_a_clock_out_of_step_with_the_real_sync():
    """The sync's real global count must be the model's: a rank whose model counted micro-batches
    the others did not compute stops at once (here the stub sync sees this rank's alone)."""
    from types import SimpleNamespace

    import torch

    from acco.engine.comm_worker import CommWorker
    from acco.engine.rounds import RoundEngine
    from acco.engine.sync import SyncResult
    from acco.engine.trace import TraceRecorder

    grads = torch.zeros(4)
    flat = SimpleNamespace(grads=grads, params=torch.zeros(4), zero_grads=grads.zero_)

    class Runner:
        count, loss_sum = 0, 0.0

        def run_one(self, label: str) -> None:
            self.count += 1
            self.loss_sum += 1.0

        def reset(self) -> None:
            self.count, self.loss_sum = 0, 0.0

    def sync(kind, count, loss_sum):  # every rank's count is this one's: the world is this rank alone
        return SyncResult(kind, count, loss_sum / count, 1e-3, float("nan"), 1)

    buffer = torch.zeros(4)
    syncer = SimpleNamespace(buffer=buffer, gathered=buffer, sync=sync)
    comm = CommWorker(torch.device("cpu"), threaded=False)
    alone = VirtualClock([0.25], {"commit": 1.0})
    engine = RoundEngine(flat, syncer, comm, Runner(), 2, True, TraceRecorder(0, enabled=False), clock=alone)
    assert engine.sequential_round().micro_batches == 2  # a model of the one rank there is: in step
    pair = VirtualClock([0.25, 0.25], {"commit": 1.0})
    engine = RoundEngine(flat, syncer, comm, Runner(), 2, True, TraceRecorder(0, enabled=False), clock=pair)
    with pytest.raises(RuntimeError, match="modelled 4 micro-batches in this sync, the ranks sent 2"):
        engine.sequential_round()


def test_a_checkpoint_from_before_the_clock_existed_resumes_on_the_real_clock():
    import json

    from acco.config.experiments import compose
    from acco.train.checkpoint import _first_difference, identity, with_added_settings

    now = identity(compose(["method=acco"]))
    older = json.loads(json.dumps(now))
    del older["clock"]
    assert _first_difference(with_added_settings(older), now) is None
    virtual = identity(compose(["method=acco", "clock.mode=virtual", "clock.micro_batch_s=0.1", "clock.sync_s=1"]))
    assert (_first_difference(with_added_settings(older), virtual) or "").startswith("clock.")  # another run


def test_a_virtual_run_needs_no_namespaces_for_its_link(tmp_path):
    """link.* only feed the model: link.mode=netns under an external launcher is refused on the real
    clock (it cannot make namespaces there), not on the virtual one (it makes none)."""
    from acco.config.experiments import compose
    from acco.harness.run.validate import validate

    link = ["method=acco", "link.rate_mbit=10", "link.mode=netns", f"out_dir={tmp_path / 'run'}"]
    virtual = ["clock.mode=virtual", "clock.micro_batch_s=0.1"]
    assert validate(compose([*link, *virtual]), launcher_world_size=2) == 2
    with pytest.raises(ValueError, match="link.mode=netns needs the local launcher"):
        validate(compose(link), launcher_world_size=2)
