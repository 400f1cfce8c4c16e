"""A single-process reference of each method's update rule (docs/rounds.md): sequential, no threads, no
process group, any number of simulated workers, PyTorch's own torch.optim.AdamW on the whole model.

It shares nothing with the engine's rounds, buffers or sharded optimizer, so agreement between the
two is evidence for both. A run sized by a budget (train.samples / train.tokens) stops at the first
committed step whose global micro-batch count reaches it, and its schedule reads that count
(acco.train.budget, shared with the trainer: it is the definition, not the mechanism).
Deterministic mode only: every worker does exactly `accum` micro-batches per round. Worker w's
k-th micro-batch is streams[w].batch(k), as in the distributed run.

    python -m acco.train.reference RUN_DIR   # replays RUN_DIR's config.yaml and compares final_params.pt
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

import torch
from omegaconf import DictConfig

from ..config.schema import typed
from ..engine.flat import ShardLayout, trainable_parameters
from ..engine.local_rounds import LocalSchedule, fragment_bounds
from ..engine.sharded_adamw import AdamWSettings
from ..engine.torch_ddp import adamw_param_groups
from ..methods import get as get_method
from ..methods.tables import add, lookup
from .budget import lr_schedule, run_length


class Reference:
    def __init__(
        self,
        model: torch.nn.Module,
        loss_fn: Callable,
        streams: list,
        accum: int,
        lr_at: Callable[[int, int], float],
        betas=(0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        decay_bias_and_norm: bool = True,
        clip_norm: float = 0.0,
        record_points: bool = False,
    ):
        self.model = model
        self.loss_fn = loss_fn
        self.streams = streams
        self.accum = accum
        self.lr_at = lr_at
        self.clip_norm = clip_norm
        self.params = [p for _, p in trainable_parameters(model)]
        self.opt = torch.optim.AdamW(
            adamw_param_groups(model, weight_decay, decay_bias_and_norm),
            lr=lr_at(0, 0),
            betas=tuple(betas),
            eps=eps,
            foreach=False,
        )
        self.step_count = 0
        self.micro_batches = 0  # global micro-batches of the committed steps
        self.next_k = [0] * len(streams)
        self.record_points = record_points
        self.points: dict[tuple[int, int], torch.Tensor] = {}  # (worker, k) -> parameters seen
        self.history: list[torch.Tensor] = []  # θ_0, θ_1, ... committed
        self.samples_per_micro_batch, self.tokens_per_sample = 1, 0
        self.losses: list[float] = []  # mean loss of each committed step

    # -- vectors ---------------------------------------------------------------------------------
    def vector(self) -> torch.Tensor:
        return torch.cat([p.detach().reshape(-1) for p in self.params]).clone()

    @torch.no_grad()
    def load(self, vec: torch.Tensor) -> None:
        offset = 0
        for p in self.params:
            p.copy_(vec[offset : offset + p.numel()].view_as(p))
            offset += p.numel()

    # -- the two primitives: gradients at a point, an AdamW update --------------------------------
    def gradients_at(self, point: torch.Tensor, workers: list[int] | None = None) -> tuple[torch.Tensor, int, float]:
        """Sum over all workers (or those listed) of `accum` micro-batch gradients at `point` (next
        batches each)."""
        saved = self.vector()
        self.load(point)
        for p in self.params:
            p.grad = torch.zeros_like(p)
        loss_sum, count = 0.0, 0
        for w, stream in enumerate(self.streams):
            if workers is not None and w not in workers:
                continue
            for _ in range(self.accum):
                k = self.next_k[w]
                self.next_k[w] += 1
                if self.record_points:
                    self.points[(w, k)] = point.clone()
                loss = self.loss_fn(self.model, stream.batch(k))
                loss.backward()
                loss_sum += float(loss.detach())
                count += 1
        grad = torch.cat([cast(torch.Tensor, p.grad).reshape(-1) for p in self.params]).clone()
        self.load(saved)
        return grad, count, loss_sum

    def update(self, mean_grad: torch.Tensor, tentative: bool = False) -> torch.Tensor:
        """AdamW from the current committed parameters; a tentative update is undone afterwards
        (snapshot of parameters and state, step, restore) and only its result returned."""
        offset = 0
        for p in self.params:
            p.grad = mean_grad[offset : offset + p.numel()].view_as(p).clone()
            offset += p.numel()
        if self.clip_norm > 0:
            torch.nn.utils.clip_grad_norm_(self.params, self.clip_norm)
        for group in self.opt.param_groups:
            group["lr"] = self.lr_at(self.step_count, self.micro_batches)
        if tentative:
            saved_params = self.vector()
            saved_state = {
                p: {k: (v.clone() if torch.is_tensor(v) else v) for k, v in s.items()}
                for p, s in self.opt.state.items()
            }
            self.opt.step()
            result = self.vector()
            self.load(saved_params)
            self.opt.state.clear()
            self.opt.state.update(saved_state)
            return result
        self.opt.step()
        self.step_count += 1
        return self.vector()

    def commit(self, grad: torch.Tensor, count: int, loss_sum: float) -> torch.Tensor:
        """A committed step on the summed gradient `grad` of `count` micro-batches (their loss sum)."""
        theta = self.update(grad / count)
        self.micro_batches += count
        self.history.append(theta)
        self.losses.append(loss_sum / count)
        return theta

    # -- the methods ----------------------------------------------------------------------------
    def run(
        self,
        rule: str,
        steps: int | None,
        options: Mapping[str, Any] | None = None,
        budget_micro_batches: int | None = None,
    ) -> torch.Tensor:
        """Train by update rule `rule` (RULES; a method's spec names its own: `reference`) for
        `steps` committed steps, or until the committed steps hold `budget_micro_batches` global
        micro-batches (whichever comes first); `options`: the method's settings (cfg.method).
        Returns θ_T (self.history: θ after each step)."""
        if steps is None and budget_micro_batches is None:
            raise ValueError("give steps or budget_micro_batches")
        update_rule = lookup(RULES, rule, "reference update rule")
        return update_rule(self, ReferenceRun(steps, budget_micro_batches, dict(options or {})))

    def start(self) -> torch.Tensor:
        """θ_0, the history's first entry."""
        theta = self.vector()
        self.history = [theta]
        return theta

    def local_step(self, thetas: list[torch.Tensor], states: list) -> None:
        """One inner step of every worker w from its own parameters thetas[w] and AdamW state
        states[w] (swapped into the one optimizer), thetas updated in place: one step counted, its
        micro-batches and its mean loss recorded (a local method's step)."""
        world = len(thetas)
        loss_total = 0.0
        for w in range(world):
            g, n, loss = self.gradients_at(thetas[w], [w])
            self.load(thetas[w])
            self.opt.state = states[w]
            thetas[w] = self.update(g / n)
            self.step_count -= 1  # one inner step of every worker is one step
            loss_total += loss
        self.step_count += 1
        self.micro_batches += world * self.accum
        self.losses.append(loss_total / (world * self.accum))

    def run_local_method(self, steps: int, schedule: LocalSchedule, padded: int) -> torch.Tensor:
        """diloco / streaming_diloco for `steps` inner steps: one
        AdamW state per worker (swapped into the one torch.optim.AdamW), an outer
        torch.optim.SGD(nesterov=True) per fragment; `padded`: the flat vector's padded length,
        which places the fragments' boundaries. Returns φ_T (self.history: φ after each step)."""
        world = len(self.streams)
        numel = self.vector().numel()
        thetas = [self.vector() for _ in range(world)]
        states = [self.opt.state.__class__(dict) for _ in range(world)]
        bounds = [(a, min(b, numel)) for a, b in fragment_bounds(padded, world, schedule.fragments)]
        anchors = [torch.nn.Parameter(thetas[0][a:b].clone()) for a, b in bounds]
        outers = [
            torch.optim.SGD([p], lr=schedule.outer_lr, momentum=schedule.outer_momentum, nesterov=True) for p in anchors
        ]
        flight: tuple[int, torch.Tensor, int] | None = None  # (fragment, φ'_f, lands after step)
        last_start = [0] * schedule.fragments

        def land() -> None:
            nonlocal flight
            if flight is None:
                return
            f, new, _ = flight
            flight = None
            a, b = bounds[f]
            with torch.no_grad():
                anchors[f].copy_(new)
            alpha = schedule.mixing
            for w in range(world):  # θ_{w,f} <- α·θ_{w,f} + (1-α)·φ'_f
                thetas[w][a:b] = new.clone() if alpha == 0.0 else thetas[w][a:b] * alpha + new * (1 - alpha)

        def start(f: int, step: int) -> None:
            nonlocal flight
            a, b = bounds[f]
            delta = cast(torch.Tensor, sum(anchors[f].detach() - thetas[w][a:b] for w in range(world)) / world)
            saved = anchors[f].detach().clone()
            anchors[f].grad = delta
            outers[f].step()  # φ'_f; φ_f itself changes only when the sync lands
            new = anchors[f].detach().clone()
            with torch.no_grad():
                anchors[f].copy_(saved)
            last_start[f] = step
            flight = (f, new, step + schedule.overlap_steps)

        self.history = [torch.cat([p.detach() for p in anchors])]
        for t in range(steps):
            step = t + 1
            self.local_step(thetas, states)
            if flight is not None and flight[2] <= step:
                land()
            for f in schedule.starts_after(step):
                start(f, step)
                if flight is not None and flight[2] <= step:
                    land()
            if step == steps:
                land()
                for f in range(schedule.fragments):
                    if last_start[f] < step:
                        start(f, step)
                        land()
            self.history.append(torch.cat([p.detach() for p in anchors]))
        return self.history[-1]


# -- the update rules, by the name a method's spec gives (acco/methods/: `reference`) ----------


@dataclass(frozen=True)
class ReferenceRun:
    """How long a rule trains and with which settings of its method."""

    steps: int | None
    budget_micro_batches: int | None = None
    options: Mapping[str, Any] = field(default_factory=dict)  # cfg.method

    def done(self, ref: Reference, t: int) -> bool:
        return (self.steps is not None and t >= self.steps) or (
            self.budget_micro_batches is not None and ref.micro_batches >= self.budget_micro_batches
        )

    def known_last(self, t: int) -> bool:
        """Step t is the last (with a budget alone the last step is known only after it)."""
        return self.steps is not None and t == self.steps - 1


ReferenceRule = Callable[[Reference, ReferenceRun], torch.Tensor]


def sequential(ref: Reference, run: ReferenceRun) -> torch.Tensor:
    """ddp: each step's gradients at θ_t, then the step."""
    theta, t = ref.start(), 0
    while not run.done(ref, t):
        theta = ref.commit(*ref.gradients_at(theta))
        t += 1
    return theta


def _delayed(ref: Reference, run: ReferenceRun, predict: bool) -> torch.Tensor:
    """dpu (wp with `predict`): method.warmup_steps sequential steps, then each step applies the
    previous round's gradients while the next round computes at θ_t (wp: at a predicted θ̂)."""
    warmup_steps = run.options.get("warmup_steps", 0)
    theta, t = ref.start(), 0
    while t < warmup_steps and not run.done(ref, t):
        theta = ref.commit(*ref.gradients_at(theta))
        t += 1
    if not run.done(ref, t):
        pending: tuple[torch.Tensor, int, float] | None = ref.gradients_at(theta)  # at θ_W, nothing to sync yet
        point = theta
        while not run.done(ref, t):
            # while round t syncs `pending`, the compute side computes at `point`
            fresh = ref.gradients_at(point) if not run.known_last(t) else None
            assert pending is not None  # None only after the last round
            theta = ref.commit(*pending)
            if predict:  # predicted next parameters: a second step, same gradient
                point = ref.update(pending[0] / pending[1], tentative=True)
            else:
                point = theta
            pending = fresh
            t += 1
    return theta


def delayed(ref: Reference, run: ReferenceRun) -> torch.Tensor:
    return _delayed(ref, run, predict=False)


def delayed_predict(ref: Reference, run: ReferenceRun) -> torch.Tensor:
    return _delayed(ref, run, predict=True)


def acco(ref: Reference, run: ReferenceRun) -> torch.Tensor:
    """acco: θ_{t+1} from the gradients at θ_t and at the estimate θ̃_t."""
    theta, t = ref.start(), 0
    g_est, n_est, l_est = ref.gradients_at(theta)  # G̃_0 at θ̃_0 = θ_0
    while not run.done(ref, t):
        g, n, loss = ref.gradients_at(theta)  # G_t at θ_t
        theta_est = ref.update(g_est / n_est, tentative=True)  # θ̃_{t+1}
        theta = ref.commit(g_est + g, n_est + n, l_est + loss)  # θ_{t+1}
        if not run.known_last(t):
            g_est, n_est, l_est = ref.gradients_at(theta_est)  # G̃_{t+1} at θ̃_{t+1}
        t += 1
    return theta


def local(ref: Reference, run: ReferenceRun) -> torch.Tensor:
    """diloco, streaming_diloco: Reference.run_local_method with the schedule method.* describes."""
    from .backend_local import local_schedule

    padded = ShardLayout(ref.vector().numel(), len(ref.streams)).padded
    assert run.steps is not None  # validated: a local method runs train.steps
    return ref.run_local_method(run.steps, local_schedule(run.options), padded)


RULES: dict[str, ReferenceRule] = {
    "sequential": sequential,
    "delayed": delayed,
    "delayed_predict": delayed_predict,
    "acco": acco,
    "local": local,
}


def register_rule(name: str, rule: ReferenceRule) -> ReferenceRule:
    """Add a method's update rule (one defined outside acco may instead name `module:function`)."""
    return add(RULES, name, rule, "reference update rule")


def reference_from_config(cfg: dict | DictConfig, record_points: bool = False) -> Reference:
    """The reference for a run's resolved config (a dict, e.g. a run's config.yaml, or its typed
    view): rank 0's model, every rank's data stream."""
    from ..tasks import load_task_factory

    cfg = typed(cfg)
    factory = load_task_factory(cfg.task)
    world = cfg.world_size or 1
    device = torch.device("cpu")
    tasks = [factory(cfg, w, world, device) for w in range(world)]
    adamw = AdamWSettings.of(cfg.optim)
    lr_at = lr_schedule(cfg, world, tasks[0].samples_per_micro_batch, tasks[0].tokens_per_sample)
    ref = Reference(
        tasks[0].model,
        tasks[0].loss_fn,
        [t.train_stream for t in tasks],
        cfg.train.accum,
        lr_at,
        adamw.betas,
        adamw.eps,
        adamw.weight_decay,
        adamw.decay_bias_and_norm,
        adamw.clip_norm,
        record_points,
    )
    ref.samples_per_micro_batch = tasks[0].samples_per_micro_batch  # for a budget (replay)
    ref.tokens_per_sample = tasks[0].tokens_per_sample
    return ref


def replay(cfg: dict | DictConfig, record_points: bool = False) -> Reference:
    cfg = typed(cfg)
    ref = reference_from_config(cfg, record_points)
    length = run_length(cfg.train, ref.tokens_per_sample)
    budget = None
    if length.budget is not None:  # the first micro-batch count whose samples reach the budget
        budget = -(-length.budget // (length.per_sample * ref.samples_per_micro_batch))
    spec = get_method(cfg.method.name)
    if not spec.reference:
        raise ValueError(f"method {spec.name!r} has no reference update rule (its spec's `reference`)")
    ref.run(spec.reference, length.steps, cfg.method, budget)
    return ref


def main(argv: list[str]) -> int:
    import argparse
    import os

    import yaml

    parser = argparse.ArgumentParser(
        prog="python -m acco.train.reference", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "run_dir", help="a deterministic run's folder (config.yaml, and final_params.pt: train.save_final_params=true)"
    )
    run_dir = parser.parse_args(argv).run_dir
    if not os.path.isfile(os.path.join(run_dir, "config.yaml")):
        print(f"error: {run_dir} is not a run folder (no config.yaml)", file=sys.stderr)
        return 2
    with open(os.path.join(run_dir, "config.yaml")) as f:
        cfg = yaml.safe_load(f)
    if not cfg["train"]["deterministic"]:
        print("error: the reference replays deterministic runs only (train.deterministic=true)", file=sys.stderr)
        return 2
    ref = replay(cfg)
    final = torch.load(os.path.join(run_dir, "final_params.pt"))
    diff = (ref.history[-1] - final).abs().max().item()
    print(f"max |θ_ref - θ_run| = {diff:.3e} over {final.numel()} parameters after {len(ref.history) - 1} steps")
    return 0 if diff < 1e-4 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
