"""diloco and streaming_diloco (acco/engine/local_rounds.py): where every micro-batch's gradient was
computed, and every inner and outer step, proven with the gradient oracle and a replay written here
with PyTorch's own AdamW (one per worker) and SGD(nesterov=True) (one per fragment); the schedule's
timetable; and the one-line errors for settings it cannot run.

Here the tests that start processes (marked integration); the in-process ones are in
tests/unit/test_local_methods.py."""

from __future__ import annotations

import csv
import os

import pytest
import torch
from torch import nn

from acco.engine.local_rounds import fragment_bounds
from tests.helpers.oracle import oracle_a, oracle_theta0, oracle_x
from tests.helpers.oracle_runs import oracle_run


# -- the gradient oracle --------------------------------------------------------------------------
class LocalReplay:
    """The run rebuilt from the points its micro-batches recorded: per worker a torch AdamW over its
    own copy of the vector, per fragment a torch SGD(nesterov) over φ_f."""

    def __init__(self, cfg: dict, out: str, world: int, bounds: list[tuple[int, int]]):
        from acco.engine.schedule import make_lr_schedule

        optim, method = cfg["optim"], cfg["method"]
        self.dim = int((cfg.get("oracle") or {}).get("dim", 38))
        self.seed, self.world, self.accum = int(cfg["seed"]), world, int(cfg["train"]["accum"])
        self.seen = [torch.load(os.path.join(out, f"oracle_rank{r}.pt")) for r in range(world)]
        self.lr_at = make_lr_schedule(optim["lr"], optim["schedule"], optim["warmup_steps"], int(cfg["train"]["steps"]))
        theta0 = oracle_theta0(self.seed, self.dim)
        self.local = [nn.Parameter(theta0.clone()) for _ in range(world)]
        adamw = dict(betas=tuple(optim["betas"]), eps=optim["eps"], weight_decay=optim["weight_decay"], foreach=False)
        self.inner = [torch.optim.AdamW([p], lr=self.lr_at(0), **adamw) for p in self.local]
        self.bounds = [(a, min(b, self.dim)) for a, b in bounds]
        self.anchor = [nn.Parameter(theta0[a:b].clone()) for a, b in self.bounds]
        self.outer = [
            torch.optim.SGD([p], lr=method["outer_lr"], momentum=method["outer_momentum"], nesterov=True)
            for p in self.anchor
        ]
        self.mixing = float(method["mixing"])
        self.next_k = [0] * world
        self.checked = 0

    def inner_step(self, t: int) -> float:
        """Every worker's micro-batches of step t, each checked against the worker's own θ_w."""
        loss = 0.0
        for w in range(self.world):
            theta = self.local[w].detach()
            grad = torch.zeros(self.dim)
            for _ in range(self.accum):
                k = self.next_k[w]
                self.next_k[w] += 1
                point = self.seen[w][k]
                err = (point - theta).abs().max().item()
                assert err <= 2e-6, f"rank {w} micro-batch {k} (step {t + 1}) not at its own θ_w: off by {err:.2e}"
                self.checked += 1
                x = oracle_x(self.seed, w, k, self.dim)
                grad += oracle_a(self.dim) * (point - x)
                loss += float(0.5 * (oracle_a(self.dim) * (point - x) ** 2).sum())
            self.local[w].grad = grad / self.accum
            for g in self.inner[w].param_groups:
                g["lr"] = self.lr_at(t)
            self.inner[w].step()
        return loss / (self.world * self.accum)

    def outer_step(self, f: int) -> torch.Tensor:
        """φ'_f from the workers' θ_{w,f} now (φ_f itself is set when the sync lands)."""
        a, b = self.bounds[f]
        phi = self.anchor[f]
        saved = phi.detach().clone()
        phi.grad = sum(saved - self.local[w].detach()[a:b] for w in range(self.world)) / self.world
        self.outer[f].step()
        new = phi.detach().clone()
        with torch.no_grad():
            phi.copy_(saved)
        return new

    def land(self, f: int, new: torch.Tensor) -> None:
        a, b = self.bounds[f]
        with torch.no_grad():
            self.anchor[f].copy_(new)
            for p in self.local:
                p[a:b] = self.mixing * p[a:b] + (1 - self.mixing) * new

    def phi(self) -> torch.Tensor:
        return torch.cat([p.detach() for p in self.anchor])


