"""A gradient oracle: a model that records the parameters each micro-batch saw, with gradients
known in closed form, and a replay that rebuilds a run's committed steps from those records with
PyTorch's own AdamW, method by method, checking where every gradient was computed.

Loss of rank r's k-th micro-batch: 0.5 * sum_i a_i (w_i - x_{r,k,i})^2, gradient a * (w - x)."""

from __future__ import annotations

import os
import time
import warnings

import torch
from torch import nn

from acco.tasks import Task


def oracle_x(seed: int, rank: int, k: int, dim: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed * 1_000_003 + rank * 10_007 + k)
    return torch.randn(dim, generator=g)


def oracle_a(dim: int) -> torch.Tensor:
    return torch.linspace(0.5, 2.0, dim)


def oracle_theta0(seed: int, dim: int) -> torch.Tensor:
    return torch.randn(dim, generator=torch.Generator().manual_seed(seed + 17))


class OracleModel(nn.Module):
    def __init__(self, dim: int, seed: int):
        super().__init__()
        self.w = nn.Parameter(oracle_theta0(seed, dim).reshape(2, dim // 2))  # 2-D: decayed
        self.a = oracle_a(dim)
        self.seen: dict[int, torch.Tensor] = {}


class OracleStream:
    def __init__(self, seed: int, rank: int, dim: int):
        self.seed, self.rank, self.dim = seed, rank, dim

    def batch(self, k: int):
        return k, oracle_x(self.seed, self.rank, k, self.dim)


def build_oracle_task(cfg: dict, rank: int, world_size: int, device) -> Task:
    opts = cfg.get("oracle") or {}
    dim = int(opts.get("dim", 38))
    busy_s = float(opts.get("busy_ms", 0.0)) / 1000.0
    # the warning torch.cuda.set_sync_debug_mode("warn") gives a synchronizing call, from this
    # file's line, for the GPU check's host-sync part tested on CPU
    warn_sync = bool(opts.get("warn_sync", False))
    seed = int(cfg["seed"])
    model = OracleModel(dim, seed)

    def loss_fn(m, batch):
        k, x = batch
        w = m.w.reshape(-1)
        m.seen[k] = w.detach().clone()
        if busy_s:
            time.sleep(busy_s)  # a stand-in for a real forward/backward's duration
        if warn_sync:
            warnings.warn("called a synchronizing CUDA operation", UserWarning, stacklevel=1)  # SYNC_LINE
        return 0.5 * (m.a * (w - x) ** 2).sum()

    def on_finish(out_dir: str) -> None:
        torch.save(model.seen, os.path.join(out_dir, f"oracle_rank{rank}.pt"))

    return Task(
        model=model,
        loss_fn=loss_fn,
        train_stream=OracleStream(seed, rank, dim),
        samples_per_micro_batch=1,
        on_finish=on_finish,
    )


# -- replay ------------------------------------------------------------------------------------
class Replay:
    """Rebuild θ_0..θ_T from the recorded points with torch.optim.AdamW, asserting that each
    micro-batch saw the point the method prescribes."""

    def __init__(self, cfg: dict, out_dir: str, world: int, counts: list[list[int]], atol=2e-6):
        from acco.engine.schedule import make_lr_schedule

        opts = cfg.get("oracle") or {}
        self.dim = int(opts.get("dim", 38))
        self.seed = int(cfg["seed"])
        self.world = world
        self.a = oracle_a(self.dim)
        self.seen = [torch.load(os.path.join(out_dir, f"oracle_rank{r}.pt")) for r in range(world)]
        optim = cfg["optim"]
        steps = int(cfg["train"]["steps"])
        self.lr_at = make_lr_schedule(
            optim["lr"], optim["schedule"], optim["warmup_steps"], steps, optim.get("min_lr_ratio", 0.0)
        )
        self.param = nn.Parameter(oracle_theta0(self.seed, self.dim).clone())
        self.opt = torch.optim.AdamW(
            [self.param],
            lr=self.lr_at(0),
            betas=tuple(optim["betas"]),
            eps=optim["eps"],
            weight_decay=optim["weight_decay"],
            foreach=False,
        )
        self.committed = 0
        self.atol = atol
        # rank r's rounds as lists of micro-batch indices, in order
        self.rounds = []
        for r in range(world):
            k, rr = 0, []
            for n in counts[r]:
                rr.append(list(range(k, k + n)))
                k += n
            self.rounds.append(rr)
        assert all(len(self.seen[r]) == sum(counts[r]) for r in range(world)), "records vs round counts"
        self.checked = 0

    def theta(self) -> torch.Tensor:
        return self.param.detach().clone()

    def grads(self, round_index: int, expected_point: torch.Tensor | None, what: str):
        """Sum of closed-form gradients over every rank's micro-batches of one round (at the points
        they recorded) and their count; checks each point against `expected_point`."""
        total, count = torch.zeros(self.dim), 0
        for r in range(self.world):
            for k in self.rounds[r][round_index]:
                point = self.seen[r][k]
                if expected_point is not None:
                    err = (point - expected_point).abs().max().item()
                    assert err <= self.atol, f"rank {r} micro-batch {k}: {what} off by {err:.2e}"
                    self.checked += 1
                total += self.a * (point - oracle_x(self.seed, r, k, self.dim))
                count += 1
        return total, count

    def step(self, mean_grad: torch.Tensor, tentative: bool = False) -> torch.Tensor:
        self.param.grad = mean_grad.clone()
        for g in self.opt.param_groups:
            g["lr"] = self.lr_at(self.committed)
        if tentative:
            saved = self.theta()
            state = {
                p: {k: (v.clone() if torch.is_tensor(v) else v) for k, v in s.items()}
                for p, s in self.opt.state.items()
            }
            self.opt.step()
            out = self.theta()
            with torch.no_grad():
                self.param.copy_(saved)
            self.opt.state.clear()
            self.opt.state.update(state)
            return out
        self.opt.step()
        self.committed += 1
        return self.theta()
