"""The in-process side of the emulated link, configured once per worker process:

- delay mode (no namespaces): after each collective, sleep until it has taken as long as its bytes
  would take on a link of `rate_mbit` (what this rank sends in a ring collective), plus latency;
- netns mode: the kernel shapes the rate, and only the latency (no netem in this kernel) is a sleep.

Latency is charged once per sequential step of a ring collective ((N-1) steps for reduce-scatter
and all-gather, 2(N-1) for all-reduce), the α of the α-β model in acco/analytic/costmodel.py."""
from __future__ import annotations

import time

_rate_bytes_per_s = 0.0   # 0: the rate is not emulated here (unlimited, or shaped by the kernel)
_latency_s = 0.0
charged_s = 0.0           # total sleep added in this process (for tests and reports)


def configure(rate_mbit: float, delay_ms: float) -> None:
    global _rate_bytes_per_s, _latency_s, charged_s
    _rate_bytes_per_s = float(rate_mbit) * 1e6 / 8
    _latency_s = float(delay_ms) / 1e3
    charged_s = 0.0


def active() -> bool:
    return _rate_bytes_per_s > 0 or _latency_s > 0


def ring_bytes(kind: str, buffer_bytes: int, world: int) -> tuple[float, int]:
    """(bytes one rank sends, sequential steps) of a ring collective over a buffer of `buffer_bytes`."""
    if world <= 1:
        return 0.0, 0
    share = (world - 1) / world * buffer_bytes
    if kind == "all_reduce":
        return 2 * share, 2 * (world - 1)
    if kind in ("reduce_scatter", "all_gather"):
        return share, world - 1
    raise ValueError(f"unknown collective {kind!r}")


def target_s(kind: str, buffer_bytes: int, world: int) -> float:
    sent, steps = ring_bytes(kind, buffer_bytes, world)
    return (sent / _rate_bytes_per_s if _rate_bytes_per_s > 0 else 0.0) + steps * _latency_s


def after(kind: str, buffer_bytes: int, world: int, started: float) -> None:
    """Called right after a collective that started at time.perf_counter() == `started`."""
    global charged_s
    if not active() or world <= 1:
        return
    left = target_s(kind, buffer_bytes, world) - (time.perf_counter() - started)
    if left > 0:
        time.sleep(left)
        charged_s += left


def install_on_torch_ddp(torch_ddp, world: int) -> None:
    """The same link for PyTorch's DDP + ZeroRedundancyOptimizer: a comm hook delays each bucket's
    all-reduce, and the optimizer step (whose partition broadcasts move the bytes of an
    all-gather of the parameters) is delayed like an all-gather."""
    if not active():
        return
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

    def delayed_allreduce(state, bucket):
        started = time.perf_counter()
        nbytes = bucket.buffer().numel() * bucket.buffer().element_size()
        fut = default_hooks.allreduce_hook(state, bucket)

        def done(f):
            after("all_reduce", nbytes, world, started)
            return f.value()
        return fut.then(done)

    # state = the process group DDP was built on (its step timeout), as for DDP's own hook
    torch_ddp.ddp.register_comm_hook(torch_ddp.group, delayed_allreduce)
    param_bytes = sum(p.numel() * p.element_size() for p in torch_ddp.params)
    step = torch_ddp.opt.step

    def delayed_step(*args, **kwargs):
        started = time.perf_counter()
        out = step(*args, **kwargs)
        after("all_gather", param_bytes, world, started)
        return out
    torch_ddp.opt.step = delayed_step