def local_run(tmp_path, method_args, world, steps, accum=2):
    # AdamW sensitive to the gradient's scale (large eps): each worker divides by its own count
    out, run, counts, final = oracle_run(tmp_path, method_args, world, steps, accum, extra=["optim.eps=0.5"])
    assert run["summary"]["status"] == "completed"
    assert counts == [[accum] * steps] * world
    with open(os.path.join(out, "metrics.csv")) as f:
        losses = [float(r["train_loss"]) for r in csv.DictReader(f)]
    return out, run, losses, final


@pytest.mark.integration
@pytest.mark.parametrize("world", [2, 3])
def test_diloco_inner_steps_on_own_data_then_nesterov_outer_step(tmp_path, world):
    """H = 3, 8 steps: outer steps after inner steps 3 and 6, and one more after step 8 (the run
    ends with everything synchronised); every worker restarts from φ."""
    steps, h = 8, 3
    out, run, losses, final = local_run(tmp_path, ["method=diloco", f"method.sync_every={h}"], world, steps)
    rp = LocalReplay(run["cfg"], out, world, [(0, 38)])
    outer_steps = 0
    for t in range(steps):
        assert losses[t] == pytest.approx(rp.inner_step(t), rel=1e-5)
        if (t + 1) % h == 0 or t + 1 == steps:
            rp.land(0, rp.outer_step(0))  # not overlapped: lands at once, θ_w <- φ (α = 0)
            outer_steps += 1
            for p in rp.local:
                assert torch.equal(p.detach(), rp.phi())
    assert outer_steps == 3 and rp.checked == world * 2 * steps
    torch.testing.assert_close(final, rp.phi(), rtol=1e-5, atol=1e-6)
    # the workers really drifted apart between outer steps (otherwise this proves little)
    assert not torch.allclose(rp.seen[0][2], rp.seen[1][2])


@pytest.mark.integration
def test_streaming_diloco_fragments_land_tau_steps_later_and_mix(tmp_path):
    """2 fragments, H = 4, τ = 1, α = 0.25, 10 steps: fragment 0 starts after steps 2, 6, 10,
    fragment 1 after 4, 8; each lands one inner step later, mixed into θ_w (a quarter of θ_w kept); after
    step 10 the one in flight lands and fragment 1 (last started at 8) syncs once more."""
    world, steps = 2, 10
    args = [
        "method=streaming_diloco",
        "method.sync_every=4",
        "method.fragments=2",
        "method.overlap_steps=1",
        "method.mixing=0.25",
    ]
    out, run, losses, final = local_run(tmp_path, args, world, steps)
    bounds = fragment_bounds(38, world, 2)
    assert bounds == [(0, 20), (20, 38)]
    rp = LocalReplay(run["cfg"], out, world, bounds)
    starts = {2: 0, 6: 0, 10: 0, 4: 1, 8: 1}
    flight = None  # (fragment, φ'_f, lands after)
    for t in range(steps):
        step = t + 1
        assert losses[t] == pytest.approx(rp.inner_step(t), rel=1e-5)
        if flight and flight[2] == step:
            rp.land(flight[0], flight[1])
            flight = None
        if step in starts:
            flight = (starts[step], rp.outer_step(starts[step]), step + 1)
    rp.land(flight[0], flight[1])  # the last step: the sync in flight lands at once ...
    rp.land(1, rp.outer_step(1))  # ... and fragment 1's last 2 inner steps are synchronised
    torch.testing.assert_close(final, rp.phi(), rtol=1e-5, atol=1e-6)
    # mixing kept the workers apart after a landing (α > 0), unlike diloco
    assert not torch.allclose(rp.local[0].detach(), rp.local[1].detach())
